// Ulysses' head pack / unpack on whichever backend the run uses (kernels/a2a/head_pack.hpp).
#pragma once

#include "common/device/device.hpp"
#include "kernels/a2a/head_pack.hpp"

namespace suite::ulysses {

void head_pack(Device& device, const kernels::HeadPackShape& s, std::size_t elem_size,
               const void* src, void* dst);
void head_unpack(Device& device, const kernels::HeadPackShape& s, std::size_t elem_size,
                 const void* src, void* dst);

// The gradients' way back: the sum over each K/V head's replicas (head_unpack without them).
void head_unpack_sum(Device& device, const kernels::HeadPackShape& s, DType t, const void* src,
                     void* dst);

}  // namespace suite::ulysses
