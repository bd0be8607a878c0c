#pragma once
// A CSV file written row by row, flushed after every append, so a run that is killed loses no
// row that had been appended. Format (RFC 4180 with '\n' line ends): integers exactly; doubles
// in the shortest form that reads back to the same value (std::to_chars, locale-independent:
// "0.1", "1e+20", "nan", "inf"); text quoted when it holds a comma, a double quote, CR or LF,
// with inner quotes doubled.
#include <cstdio>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace prefetchlab::core {

// One cell, already formatted as it will appear in the file.
class CsvField {
 public:
  template <class T>
    requires(std::is_integral_v<T> && std::is_signed_v<T> && !std::is_same_v<T, char>)
  CsvField(T value) : text_(format_integer(static_cast<long long>(value))) {}  // NOLINT
  template <class T>
    requires(std::is_integral_v<T> && std::is_unsigned_v<T> && !std::is_same_v<T, bool> &&
             !std::is_same_v<T, char>)
  CsvField(T value) : text_(format_unsigned(static_cast<unsigned long long>(value))) {}  // NOLINT
  CsvField(bool value) : text_(value ? "1" : "0") {}                          // NOLINT
  CsvField(double value);                                                     // NOLINT
  CsvField(std::string_view text);                                            // NOLINT
  CsvField(const char* text) : CsvField(std::string_view(text)) {}            // NOLINT
  CsvField(const std::string& text) : CsvField(std::string_view(text)) {}     // NOLINT

  const std::string& text() const { return text_; }

 private:
  static std::string format_integer(long long value);
  static std::string format_unsigned(unsigned long long value);
  std::string text_;
};

// The text as a CSV cell: unchanged, or quoted when it must be.
std::string csv_escape(std::string_view text);

class CsvRowWriter {
 public:
  // Creates (truncates) `path` and writes and flushes the header line. Throws
  // std::runtime_error naming the path and the system's reason when it cannot.
  CsvRowWriter(std::filesystem::path path, const std::vector<std::string>& header);
  // Opens `path` to append rows after those it already holds (a resumed sweep); the caller has
  // checked that it starts with `header`. A missing or empty file gets the header first.
  static CsvRowWriter append_to(std::filesystem::path path, const std::vector<std::string>& header);
  ~CsvRowWriter();
  CsvRowWriter(CsvRowWriter&&) noexcept;
  CsvRowWriter& operator=(CsvRowWriter&&) noexcept;
  CsvRowWriter(const CsvRowWriter&) = delete;
  CsvRowWriter& operator=(const CsvRowWriter&) = delete;

  // Writes one row and flushes. The row must have one field per header column
  // (std::invalid_argument otherwise). A failed write (a full disk) throws IoError after
  // cutting the file back to its last complete row, so the file never ends torn; the writer is
  // closed then.
  void append(std::span<const CsvField> row);
  void append(std::initializer_list<CsvField> row) {
    append(std::span<const CsvField>(row.begin(), row.size()));
  }
  // Writes several rows with one flush at the end (e.g. all samples of one iteration).
  void append_rows(std::span<const std::vector<CsvField>> rows);

  // Closes the file, reporting a failure to do so; the destructor closes silently.
  void close();

  const std::filesystem::path& path() const { return path_; }
  std::size_t columns() const { return columns_; }
  std::size_t rows_written() const { return rows_written_; }

 private:
  enum class Mode { kTruncate, kAppend };
  CsvRowWriter(std::filesystem::path path, const std::vector<std::string>& header, Mode mode);

  struct FileCloser {
    void operator()(std::FILE* file) const;
  };
  void add_row(std::span<const CsvField> row, std::string& out) const;
  void write_and_flush(const std::string& text);

  std::filesystem::path path_;
  std::unique_ptr<std::FILE, FileCloser> file_;  // written with write(2), never through stdio
  std::int64_t committed_bytes_ = 0;               // file size after the last complete write
  std::size_t columns_ = 0;
  std::size_t rows_written_ = 0;
};

}  // namespace prefetchlab::core
