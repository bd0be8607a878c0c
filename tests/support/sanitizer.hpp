#pragma once
// Whether this test binary is built with ASan or TSan (tests/sanitize.sh), and how much longer
// timed work may take there: a rank's collective timeout or a "nothing hangs" bound sized for
// optimised code would fire on a run the sanitizer slows 5-20x.
// gcc defines __SANITIZE_*__; clang answers __has_feature.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PREFETCHLAB_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define PREFETCHLAB_SANITIZED 1
#endif
#endif

namespace prefetchlab::testing {

#ifdef PREFETCHLAB_SANITIZED
inline constexpr int kSanitizerSlowdown = 10;
#else
inline constexpr int kSanitizerSlowdown = 1;
#endif

}  // namespace prefetchlab::testing
