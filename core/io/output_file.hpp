#pragma once
// Opening an output file the way a run on a shared machine must: never through a symbolic link.
// A link planted in an output folder (an old run's folder another user can write into, or a
// folder given by mistake) would otherwise make the run overwrite whatever it points at.
#include <cstdio>
#include <filesystem>

namespace prefetchlab::core {

enum class OutputMode { kTruncate, kAppend };

// Opens `path` for writing (created 0666 less the umask; truncated or appended to). Throws IoError
// naming the path when it is a symbolic link (refused, not followed) or cannot be opened.
std::FILE* open_output_file(const std::filesystem::path& path, OutputMode mode);

// A new, uniquely named file beside `path` (`<path>.tmp.XXXXXX`), created exclusively, so that
// neither a link nor another process's file can be there first. Returns the open file and sets
// `tmp` to its name. Throws IoError naming the folder when it cannot be created.
std::FILE* create_temporary_beside(const std::filesystem::path& path, std::filesystem::path& tmp);

}  // namespace prefetchlab::core
