#include "core/input/input_error.hpp"

#include <algorithm>
#include <sstream>

namespace prefetchlab::core {
namespace {

// "file:line: key 'k': problem; expected E; did you mean 'S'?"
std::string format_message(const InputLocation& where, const std::string& key,
                           const std::string& problem, const std::string& expected,
                           const std::string& suggestion) {
  std::ostringstream msg;
  msg << where.file;
  if (where.line > 0) msg << ':' << where.line;
  msg << ": ";
  if (!key.empty()) msg << "key '" << key << "': ";
  msg << problem;
  if (!expected.empty()) msg << "; expected " << expected;
  if (!suggestion.empty()) msg << "; did you mean '" << suggestion << "'?";
  return msg.str();
}

}  // namespace

InputError::InputError(InputLocation where, std::string key, std::string problem,
                       std::string expected, std::string suggestion)
    : std::runtime_error(format_message(where, key, problem, expected, suggestion)),
      where_(std::move(where)),
      key_(std::move(key)),
      problem_(std::move(problem)),
      expected_(std::move(expected)),
      suggestion_(std::move(suggestion)) {}

std::string quoted_input(std::string_view text) {
  std::string out = "'";
  const std::size_t shown = std::min(text.size(), kQuotedChars);
  for (std::size_t i = 0; i < shown; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    out += c < 0x20 || c == 0x7f ? '?' : static_cast<char>(c);
  }
  out += "'";
  if (text.size() > shown) out += "... (" + std::to_string(text.size()) + " characters)";
  return out;
}

}  // namespace prefetchlab::core
