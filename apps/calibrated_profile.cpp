#include "calibrated_profile.hpp"

#include <yaml-cpp/yaml.h>

#include <stdlib.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "command_context.hpp"
#include "metric_text.hpp"
#include "core/hardware/hardware_profile.hpp"
#include "core/input/closest_match.hpp"
#include "core/input/input_error.hpp"
#include "core/io/io_error.hpp"
#include "core/io/json_file.hpp"

namespace prefetchlab::apps {

std::filesystem::path find_base_profile(const std::string& name, const std::string& key) {
  const core::BundledData bundled = bundled_data();
  const std::string base_name = name.empty() ? "h100-sxm-8x" : name;
  const auto path = core::find_hardware_profile(base_name, bundled.hardware_dir);
  if (!path) {
    throw core::InputError({"<command line>", 0}, key, "'" + base_name + "' is neither a file nor a bundled profile",
                           "the base hardware profile: bundled name or YAML path",
                           core::closest_match(base_name, core::bundled_hardware_names(bundled.hardware_dir)));
  }
  return *path;
}

void write_calibrated_profile(const std::filesystem::path& base, const std::string& output, const std::string& header,
                              const std::map<std::string, double>& values,
                              const std::optional<std::string>& curves_yaml) {
  std::ifstream in(base);
  std::stringstream text;
  text << in.rdbuf();
  const std::string stem = std::filesystem::path(output).stem().string();
  std::string out_text;
  YAML::Node root = YAML::Load(text.str());
  if (!root["calibration"]) {
    // Keep the base file's text and comments; rename it and append the section.
    std::string line;
    std::istringstream lines(text.str());
    while (std::getline(lines, line)) {
      if (line.starts_with("name:")) line = "name: " + stem;
      out_text += line + "\n";
    }
    out_text += "\n" + header + "calibration:\n";
    for (const auto& [k, v] : values) out_text += "  " + k + ": " + fmt("%.6g", v) + "\n";
    if (curves_yaml) out_text += "  measured_collectives:\n" + *curves_yaml;
  } else {
    root["name"] = stem;
    for (const auto& [k, v] : values) root["calibration"][k] = fmt("%.6g", v);
    if (curves_yaml) {
      YAML::Node curve_nodes = YAML::Load(*curves_yaml);
      for (auto item : curve_nodes) {
        item["sizes_bytes"].SetStyle(YAML::EmitterStyle::Flow);
        item["times_us"].SetStyle(YAML::EmitterStyle::Flow);
      }
      root["calibration"]["measured_collectives"] = curve_nodes;
    }
    YAML::Emitter emitter;
    emitter << root;
    out_text = header + emitter.c_str() + std::string("\n");
  }
  // Checked before it replaces anything: written into a private folder beside `output` (same
  // file system, so the final rename is atomic), loaded as any profile is, and only then renamed
  // over `output`. A profile that does not load leaves the old one in place.
  const std::filesystem::path out(output);
  const std::filesystem::path dir = out.parent_path().empty() ? std::filesystem::path(".") : out.parent_path();
  std::string staging = (dir / ".calibrate-XXXXXX").string();
  if (mkdtemp(staging.data()) == nullptr) throw core::IoError("cannot create a staging folder in", dir, errno);
  const std::filesystem::path staged = std::filesystem::path(staging) / out.filename();
  const auto discard = [&] {
    std::error_code ignored;
    std::filesystem::remove_all(staging, ignored);
  };
  try {
    core::write_text_atomically(staged, out_text);
    core::load_hardware_profile(staged);
  } catch (const core::InputError& e) {
    discard();
    throw core::InputError({output, e.where().line}, e.key(), e.problem() + " (not written: " + output + " is unchanged)",
                           e.expected(), e.suggestion());
  } catch (...) {
    discard();
    throw;
  }
  std::error_code ec;
  std::filesystem::rename(staged, out, ec);
  const int rename_error = ec.value();
  discard();
  if (rename_error != 0) throw core::IoError("cannot move the calibrated profile to", out, rename_error);
}

}  // namespace prefetchlab::apps
