// Moving typed values between the host and device buffers in bounded chunks, so filling or
// checking a multi-GB buffer needs only a few MB of host memory.
#pragma once

#include <cstddef>
#include <functional>

#include "common/device/device.hpp"
#include "kernels/core/dtype.hpp"

namespace suite {

// dst[i] = value(i) for i in [0, count), converted to t.
void upload_values(Device& device, void* dst, std::size_t count, DType t,
                   const std::function<double(std::size_t)>& value);
// Calls visit(i, src[i]) for every element, in order.
void scan_values(Device& device, const void* src, std::size_t count, DType t,
                 const std::function<void(std::size_t, double)>& visit);

}  // namespace suite
