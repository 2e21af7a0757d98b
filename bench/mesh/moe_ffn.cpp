#include "bench/mesh/moe_ffn.hpp"

#include "bench/moe/moe_ops.hpp"

namespace suite::mesh {

MoeFfn::MoeFfn(const moe::MoeConfig& cfg, Device& device, Comm& group, moe::NodeComms comms,
               std::int64_t first_token)
    : cfg_(cfg), device_(device) {
  moe::validate(cfg);
  ops_ = moe::make_moe_ops(device, cfg.dtype);
  layer_ = std::make_unique<moe::MoeLayer>(cfg, device, group, *ops_, first_token, comms);
  row_bytes_ = static_cast<std::size_t>(cfg.h) * dtype_size(cfg.dtype);
}

void MoeFfn::forward(const void* in, void* out, PhaseTimer& phases) {
  const std::size_t bytes = static_cast<std::size_t>(cfg_.tokens) * row_bytes_;
  phases.time("moe_copy", [&] { device_.copy_on_device(layer_->input_buffer(), in, bytes); });
  layer_->forward(phases);
  phases.time("moe_copy", [&] { device_.copy_on_device(out, layer_->output_buffer(), bytes); });
}

void MoeFfn::backward(const void* d_out, void* d_in, PhaseTimer& phases) {
  const std::size_t bytes = static_cast<std::size_t>(cfg_.tokens) * row_bytes_;
  phases.time("bwd_moe_copy",
              [&] { device_.copy_on_device(layer_->grad_output_buffer(), d_out, bytes); });
  layer_->backward(phases);
  phases.time("bwd_moe_copy",
              [&] { device_.copy_on_device(d_in, layer_->input_grad_buffer(), bytes); });
}

std::vector<std::vector<double>> MoeFfn::gathered_experts(bool grad) {
  std::vector<std::vector<double>> out(static_cast<std::size_t>(2 * cfg_.experts));
  const int slots = layer_->slots();
  std::vector<double> mine;
  for (int j = 0; j < slots; ++j) {
    const auto w1 = grad ? layer_->expert_w1_grad(j) : layer_->expert_w1(j);
    const auto w2 = grad ? layer_->expert_w2_grad(j) : layer_->expert_w2(j);
    mine.insert(mine.end(), w1.begin(), w1.end());
    mine.insert(mine.end(), w2.begin(), w2.end());
  }
  const std::vector<double> all = layer_->group_gather(mine);
  const std::size_t n1 = static_cast<std::size_t>(cfg_.h * cfg_.w1_cols()),
                    n2 = static_cast<std::size_t>(cfg_.d_ff * cfg_.h);
  // The block placement: rank r's slot j holds expert r * slots + j.
  for (int e = 0; e < cfg_.experts; ++e) {
    const std::size_t at = static_cast<std::size_t>(e) * (n1 + n2);
    out[static_cast<std::size_t>(e)].assign(all.begin() + static_cast<std::ptrdiff_t>(at),
                                            all.begin() + static_cast<std::ptrdiff_t>(at + n1));
    out[static_cast<std::size_t>(cfg_.experts + e)].assign(
        all.begin() + static_cast<std::ptrdiff_t>(at + n1),
        all.begin() + static_cast<std::ptrdiff_t>(at + n1 + n2));
  }
  return out;
}

}  // namespace suite::mesh
