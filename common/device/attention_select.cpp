#include "common/device/attention_select.hpp"

#include <CLI/CLI.hpp>

#include <stdexcept>

#include "common/harness/errors.hpp"
#include "common/harness/size_list.hpp"
#include "common/sim/sim.hpp"

namespace suite {

std::unique_ptr<kernels::AttentionEngine> make_attention_engine(Device& device, DType dtype,
                                                                kernels::AttnKernelChoice choice) {
  try {
    if (device.backend() == Backend::cpu) {
      if (choice == kernels::AttnKernelChoice::cudnn)
        throw UsageError("--attn-kernel cudnn needs --backend cuda");
      if (sim::modeled()) return sim::make_modeled_attention_engine(dtype);  // --sim-flops
      return kernels::make_cpu_attention_engine(dtype);
    }
    return kernels::make_cuda_attention_engine(device.stream(), dtype, choice);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
}

void add_attn_kernel_flag(CLI::App& app, kernels::AttnKernelChoice& choice) {
  app.add_option_function<std::string>(
         "--attn-kernel",
         [&choice](const std::string& name) { choice = *kernels::parse_attn_kernel(name); },
         "attention kernel: auto (cuDNN for bf16 on the cuda backend when built with it, "
         "else the suite's), cudnn (cuDNN SDPA; cuda backend, bf16), suite (the suite's "
         "own kernels). Recorded as attn_kernel / attn_library")
      ->check(CLI::IsMember({"auto", "suite", "cudnn"}))
      ->default_str(std::string(kernels::attn_kernel_choice_name(choice)));
}

void add_causal_flag(CLI::App& app, std::string& causal) {
  app.add_option("--causal", causal, "1 causal, 0 full attention; a list runs both")
      ->capture_default_str();
}

bool parse_causal(const std::string& item) {
  return named<bool>("--causal", "value", {{"0", false}, {"1", true}})(item);
}

}  // namespace suite
