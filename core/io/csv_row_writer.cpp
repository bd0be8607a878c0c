#include "core/io/csv_row_writer.hpp"

#include <cerrno>
#include <charconv>
#include <stdexcept>
#include <system_error>

namespace prefetchlab::core {
namespace {

[[noreturn]] void throw_io_error(const char* what, const std::filesystem::path& path, int error) {
  std::string message = std::string(what) + " '" + path.string() + "'";
  if (error != 0) message += ": " + std::generic_category().message(error);
  throw std::runtime_error(message);
}

}  // namespace

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
  errno = 0;
  file_.reset(std::fopen(path_.c_str(), mode == Mode::kAppend ? "ab" : "wb"));
  if (!file_) throw_io_error("cannot open for writing", path_, errno);
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
  errno = 0;
  const std::size_t written = std::fwrite(text.data(), 1, text.size(), file_.get());
  if (written != text.size() || std::fflush(file_.get()) != 0) {
    throw_io_error("cannot write", path_, errno);
  }
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
  if (result != 0) throw_io_error("cannot close", path_, errno);
}

}  // namespace prefetchlab::core
