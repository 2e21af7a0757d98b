// The --attn-kernel choice turned into an engine on this rank's backend, so every benchmark
// that computes attention picks its kernel the same way.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/device/device.hpp"
#include "kernels/attention/attention_engine.hpp"

namespace CLI {
class App;
}

namespace suite {

// CPU backend: the CPU kernels (cudnn is refused there); CUDA: the choice on the device's
// stream. Throws UsageError naming the reason when the choice cannot be honoured.
std::unique_ptr<kernels::AttentionEngine> make_attention_engine(Device& device, DType dtype,
                                                                kernels::AttnKernelChoice choice);

// --attn-kernel (auto, suite, cudnn), declared and parsed here once for every benchmark that
// computes attention: CLI11 refuses other names, `choice` receives the parsed kernel.
void add_attn_kernel_flag(CLI::App& app, kernels::AttnKernelChoice& choice);
// --causal (a list of 1 causal, 0 full), each item parsed by parse_causal.
void add_causal_flag(CLI::App& app, std::string& causal);
// "0,1" -> {false, true}; UsageError naming `flag` otherwise.
bool parse_causal(const std::string& item);

}  // namespace suite
