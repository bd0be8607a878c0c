#pragma once
// cuBLAS, opened when a CUDA device is made rather than when the program starts.
// Linking it costs every start of every binary about 0.65 s and 210 MB (libcublasLt.so.13,
// ~540 MB of code and tables that the loader maps and relocates; measured with an empty program
// linked against it), though only `--backend cuda` multiplies a matrix. The prefetchlab command
// and the test binary start in milliseconds without it.
#include <cublas_v2.h>

#include <string>

namespace prefetchlab::gpu {

// The cuBLAS functions the CUDA device calls, resolved from the library's own symbols (the
// _v2 names are what cublas_v2.h's macros expand to).
class CublasLibrary {
 public:
  // Opens the library CMake found at build time, else libcublas.so.<major of the headers built
  // against> wherever the dynamic loader looks (LD_LIBRARY_PATH, ld.so.cache). Throws
  // BackendUnavailable (device_backend.hpp) saying which library is missing and why.
  CublasLibrary();
  ~CublasLibrary();
  CublasLibrary(const CublasLibrary&) = delete;
  CublasLibrary& operator=(const CublasLibrary&) = delete;

  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetWorkspace_v2) set_workspace = nullptr;
  // The library's own symbols take cublasComputeType_t; cublas_api.h also declares C++ inline
  // wrappers of the same names taking cudaDataType, hence the spelled-out types.
  using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                    const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                    cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
  using GemmStridedBatchedEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                                  const void*, const void*, cudaDataType, int, long long, const void*,
                                                  cudaDataType, int, long long, const void*, void*, cudaDataType, int,
                                                  long long, int, cublasComputeType_t, cublasGemmAlgo_t);
  GemmEx gemm_ex = nullptr;
  GemmStridedBatchedEx gemm_strided_batched_ex = nullptr;

  const std::string& path() const { return path_; }  // what was opened

 private:
  void* handle_ = nullptr;
  std::string path_;
};

}  // namespace prefetchlab::gpu
