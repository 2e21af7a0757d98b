#include "bench/ulysses/head_transpose.hpp"

#include "common/sim/sim.hpp"

#if defined(SUITE_HAVE_CUDA)
#include "kernels/a2a/head_pack_cuda.hpp"
#endif

namespace suite::ulysses {

void head_pack(Device& device, const kernels::HeadPackShape& s, std::size_t e, const void* src,
               void* dst) {
#if defined(SUITE_HAVE_CUDA)
  if (device.backend() == Backend::cuda)
    return kernels::cuda::head_pack(static_cast<cudaStream_t>(device.stream()), s, e, src, dst);
#endif
  (void)device;
  if (sim::is_placeholder(dst)) return;  // modeled compute: no values to move
  kernels::cpu::head_pack(s, e, src, dst);
}

void head_unpack(Device& device, const kernels::HeadPackShape& s, std::size_t e, const void* src,
                 void* dst) {
#if defined(SUITE_HAVE_CUDA)
  if (device.backend() == Backend::cuda)
    return kernels::cuda::head_unpack(static_cast<cudaStream_t>(device.stream()), s, e, src, dst);
#endif
  (void)device;
  if (sim::is_placeholder(dst)) return;  // modeled compute: no values to move
  kernels::cpu::head_unpack(s, e, src, dst);
}

void head_unpack_sum(Device& device, const kernels::HeadPackShape& s, DType t, const void* src,
                     void* dst) {
#if defined(SUITE_HAVE_CUDA)
  if (device.backend() == Backend::cuda)
    return kernels::cuda::head_unpack_sum(static_cast<cudaStream_t>(device.stream()), s, t, src,
                                          dst);
#endif
  (void)device;
  if (sim::is_placeholder(dst)) return;
  kernels::cpu::head_unpack_sum(s, t, src, dst);
}

}  // namespace suite::ulysses
