#include "gpu_backend/cuda/cublas_library.hpp"

#include <dlfcn.h>

#include <vector>

#include "gpu_backend/device/backend_unavailable.hpp"

namespace prefetchlab::gpu {
namespace {

template <typename Function>
void resolve(void* handle, const char* name, const std::string& path, Function* out) {
  void* symbol = dlsym(handle, name);
  if (symbol == nullptr) {
    throw BackendUnavailable("--backend cuda: " + path + " has no " + name + " (a cuBLAS older than the headers, " +
                             std::to_string(CUBLAS_VER_MAJOR) + ".x, this prefetchlab was built against?)");
  }
  *out = reinterpret_cast<Function>(symbol);
}

}  // namespace

CublasLibrary::CublasLibrary() {
  const std::string soname = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  std::vector<std::string> candidates;
#ifdef PREFETCHLAB_CUBLAS_FILE
  candidates.push_back(PREFETCHLAB_CUBLAS_FILE);  // what CMake found at build time
#endif
  candidates.push_back(soname);
  std::string errors;
  for (const auto& candidate : candidates) {
    // RTLD_LOCAL: its symbols serve only the calls resolved below.
    handle_ = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ != nullptr) {
      path_ = candidate;
      break;
    }
    errors += std::string(errors.empty() ? "" : "; ") + dlerror();
  }
  if (handle_ == nullptr) {
    throw BackendUnavailable("--backend cuda: cannot open cuBLAS (" + errors +
                             "); install it or put its directory on LD_LIBRARY_PATH");
  }
  try {
    resolve(handle_, "cublasCreate_v2", path_, &create);
    resolve(handle_, "cublasDestroy_v2", path_, &destroy);
    resolve(handle_, "cublasSetStream_v2", path_, &set_stream);
    resolve(handle_, "cublasSetWorkspace_v2", path_, &set_workspace);
    resolve(handle_, "cublasGemmEx", path_, &gemm_ex);
    resolve(handle_, "cublasGemmStridedBatchedEx", path_, &gemm_strided_batched_ex);
  } catch (...) {
    dlclose(handle_);
    throw;
  }
}

CublasLibrary::~CublasLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

}  // namespace prefetchlab::gpu
