#include "core/io/csv_reader.hpp"

namespace prefetchlab::core {

CsvText parse_csv(std::string_view text) {
  CsvText out;
  CsvRecord record;
  std::string field;
  bool in_quotes = false;
  bool field_was_quoted = false;
  int line = 1;
  std::size_t record_start = 0;
  record.line = line;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_quotes) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field.push_back('"');
          ++i;
        } else {
          in_quotes = false;
        }
      } else {
        if (c == '\n') ++line;
        field.push_back(c);
      }
      continue;
    }
    switch (c) {
      case '"':
        // A quote opens a quoted field only at its start; elsewhere it is kept as written.
        if (field.empty() && !field_was_quoted) {
          in_quotes = true;
          field_was_quoted = true;
        } else {
          field.push_back(c);
        }
        break;
      case ',':
        record.fields.push_back(std::move(field));
        field.clear();
        field_was_quoted = false;
        break;
      case '\n':
        record.fields.push_back(std::move(field));
        field.clear();
        field_was_quoted = false;
        record.text.assign(text.substr(record_start, i + 1 - record_start));
        out.records.push_back(std::move(record));
        record = CsvRecord{};
        record_start = i + 1;
        out.complete_bytes = record_start;
        record.line = ++line;
        break;
      default: field.push_back(c);
    }
  }
  out.torn_tail = out.complete_bytes < text.size();
  return out;
}

}  // namespace prefetchlab::core
