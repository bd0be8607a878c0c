#include "core/input/json_section.hpp"

#include <fstream>
#include <memory>
#include <sstream>

#include "core/input/input_error.hpp"

namespace prefetchlab::core {

std::string detab_json(const std::string& text) {
  std::string out = text;
  bool in_string = false;
  bool escaped = false;
  for (char& c : out) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '\t') {
      c = ' ';
    }
  }
  return out;
}

YamlSection load_json_section(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError({file.string(), 0}, "", "cannot be read", "a readable JSON file");
  std::stringstream buffer;
  buffer << in.rdbuf();
  auto source = std::make_shared<YamlSource>();
  source->file = file.string();
  YAML::Node root;
  try {
    root = YAML::Load(detab_json(buffer.str()));
  } catch (const YAML::Exception& e) {
    throw InputError({source->file, e.mark.line >= 0 ? e.mark.line + 1 : 0}, "",
                     "is not valid JSON (" + e.msg + ")", "a well-formed JSON object");
  }
  if (!root.IsMap()) {
    throw InputError({source->file, 1}, "", "is not a JSON object", "a JSON object of keys and values");
  }
  return YamlSection::from_node(root, source);
}

}  // namespace prefetchlab::core
