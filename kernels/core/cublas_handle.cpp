#include "kernels/core/cublas_handle.hpp"

#include <utility>

#include "kernels/core/cublas_check.hpp"

namespace suite::kernels::cuda {

CublasHandle::CublasHandle() {
  SUITE_CUBLAS_CHECK(cublasCreate(&handle_));
}

CublasHandle::~CublasHandle() {
  if (handle_ != nullptr) cublasDestroy(handle_);  // destructors must not throw
}

CublasHandle::CublasHandle(CublasHandle&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)) {}

CublasHandle& CublasHandle::operator=(CublasHandle&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) cublasDestroy(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

void CublasHandle::set_stream(cudaStream_t stream) {
  SUITE_CUBLAS_CHECK(cublasSetStream(handle_, stream));
}

}  // namespace suite::kernels::cuda
