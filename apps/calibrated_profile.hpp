#pragma once
// Writes a calibrated hardware profile: the base profile with a `calibration:` section set to
// `values` (YAML key -> number) and, when given, `measured_collectives`. Shared by calibrate's
// sources (nccl-tests logs, a real run's traces).
#include <filesystem>
#include <map>
#include <optional>
#include <string>

namespace prefetchlab::apps {

// The base profile a calibration starts from: `name` (a bundled name or a YAML path; empty:
// h100-sxm-8x) found on disk, or bad input naming `key` (the option that gave it) with the
// closest bundled names.
std::filesystem::path find_base_profile(const std::string& name, const std::string& key);

// `header`: comment lines ("# ...\n") saying where the figures came from. The profile's name
// becomes the output file's stem. The written file is read back (a profile that does not load
// is an error here, not at the next run).
void write_calibrated_profile(const std::filesystem::path& base, const std::string& output, const std::string& header,
                              const std::map<std::string, double>& values,
                              const std::optional<std::string>& curves_yaml);

}  // namespace prefetchlab::apps
