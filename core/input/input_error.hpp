#pragma once
// One type for every user-input mistake (scenario, model, hardware, ds_config, command line).
// It always carries where (file, line), what (key) and what was expected, so a user can fix
// the input without reading our code. The command line maps it to exit code 2.
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace prefetchlab::core {

struct InputLocation {
  std::string file;  // path as the user gave it, or "--set" for command-line overrides
  int line = 0;      // 1-based; 0 when unknown (e.g. a missing file)
};

class InputError : public std::runtime_error {
 public:
  InputError(InputLocation where, std::string key, std::string problem, std::string expected,
             std::string suggestion = {});

  const InputLocation& where() const { return where_; }
  const std::string& key() const { return key_; }
  const std::string& problem() const { return problem_; }
  const std::string& expected() const { return expected_; }
  const std::string& suggestion() const { return suggestion_; }

 private:
  InputLocation where_;
  std::string key_;
  std::string problem_;
  std::string expected_;
  std::string suggestion_;
};

// A value from the input as a message quotes it: in single quotes, at most kQuotedChars
// characters (then "..." and the value's length), control characters as '?'. An error about a
// value never echoes the whole of a large or binary one (a `model:` that names /etc/passwd).
constexpr std::size_t kQuotedChars = 64;
std::string quoted_input(std::string_view text);

}  // namespace prefetchlab::core
