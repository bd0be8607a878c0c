#include "core/metrics/metrics_csv.hpp"

#include <algorithm>
#include <stdexcept>

namespace prefetchlab::core {
namespace {

template <class Record>
struct CsvColumn {
  const char* name;
  CsvField (*value)(const Record&);
};

template <class M>
struct MemberOf;
template <class C, class T>
struct MemberOf<T C::*> {
  using Class = C;
};

// A column that is just a data member written as it is.
template <auto Member>
CsvField member(const typename MemberOf<decltype(Member)>::Class& record) {
  return CsvField(record.*Member);
}

CsvField trace_mode_field(const IterationRecord& r) { return CsvField(trace_mode_name(r.trace_mode)); }

using I = IterationRecord;
constexpr CsvColumn<I> kIterationColumns[] = {
    {"iteration", &member<&I::iteration>},
    {"step", &member<&I::optimizer_step>},
    {"trace_mode", &trace_mode_field},
    {"start_ns", &member<&I::start_ns>},
    {"step_time_ns", &member<&I::step_time_ns>},
    {"forward_ns", &member<&I::forward_ns>},
    {"backward_ns", &member<&I::backward_ns>},
    {"optimizer_ns", &member<&I::optimizer_ns>},
    {"compute_ns", &member<&I::compute_ns>},
    {"forward_stall_ns", &member<&I::forward_stall_ns>},
    {"backward_stall_ns", &member<&I::backward_stall_ns>},
    {"exposed_comm_ns", &member<&I::exposed_comm_ns>},
    {"all_gather_ns", &member<&I::all_gather_ns>},
    {"reduce_scatter_ns", &member<&I::reduce_scatter_ns>},
    {"all_gather_count", &member<&I::all_gather_count>},
    {"reduce_scatter_count", &member<&I::reduce_scatter_count>},
    {"gathered_numel", &member<&I::gathered_numel>},
    {"bucket_numel", &member<&I::bucket_numel>},
    {"peak_gathered_param_bytes", &member<&I::peak_gathered_param_bytes>},
    {"peak_allocated_bytes", &member<&I::peak_allocated_bytes>},
    {"peak_reserved_bytes", &member<&I::peak_reserved_bytes>},
};

// Only in a run whose iterations differ in length (RecordCsv's seq_len_varies).
constexpr CsvColumn<I> kIterationSeqLenColumns[] = {{"seq_len", &member<&I::seq_len>}};

constexpr CsvColumn<BucketRecord> kBucketColumns[] = {
    {"iteration", &member<&BucketRecord::iteration>},
    {"rank", &member<&BucketRecord::rank>},
    {"bucket_numel", &member<&BucketRecord::bucket_numel>},
};

constexpr CsvColumn<MemoryPoint> kMemoryColumns[] = {
    {"time_ns", &member<&MemoryPoint::time_ns>},
    {"rank", &member<&MemoryPoint::rank>},
    {"allocated_bytes", &member<&MemoryPoint::allocated_bytes>},
    {"reserved_bytes", &member<&MemoryPoint::reserved_bytes>},
};

CsvField phase_field(const TimingSample& s) { return CsvField(phase_name(s.phase)); }

using S = TimingSample;
constexpr CsvColumn<S> kSampleColumns[] = {
    {"iteration", &member<&S::iteration>},
    {"rank", &member<&S::rank>},
    {"phase", &phase_field},
    {"wait_ns", &member<&S::wait_ns>},
    {"interval_ns", &member<&S::interval_ns>},
};

std::span<const CsvColumn<IterationRecord>> columns_of(const IterationRecord*) {
  return kIterationColumns;
}
std::span<const CsvColumn<BucketRecord>> columns_of(const BucketRecord*) { return kBucketColumns; }
std::span<const CsvColumn<MemoryPoint>> columns_of(const MemoryPoint*) { return kMemoryColumns; }
std::span<const CsvColumn<TimingSample>> columns_of(const TimingSample*) { return kSampleColumns; }

template <class Record>
std::span<const CsvColumn<Record>> seq_len_columns_of(const Record*) {
  return {};
}
std::span<const CsvColumn<IterationRecord>> seq_len_columns_of(const IterationRecord*) {
  return kIterationSeqLenColumns;
}

template <class Record>
std::vector<std::string> header_of(bool seq_len_varies = false) {
  std::vector<std::string> names;
  for (const auto& column : columns_of(static_cast<const Record*>(nullptr))) {
    names.emplace_back(column.name);
  }
  if (seq_len_varies) {
    for (const auto& column : seq_len_columns_of(static_cast<const Record*>(nullptr))) names.emplace_back(column.name);
  }
  return names;
}

template <class Record>
void add_fields(const Record& record, std::vector<CsvField>& fields, bool seq_len_varies = false) {
  for (const auto& column : columns_of(&record)) fields.push_back(column.value(record));
  if (seq_len_varies) {
    for (const auto& column : seq_len_columns_of(&record)) fields.push_back(column.value(record));
  }
}

bool is_column_name(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

std::vector<std::string> checked_extra_columns(std::vector<std::string> extra) {
  const std::vector<std::string> base = header_of<TimingSample>();
  for (std::size_t i = 0; i < extra.size(); ++i) {
    const std::string& name = extra[i];
    if (!is_column_name(name)) {
      throw std::invalid_argument("samples.csv extra column '" + name +
                                  "' is not a name of letters, digits and '_'");
    }
    if (std::find(base.begin(), base.end(), name) != base.end() ||
        std::find(extra.begin(), extra.begin() + static_cast<std::ptrdiff_t>(i), name) !=
            extra.begin() + static_cast<std::ptrdiff_t>(i)) {
      throw std::invalid_argument("samples.csv column '" + name + "' is declared twice");
    }
  }
  return extra;
}

}  // namespace

template <class Record>
RecordCsv<Record>::RecordCsv(const std::filesystem::path& path, bool seq_len_varies)
    : seq_len_varies_(seq_len_varies), writer_(path, header(seq_len_varies)) {}

template <class Record>
std::vector<std::string> RecordCsv<Record>::header(bool seq_len_varies) {
  return header_of<Record>(seq_len_varies);
}

template <class Record>
std::vector<CsvField> RecordCsv<Record>::row(const Record& record, bool seq_len_varies) {
  std::vector<CsvField> fields;
  add_fields(record, fields, seq_len_varies);
  return fields;
}

template <class Record>
void RecordCsv<Record>::append(const Record& record) {
  writer_.append(row(record, seq_len_varies_));
}

template <class Record>
void RecordCsv<Record>::append(std::span<const Record> records) {
  std::vector<std::vector<CsvField>> rows;
  rows.reserve(records.size());
  for (const Record& record : records) rows.push_back(row(record, seq_len_varies_));
  writer_.append_rows(rows);
}

template class RecordCsv<IterationRecord>;
template class RecordCsv<BucketRecord>;
template class RecordCsv<MemoryPoint>;

namespace {
std::vector<std::string> samples_header(const std::vector<std::string>& extra) {
  std::vector<std::string> names = header_of<TimingSample>();
  names.insert(names.end(), extra.begin(), extra.end());
  return names;
}
}  // namespace

SamplesCsv::SamplesCsv(const std::filesystem::path& path, std::vector<std::string> extra_columns)
    : extra_columns_(checked_extra_columns(std::move(extra_columns))),
      writer_(path, samples_header(extra_columns_)) {}

std::vector<std::string> SamplesCsv::base_header() { return header_of<TimingSample>(); }

std::vector<CsvField> SamplesCsv::row(const TimingSample& sample) const {
  const auto mismatch = [&](const std::string& detail) {
    return std::invalid_argument("sample for " + writer_.path().string() + " (iteration " +
                                 std::to_string(sample.iteration) + ", rank " +
                                 std::to_string(sample.rank) + "): " + detail);
  };
  if (sample.extra.size() != extra_columns_.size()) {
    std::string declared;
    for (const std::string& name : extra_columns_) declared += (declared.empty() ? "" : ",") + name;
    throw mismatch(std::to_string(sample.extra.size()) + " extra values where the file declared " +
                   std::to_string(extra_columns_.size()) + " columns (" + declared + ")");
  }
  std::vector<CsvField> fields;
  fields.reserve(5 + extra_columns_.size());
  add_fields(sample, fields);
  for (const std::int64_t value : sample.extra) fields.emplace_back(value);
  return fields;
}

void SamplesCsv::append(const TimingSample& sample) { writer_.append(row(sample)); }

void SamplesCsv::append(std::span<const TimingSample> samples) {
  std::vector<std::vector<CsvField>> rows;
  rows.reserve(samples.size());
  for (const TimingSample& sample : samples) rows.push_back(row(sample));
  writer_.append_rows(rows);
}

}  // namespace prefetchlab::core
