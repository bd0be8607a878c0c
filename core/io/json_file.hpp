#pragma once
// Whole-document files (summary.json, trace.json, reports) are never seen half-written: the
// text goes to a new `<path>.tmp.XXXXXX` (created exclusively: never through a link), is flushed
// and synced, then renamed over `path` (atomic on POSIX within one file system). An older file
// or link at `path` is replaced; no temporary is left behind.
#include <filesystem>
#include <string_view>

#include <nlohmann/json.hpp>

namespace prefetchlab::core {

// Writes `text` atomically as described above. Throws std::runtime_error naming the path and
// the system's reason when the file cannot be written or renamed.
void write_text_atomically(const std::filesystem::path& path, std::string_view text);

// JSON pretty-printed with 2-space indents and a trailing newline. nlohmann::json sorts keys;
// ordered_json keeps insertion order: either way the same value gives the same bytes. Invalid
// UTF-8 in strings is replaced (U+FFFD) rather than failing the write.
void write_json_atomically(const std::filesystem::path& path, const nlohmann::json& document);
void write_json_atomically(const std::filesystem::path& path,
                           const nlohmann::ordered_json& document);

}  // namespace prefetchlab::core
