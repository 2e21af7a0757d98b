#include "common/attention_select.hpp"

#include <stdexcept>

#include "common/errors.hpp"
#include "common/sim.hpp"

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

}  // namespace suite
