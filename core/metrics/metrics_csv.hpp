#pragma once
// The row files of a run, one typed writer each, all on CsvRowWriter (flushed per append):
//   iterations.csv  one row per iteration (IterationRecord; `step` = optimizer stepped, 0/1;
//                   `seq_len` last, only when lengths vary)
//   samples.csv     iteration,rank,phase,wait_ns,interval_ns then declared extra columns
//   buckets.csv     iteration,rank,bucket_numel
//   memory.csv      time_ns,rank,allocated_bytes,reserved_bytes
// Each header and its rows come from one column table, so they cannot drift apart.
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "core/io/csv_row_writer.hpp"
#include "core/metrics/metrics.hpp"

namespace prefetchlab::core {

// A CSV file of one record type. Instantiated for IterationRecord, BucketRecord, MemoryPoint.
template <class Record>
class RecordCsv {
 public:
  // Creates `path` and writes the header (std::runtime_error naming the path on failure).
  // `seq_len_varies` (iterations.csv of a run whose lengths vary, RunFacts::seq_len_varies)
  // adds a last `seq_len` column; a fixed-length run's file stays as it always was.
  explicit RecordCsv(const std::filesystem::path& path, bool seq_len_varies = false);

  void append(const Record& record);                // one row, flushed
  void append(std::span<const Record> records);     // several rows, one flush
  void close() { writer_.close(); }
  const std::filesystem::path& path() const { return writer_.path(); }

  static std::vector<std::string> header(bool seq_len_varies = false);
  static std::vector<CsvField> row(const Record& record, bool seq_len_varies = false);

 private:
  bool seq_len_varies_;
  CsvRowWriter writer_;
};

extern template class RecordCsv<IterationRecord>;
extern template class RecordCsv<BucketRecord>;
extern template class RecordCsv<MemoryPoint>;

using IterationsCsv = RecordCsv<IterationRecord>;
using BucketsCsv = RecordCsv<BucketRecord>;
using MemoryCsv = RecordCsv<MemoryPoint>;

// samples.csv. The extra columns are fixed when the file opens; every appended sample must carry
// exactly those (name, value) pairs in that order, else std::invalid_argument naming the column.
class SamplesCsv {
 public:
  // Extra column names: [A-Za-z0-9_]+, unique, none of the base columns (std::invalid_argument).
  explicit SamplesCsv(const std::filesystem::path& path,
                      std::vector<std::string> extra_columns = {});

  void append(const TimingSample& sample);
  void append(std::span<const TimingSample> samples);
  void close() { writer_.close(); }
  const std::filesystem::path& path() const { return writer_.path(); }
  const std::vector<std::string>& extra_columns() const { return extra_columns_; }

  // iteration,rank,phase,wait_ns,interval_ns
  static std::vector<std::string> base_header();

 private:
  std::vector<CsvField> row(const TimingSample& sample) const;

  std::vector<std::string> extra_columns_;
  CsvRowWriter writer_;
};

}  // namespace prefetchlab::core
