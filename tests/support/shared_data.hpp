#pragma once
// The team's data kept outside the repository (../shared beside the checkout: DeepSpeed
// recordings, real traces, H200 layer timings, crash inputs). A test that reads it skips with a
// message when it is absent, except in CI (CI=true), where the data is laid out beside the
// checkout and its absence is a failure.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace prefetchlab::testing {

inline std::filesystem::path shared_dir() { return std::filesystem::path(PREFETCHLAB_SOURCE_DIR) / ".." / "shared"; }

inline bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::strcmp(ci, "true") == 0;
}

}  // namespace prefetchlab::testing

// In a test body or a void helper: returns from it (skipped, or failed under CI=true) when
// `path` does not exist.
#define PREFETCHLAB_REQUIRE_SHARED(path)                                                                  \
  do {                                                                                                    \
    if (!std::filesystem::exists(path)) {                                                                 \
      if (::prefetchlab::testing::in_ci()) {                                                              \
        FAIL() << (path).string() << " is absent: ../shared must lie beside the checkout when CI=true";   \
      }                                                                                                   \
      GTEST_SKIP() << (path).string() << " is absent (../shared beside the checkout); skipped";          \
    }                                                                                                     \
  } while (false)
