#include "calibrated_profile.hpp"

#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "metric_text.hpp"
#include "core/hardware/hardware_profile.hpp"
#include "core/io/json_file.hpp"

namespace prefetchlab::apps {
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
