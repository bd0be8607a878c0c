#include "calibrated_profile.hpp"

#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "command_context.hpp"
#include "metric_text.hpp"
#include "core/hardware/hardware_profile.hpp"
#include "core/input/closest_match.hpp"
#include "core/input/input_error.hpp"
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
  core::write_text_atomically(output, out_text);
  core::load_hardware_profile(output);
}

}  // namespace prefetchlab::apps
