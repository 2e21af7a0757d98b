// Device-buffer helpers the MoE layer and its hierarchical exchange share.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "common/device/device.hpp"
#include "common/sim/sim.hpp"

namespace suite::moe {

template <class T>
std::size_t bytes_of(const std::vector<T>& v) {
  return v.size() * sizeof(T);
}

// Grows b to at least `bytes` (never to zero bytes, so pointers stay valid for zero-length
// transfers). Sizes repeat from step to step, so growth happens in warm-up.
inline void grow(Device& device, Buffer& b, std::size_t bytes) {
  bytes = std::max<std::size_t>(bytes, 64);
  if (b.bytes() < bytes) b = device.alloc(bytes);
}

// Index arrays only the kernels read: modeled compute skips the kernels and leaves them
// unwritten (untouched pages hold no memory).
inline void upload_index(Device& device, Buffer& dst, const void* src, std::size_t bytes) {
  if (!sim::modeled() && bytes > 0) device.copy_from_host(dst.data(), src, bytes);
}

}  // namespace suite::moe
