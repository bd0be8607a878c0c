#include "core/io/csv_row_writer.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>

#include "core/io/io_error.hpp"
#include "core/io/output_file.hpp"

namespace prefetchlab::core {

std::string CsvField::format_integer(long long value) {
  char buffer[24];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

std::string CsvField::format_unsigned(unsigned long long value) {
  char buffer[24];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

CsvField::CsvField(double value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  text_.assign(buffer, result.ptr);
}

CsvField::CsvField(std::string_view text) : text_(csv_escape(text)) {}

std::string csv_escape(std::string_view text) {
  if (text.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(text);
  std::string quoted;
  quoted.reserve(text.size() + 2);
  quoted.push_back('"');
  for (const char c : text) {
    if (c == '"') quoted.push_back('"');
    quoted.push_back(c);
  }
  quoted.push_back('"');
  return quoted;
}

void CsvRowWriter::FileCloser::operator()(std::FILE* file) const { std::fclose(file); }

CsvRowWriter::CsvRowWriter(std::filesystem::path path, const std::vector<std::string>& header)
    : CsvRowWriter(std::move(path), header, Mode::kTruncate) {}

CsvRowWriter CsvRowWriter::append_to(std::filesystem::path path, const std::vector<std::string>& header) {
  return CsvRowWriter(std::move(path), header, Mode::kAppend);
}

CsvRowWriter::CsvRowWriter(std::filesystem::path path, const std::vector<std::string>& header, Mode mode)
    : path_(std::move(path)), columns_(header.size()) {
  if (header.empty()) throw std::invalid_argument("CSV header of '" + path_.string() + "' is empty");
  bool has_content = false;
  if (mode == Mode::kAppend) {
    std::error_code missing;
    const auto size = std::filesystem::file_size(path_, missing);
    has_content = !missing && size > 0;
  }
  file_.reset(open_output_file(path_, mode == Mode::kAppend ? OutputMode::kAppend : OutputMode::kTruncate));
  struct stat status{};
  if (::fstat(::fileno(file_.get()), &status) != 0) throw IoError("cannot stat", path_, errno);
  committed_bytes_ = static_cast<std::int64_t>(status.st_size);
  if (has_content) return;
  std::vector<CsvField> fields(header.begin(), header.end());
  std::string line;
  add_row(fields, line);
  write_and_flush(line);
}

CsvRowWriter::~CsvRowWriter() = default;
CsvRowWriter::CsvRowWriter(CsvRowWriter&&) noexcept = default;
CsvRowWriter& CsvRowWriter::operator=(CsvRowWriter&&) noexcept = default;

void CsvRowWriter::add_row(std::span<const CsvField> row, std::string& out) const {
  if (row.size() != columns_) {
    throw std::invalid_argument("CSV row for '" + path_.string() + "' has " +
                                std::to_string(row.size()) + " fields, the header has " +
                                std::to_string(columns_));
  }
  for (std::size_t i = 0; i < row.size(); ++i) {
    if (i > 0) out.push_back(',');
    out += row[i].text();
  }
  out.push_back('\n');
}

void CsvRowWriter::write_and_flush(const std::string& text) {
  if (!file_) throw std::logic_error("CSV file '" + path_.string() + "' is already closed");
  // One write(2) loop per call, no stdio buffer: when the disk fills part-way, the file is cut
  // back to what it held before, so every row in it is whole.
  const int fd = ::fileno(file_.get());
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    const int error = n < 0 ? errno : ENOSPC;
    if (::ftruncate(fd, static_cast<off_t>(committed_bytes_)) != 0) {
      // Cannot cut the torn tail: readers drop it (core/io/csv_reader.hpp); still report the write.
    }
    file_.reset();
    throw IoError("cannot write", path_, error);
  }
  committed_bytes_ += static_cast<std::int64_t>(text.size());
}

void CsvRowWriter::append(std::span<const CsvField> row) {
  std::string line;
  add_row(row, line);
  write_and_flush(line);
  ++rows_written_;
}

void CsvRowWriter::append_rows(std::span<const std::vector<CsvField>> rows) {
  if (rows.empty()) return;
  std::string text;
  for (const auto& row : rows) add_row(row, text);
  write_and_flush(text);
  rows_written_ += rows.size();
}

void CsvRowWriter::close() {
  if (!file_) return;
  errno = 0;
  const int result = std::fclose(file_.release());
  if (result != 0) throw IoError("cannot close", path_, errno);
}

}  // namespace prefetchlab::core
