#include "bench/mesh/moe_ffn.hpp"

#include "bench/moe/moe_ops.hpp"

#include <cstddef>

namespace suite::mesh {

MoeFfn::MoeFfn(const moe::MoeConfig& cfg, Device& device, Comm& group, moe::NodeComms comms,
               std::int64_t first_token)
    : cfg_(cfg), device_(device) {
  moe::validate(cfg);
  ops_ = moe::make_moe_ops(device, cfg.dtype);
  layer_ = std::make_unique<moe::MoeLayer>(cfg, device, group, *ops_, first_token, comms);
  row_bytes_ = static_cast<std::size_t>(cfg.h) * dtype_size(cfg.dtype);
  if (cfg.microbatches > 1) {
    layer_->release_step_buffers();  // the micro-batches hold their own
    pipeline_ = std::make_unique<moe::MicrobatchPipeline>(*layer_, device, group, *ops_,
                                                          first_token, comms);
    pipeline_->follow_placement();
  }
}

std::size_t MoeFfn::part_bytes() const {
  return static_cast<std::size_t>(cfg_.tokens / cfg_.microbatches) * row_bytes_;
}

void MoeFfn::copy_input(const void* in, int part, PhaseTimer& phases) {
  auto* to = static_cast<std::byte*>(layer_->input_buffer()) + part_offset(part);
  phases.time("moe_copy", [&] { device_.copy_on_device(to, in, part_bytes()); });
}

void MoeFfn::copy_output(void* out, int part, PhaseTimer& phases) {
  const auto* from = static_cast<const std::byte*>(layer_->output_buffer()) + part_offset(part);
  phases.time("moe_copy", [&] { device_.copy_on_device(out, from, part_bytes()); });
}

void MoeFfn::copy_grad_output(const void* d_out, int part, PhaseTimer& phases) {
  auto* to = static_cast<std::byte*>(layer_->grad_output_buffer()) + part_offset(part);
  phases.time("bwd_moe_copy", [&] { device_.copy_on_device(to, d_out, part_bytes()); });
}

void MoeFfn::copy_grad_input(void* d_in, int part, PhaseTimer& phases) {
  const auto* from = static_cast<const std::byte*>(layer_->input_grad_buffer()) + part_offset(part);
  phases.time("bwd_moe_copy", [&] { device_.copy_on_device(d_in, from, part_bytes()); });
}

void MoeFfn::forward(const void* in, void* out, PhaseTimer& phases) {
  copy_input(in, 0, phases);
  layer_->forward(phases);
  copy_output(out, 0, phases);
}

void MoeFfn::backward(const void* d_out, void* d_in, PhaseTimer& phases) {
  copy_grad_output(d_out, 0, phases);
  layer_->backward(phases);
  copy_grad_input(d_in, 0, phases);
}

moe::StepBytes MoeFfn::implied_bytes(bool backward) const {
  if (pipeline_) return backward ? pipeline_->implied_bwd_bytes() : pipeline_->implied_bytes();
  return backward ? layer_->implied_bwd_bytes() : layer_->implied_bytes();
}

moe::StepBytes MoeFfn::measured_bytes(bool backward) const {
  if (pipeline_) return backward ? pipeline_->measured_bwd_bytes() : pipeline_->measured_bytes();
  return backward ? layer_->measured_bwd_bytes() : layer_->measured_bytes();
}

std::vector<std::int32_t> MoeFfn::chosen() const {
  return pipeline_ ? pipeline_->chosen() : layer_->chosen();
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
