#include "bench/mesh/mesh_block.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "common/harness/errors.hpp"

namespace suite::mesh {
namespace {

// A test hook: the gradient sum it names is left out, so the check must fail (the bug a
// composed step must not have).
bool omitted(const char* phase) {
  const char* omit = std::getenv("SUITE_TEST_OMIT_GRAD_SUM");
  return omit && std::string(omit) == phase;
}

}  // namespace

std::unique_ptr<sp_tp::LayerOps> make_ops(Device& device, const MeshConfig& cfg) {
  try {
    return sp_tp::make_layer_ops(device, cfg.dtype, cfg.attn_kernel);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());  // e.g. --attn-kernel cudnn where cuDNN cannot start
  }
}

std::vector<std::int64_t> token_rows(const MeshConfig& cfg,
                                     const std::vector<std::int64_t>& positions, int tp, int dp,
                                     int i, int m) {
  const std::int64_t b = cfg.b / m, L = cfg.sp_rows() / m, B = cfg.global_batch();
  std::vector<std::int64_t> rows;
  for (std::int64_t r = 0; r < L; ++r) {
    const std::int64_t row = tp * L + r;  // in the TP group's c b / m rows (token-major)
    rows.push_back(positions[static_cast<std::size_t>(row / b)] * B + dp * cfg.b + i * b + row % b);
  }
  return rows;
}

ComposedBlock::ComposedBlock(const MeshConfig& cfg, BenchContext& ctx, DeviceMesh& mesh)
    : cfg_(cfg),
      ctx_(ctx),
      mesh_(mesh),
      sums_(ctx.device, cfg.dtype, static_cast<std::size_t>(cfg.grad_bucket_mb * 1e6)) {
  ops_ = make_ops(ctx.device, cfg);
  const int m = cfg.two_batch ? 2 : 1;
  MeshConfig part = cfg;  // one micro-batch's
  part.b = cfg.b / m;
  if (cfg.moe()) {
    moe::MoeConfig mc = cfg.moe_layer();
    mc.microbatches = m;
    moe::NodeComms comms;
    if (mc.dispatch == moe::Dispatch::hierarchical) {
      mc.ranks_per_node = mesh.layout().ep_ranks_per_node(mesh.rank(), cfg.ranks_per_node);
      comms = {&mesh.ep_node(cfg.ranks_per_node), &mesh.ep_rail(cfg.ranks_per_node)};
    }
    moe_ = std::make_unique<MoeFfn>(mc, ctx.device, mesh.axis(MeshAxis::ep), comms,
                                    static_cast<std::int64_t>(mesh.rank()) * cfg.sp_rows());
    if (m > 1) two_batch_ = std::make_unique<TwoBatchSchedule>(*moe_, ctx.device);
  }
  for (int i = 0; i < m; ++i) {
    sp_tp::LayerParts parts;
    std::vector<std::int64_t> positions;
    if (cfg.shape.cp > 1) {  // the micro-batch's own attention over the CP group
      attentions_.push_back(
          std::make_unique<CpAttention>(part, ctx.device, mesh, ops_->attention_engine()));
      parts.attention = attentions_.back().get();
      positions = attentions_.back()->positions();
    } else {
      for (std::int64_t p = 0; p < cfg.s; ++p)
        positions.push_back(p);
    }
    parts.global_rows =
        token_rows(cfg, positions, mesh.coord(MeshAxis::tp), mesh.coord(MeshAxis::dp), i, m);
    global_rows_.insert(global_rows_.end(), parts.global_rows.begin(), parts.global_rows.end());
    // The second micro-batch's gradients are final before the first's (it runs inside it).
    if (i == 0) parts.grad_ready = [this](const std::string& name) { gradient_ready(name); };
    if (two_batch_)
      parts.ffn = &two_batch_->part(i);
    else
      parts.ffn = moe_.get();
    layers_.push_back(std::make_unique<sp_tp::TransformerLayer>(part.layer(), sp_tp::Variant::tp_sp,
                                                                ctx.device, mesh.axis(MeshAxis::tp),
                                                                *ops_, std::move(parts)));
  }
  if (two_batch_)
    two_batch_->set_second([this](PhaseTimer& p) { layers_[1]->forward(p, "fwd_"); },
                           [this](PhaseTimer& p) { layers_[1]->backward(p, /*overlap=*/true); });
}

void ComposedBlock::forward(PhaseTimer& phases) {
  layers_.front()->forward(phases, "fwd_");
}

std::vector<double> ComposedBlock::local_rows(Rows which) const {
  std::vector<double> out;
  for (const auto& l : layers_) {
    const std::vector<double> v = which == Rows::input      ? l->local_input()
                                  : which == Rows::output   ? l->local_output()
                                  : which == Rows::d_output ? l->local_d_output()
                                                            : l->local_grad_input();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

std::int64_t ComposedBlock::ledger_bytes() const {
  std::int64_t sum = 0;
  for (const auto& l : layers_)
    sum += l->ledger_bytes();
  return sum;
}

std::int64_t ComposedBlock::cp_method_bytes() const {
  std::int64_t sum = 0;
  for (const auto& a : attentions_)
    sum += a->method_bytes();
  return sum;
}

std::int64_t ComposedBlock::extra_tp_bytes() const {
  std::int64_t sum = 0;
  if (cfg_.backward())
    for (std::size_t i = 1; i < layers_.size(); ++i)
      sum += layers_[i]->pass_comm(sp_tp::kBwd).sent(sp_tp::Coll::ln_grad_all_reduce);
  return sum;
}

TwoBatchProfile ComposedBlock::profile_two_batch() {
  PhaseTimer scratch(ctx_.device);
  scratch.begin_step();
  two_batch_->profile_begin();
  forward(scratch);
  if (cfg_.backward()) backward(scratch);
  const TwoBatchProfile p = two_batch_->profile_end();
  scratch.end_step(false);
  return p;
}

void ComposedBlock::backward(PhaseTimer& phases) {
  if (!sums_added_) add_sums();
  phases_ = &phases;
  layers_.front()->backward(phases, /*overlap=*/true);
  phases_ = nullptr;
  sums_.finish(phases);
}

void ComposedBlock::gradient_ready(const std::string& name) {
  // The second micro-batch's gradient of the same weights, added in before any sum starts.
  if (layers_.size() > 1)
    for (const auto& mine : layers_.front()->grad_buffers())
      if (mine.name == name)
        for (const auto& other : layers_.back()->grad_buffers())
          if (other.name == name) ops_->residual_add(mine.elems, mine.data, other.data, mine.data);
  if (phases_) sums_.ready(name, *phases_);
}

// The gradient-sum groups, their tensors in the order the backward makes them (as buckets fill).
void ComposedBlock::add_sums() {
  sums_added_ = true;
  for (const auto& l : layers_)
    l->allocate_gradients();
  static const std::vector<std::string> made = {"w_fc2", "w_fc1", "ffn",
                                                "w_out", "w_qkv", "layernorm"};
  std::vector<GradTensor> dense;
  for (const auto& g : layers_.front()->grad_buffers())
    dense.push_back({g.name, g.data, g.elems, g.name});
  if (moe_) {
    moe::MoeLayer& m = moe_->layer();
    const GradTensor router{"router", m.router_grad_buffer(), cfg_.h * cfg_.experts, "ffn"};
    if (cfg_.shape.tp > 1 && !omitted(kSumTp))
      sums_.add(kSumTp, mesh_.axis(MeshAxis::tp), {router}, /*at_once=*/true);
    dense.push_back(router);
    const moe::MoeConfig mc = cfg_.moe_layer();
    std::vector<GradTensor> experts;
    for (int j = 0; j < m.slots(); ++j) {
      experts.push_back({"expert_w1", m.expert_w1_grad_buffer(j), mc.h * mc.w1_cols(), "ffn"});
      experts.push_back({"expert_w2", m.expert_w2_grad_buffer(j), mc.d_ff * mc.h, "ffn"});
    }
    if (mesh_.layout().expert_copies() > 1 && !omitted(kSumExpert))
      sums_.add(kSumExpert, mesh_.expert_replicas(), experts);
  }
  std::stable_sort(dense.begin(), dense.end(), [](const GradTensor& a, const GradTensor& b) {
    auto at = [](const std::string& r) {
      return std::find(made.begin(), made.end(), r) - made.begin();
    };
    return at(a.ready) < at(b.ready);
  });
  if (cfg_.shape.cp * cfg_.shape.dp > 1 && !omitted(kSumDense))
    sums_.add(kSumDense, mesh_.dense_replicas(), dense);
}

ReferenceBlock run_reference(const MeshConfig& cfg, BenchContext& ctx) {
  MeshConfig one = cfg;
  one.shape = MeshShape{};
  one.shape.ep = 1;
  one.b = cfg.global_batch();
  one.tp_overlap = {};
  std::unique_ptr<Comm> self = make_mpi_comm(ctx.device, MPI_COMM_SELF);
  auto ops = make_ops(ctx.device, one);
  std::unique_ptr<MoeFfn> moe;
  sp_tp::LayerParts parts;
  if (one.moe()) {
    moe::MoeConfig m = one.moe_layer();
    m.dispatch = moe::Dispatch::flat;
    moe = std::make_unique<MoeFfn>(m, ctx.device, *self, moe::NodeComms{}, 0);
    parts.ffn = moe.get();
  }
  sp_tp::TransformerLayer layer(one.layer(), sp_tp::Variant::tp_sp, ctx.device, *self, *ops,
                                std::move(parts));
  PhaseTimer scratch(ctx.device);
  scratch.begin_step();
  layer.forward(scratch);
  if (one.backward()) layer.backward(scratch, true);
  scratch.end_step(false);
  ReferenceBlock ref;
  ref.output = layer.local_output();
  for (std::size_t i = 0; i < layer.slices().size(); ++i)
    ref.weights.emplace_back(layer.slices()[i].name, layer.param_value(i));
  if (moe) ref.weights.emplace_back("router", moe->layer().router_weight());
  if (one.backward()) {
    ref.grad_input = layer.local_grad_input();
    for (std::size_t i = 0; i < layer.slices().size(); ++i)
      ref.grads.emplace_back(layer.slices()[i].name, layer.param_grad(i));
    if (moe) ref.grads.emplace_back("router", moe->layer().router_weight_grad());
  }
  if (moe) {
    auto add_experts = [&](auto& list, bool grad) {
      const auto all = moe->gathered_experts(grad);
      for (int e = 0; e < cfg.experts; ++e) {
        list.emplace_back("expert_w1_" + std::to_string(e), all[static_cast<std::size_t>(e)]);
        list.emplace_back("expert_w2_" + std::to_string(e),
                          all[static_cast<std::size_t>(cfg.experts + e)]);
      }
    };
    add_experts(ref.weights, false);
    if (one.backward()) add_experts(ref.grads, true);
  }
  return ref;
}

}  // namespace suite::mesh
