// The --attn-kernel choice turned into an engine on this rank's backend, so every benchmark
// that computes attention picks its kernel the same way.
#pragma once

#include <memory>

#include "common/device.hpp"
#include "kernels/attention/attention_engine.hpp"

namespace suite {

// CPU backend: the CPU kernels (cudnn is refused there); CUDA: the choice on the device's
// stream. Throws UsageError naming the reason when the choice cannot be honoured.
std::unique_ptr<kernels::AttentionEngine> make_attention_engine(Device& device, DType dtype,
                                                                kernels::AttnKernelChoice choice);

}  // namespace suite
