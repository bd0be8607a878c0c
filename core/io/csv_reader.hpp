#pragma once
// Reading back the row files CsvRowWriter writes (RFC 4180, '\n' line ends), including one that
// was cut short: a process killed mid-append leaves a last record without its line end (or
// inside an open quote). That torn tail is reported, not returned, so a resuming writer can cut
// it off before it appends.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace prefetchlab::core {

struct CsvRecord {
  std::vector<std::string> fields;  // unquoted
  std::string text;                 // the record's exact bytes, line end included
  int line = 0;                     // 1-based line where the record starts
};

struct CsvText {
  std::vector<CsvRecord> records;  // every complete record, the header first
  std::size_t complete_bytes = 0;  // bytes up to the end of the last complete record
  bool torn_tail = false;          // bytes after complete_bytes: a record cut short
};

CsvText parse_csv(std::string_view text);

}  // namespace prefetchlab::core
