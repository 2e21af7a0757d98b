// Move-only owner of a cuBLAS handle. Creating one needs a visible device, so callers build
// it only after checking for one.
#pragma once

#if defined(SUITE_HAVE_CUDA)
#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace suite::kernels::cuda {

class CublasHandle {
 public:
  CublasHandle();
  ~CublasHandle();
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  CublasHandle(CublasHandle&& other) noexcept;
  CublasHandle& operator=(CublasHandle&& other) noexcept;

  cublasHandle_t get() const { return handle_; }
  // Binds the handle to `stream` for the calls that follow.
  void set_stream(cudaStream_t stream);

 private:
  cublasHandle_t handle_ = nullptr;
};

}  // namespace suite::kernels::cuda
#endif
