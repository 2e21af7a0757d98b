// Ulysses' head pack / unpack on whichever backend the run uses (kernels/a2a/head_pack.hpp).
#pragma once

#include "common/device.hpp"
#include "kernels/a2a/head_pack.hpp"

namespace suite::ulysses {

void head_pack(Device& device, const kernels::HeadPackShape& s, std::size_t elem_size,
               const void* src, void* dst);
void head_unpack(Device& device, const kernels::HeadPackShape& s, std::size_t elem_size,
                 const void* src, void* dst);

}  // namespace suite::ulysses
