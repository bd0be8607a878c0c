#include "core/input/json_section.hpp"

#include <algorithm>
#include <fstream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

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
  const std::string text = buffer.str();
  // JSON as RFC 8259 writes it, before the YAML reader (which would also take comments, tags,
  // single quotes and unquoted keys: a file that is not JSON is not read as if it were).
  if (text.rfind("\xEF\xBB\xBF", 0) == 0) {
    throw InputError({source->file, 1}, "", "starts with a byte-order mark, which JSON does not allow (RFC 8259, 8.1)",
                     "the file saved as UTF-8 without a BOM");
  }
  try {
    const auto checked = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/true, /*ignore_comments=*/false);
    (void)checked;
  } catch (const nlohmann::json::parse_error& e) {
    const std::size_t end = std::min<std::size_t>(e.byte, text.size());
    const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(end), '\n');
    std::string why = e.what();
    if (const auto at = why.find("syntax error"); at != std::string::npos) why = why.substr(at);
    throw InputError({source->file, static_cast<int>(line)}, "", "is not valid JSON (" + why + ")",
                     "a well-formed JSON object: no comments, tags or trailing commas");
  } catch (const nlohmann::json::exception& e) {
    // Well-formed but not representable: a number beyond double's range (1e999), for one.
    throw InputError({source->file, 0}, "", std::string("is not JSON this reader can hold (") + e.what() + ")",
                     "a JSON object whose numbers fit a double");
  }
  YAML::Node root;
  try {
    root = YAML::Load(detab_json(text));
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
