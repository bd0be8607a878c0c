// The tree's layering and its folder READMEs, checked over the source files (docs/architecture.md):
// - a file includes only its own folder and what its folder's README allows ("May include:"
//   followed by backticked folders; a listed folder allows every folder below it);
// - every folder's README names every file in it (its stem, as a word).
// A forbidden include or a file its README does not name fails CI.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

const fs::path kRoot(PREFETCHLAB_SOURCE_DIR);

// The concept folders: every folder of core/, sim/, gpu_backend/, apps/ and apps' sub-folders.
std::vector<std::string> concept_folders() {
  std::vector<std::string> out;
  for (const char* top : {"core", "sim", "gpu_backend", "apps"}) {
    if (std::string(top) != "core") out.emplace_back(top);
    for (const auto& entry : fs::directory_iterator(kRoot / top)) {
      if (entry.is_directory() && fs::exists(entry.path() / "README.md")) {
        out.push_back(std::string(top) + "/" + entry.path().filename().string());
      }
    }
  }
  return out;
}

std::string read(const fs::path& file) {
  std::ifstream in(file);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool is_source(const fs::path& file) {
  const std::string ext = file.extension().string();
  return ext == ".cpp" || ext == ".hpp" || ext == ".cu" || ext == ".cuh" || ext == ".h";
}

// The concept folder a tree path ("core/model/x.hpp", "sim/ranks/world.hpp") belongs to, or "" when
// it is not in one (a system or third-party header).
std::string folder_of(const std::string& path, const std::set<std::string>& folders) {
  const auto slash = path.find('/');
  if (slash == std::string::npos) return "";
  const auto second = path.find('/', slash + 1);
  if (second != std::string::npos && folders.count(path.substr(0, second))) return path.substr(0, second);
  return folders.count(path.substr(0, slash)) ? path.substr(0, slash) : "";
}

// The folders a README's "May include:" line allows (backticked, with or without a trailing /).
std::vector<std::string> allowed_by(const std::string& readme) {
  std::vector<std::string> out;
  const auto at = readme.find("May include:");
  if (at == std::string::npos) return out;
  const std::string line = readme.substr(at, readme.find("\n\n", at) - at);
  const std::regex quoted("`([a-z_/]+)`");
  for (auto it = std::sregex_iterator(line.begin(), line.end(), quoted); it != std::sregex_iterator(); ++it) {
    std::string folder = (*it)[1];
    if (!folder.empty() && folder.back() == '/') folder.pop_back();
    out.push_back(folder);
  }
  return out;
}

bool allows(const std::vector<std::string>& allowed, const std::string& target) {
  for (const auto& a : allowed) {
    if (target == a || target.starts_with(a + "/")) return true;
  }
  return false;
}

}  // namespace

TEST(Layering, EveryConceptFolderStatesWhatItMayInclude) {
  for (const auto& folder : concept_folders()) {
    const std::string readme = read(kRoot / folder / "README.md");
    EXPECT_NE(readme.find("May include:"), std::string::npos) << folder << "/README.md has no \"May include:\" line";
  }
}

TEST(Layering, NoFileIncludesAFolderItsReadmeDoesNotAllow) {
  const std::vector<std::string> list = concept_folders();
  const std::set<std::string> folders(list.begin(), list.end());
  const std::regex include_line(R"re(#include\s+"([^"]+)")re");
  int files = 0;
  for (const auto& folder : list) {
    const std::vector<std::string> allowed = allowed_by(read(kRoot / folder / "README.md"));
    for (const auto& entry : fs::directory_iterator(kRoot / folder)) {
      if (!entry.is_regular_file() || !is_source(entry.path())) continue;
      ++files;
      const std::string text = read(entry.path());
      for (auto it = std::sregex_iterator(text.begin(), text.end(), include_line); it != std::sregex_iterator(); ++it) {
        const std::string target = folder_of((*it)[1], folders);
        if (target.empty() || target == folder) continue;
        EXPECT_TRUE(allows(allowed, target))
            << folder << "/" << entry.path().filename().string() << " includes " << (*it)[1] << ", but "
            << folder << "/README.md does not allow " << target << "/";
      }
    }
  }
  EXPECT_GT(files, 300) << "the source tree was not found under " << kRoot;
}

TEST(Layering, EveryFolderReadmeNamesEveryFileInIt) {
  for (const auto& folder : concept_folders()) {
    const std::string readme = read(kRoot / folder / "README.md");
    for (const auto& entry : fs::directory_iterator(kRoot / folder)) {
      if (!entry.is_regular_file()) continue;
      const std::string name = entry.path().filename().string();
      if (name == "README.md" || name == "CMakeLists.txt") continue;
      const std::string stem = name.substr(0, name.find('.'));
      const std::regex word("(^|[^A-Za-z0-9_])" + stem + "($|[^A-Za-z0-9_])");
      EXPECT_TRUE(std::regex_search(readme, word)) << folder << "/README.md does not name " << name;
    }
  }
}
