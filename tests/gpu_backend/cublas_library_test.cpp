// cuBLAS is opened when a CUDA device group is made, not at program start: the test binary (like
// the prefetchlab command) does not map it until then, and opening it resolves every function the
// CUDA device calls. Needs the CUDA build, not a GPU: the library loads without a driver.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#ifdef PREFETCHLAB_HAVE_CUDA
#include "gpu_backend/cuda/cublas_library.hpp"
#endif

namespace {

bool mapped(const std::string& library) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find(library) != std::string::npos) return true;
  }
  return false;
}

// Read before main, so before any case could have opened it.
const bool kCublasMappedAtStart = mapped("libcublas");

}  // namespace

#ifdef PREFETCHLAB_HAVE_CUDA

TEST(CublasLibrary, NotMappedAtStartAndEveryFunctionResolvesWhenOpened) {
  EXPECT_FALSE(kCublasMappedAtStart) << "the test binary links cuBLAS: every start pays for libcublasLt";
  {
    const prefetchlab::gpu::CublasLibrary cublas;
    EXPECT_TRUE(mapped("libcublasLt")) << "opened " << cublas.path();
    EXPECT_NE(cublas.create, nullptr);
    EXPECT_NE(cublas.destroy, nullptr);
    EXPECT_NE(cublas.set_stream, nullptr);
    EXPECT_NE(cublas.set_workspace, nullptr);
    EXPECT_NE(cublas.gemm_ex, nullptr);
    EXPECT_NE(cublas.gemm_strided_batched_ex, nullptr);
    EXPECT_NE(cublas.path().find("libcublas.so"), std::string::npos) << cublas.path();
  }
}

#else

TEST(CublasLibrary, NotMappedInABuildWithoutCuda) { EXPECT_FALSE(kCublasMappedAtStart); }

#endif
