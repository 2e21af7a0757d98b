#include "bench/mesh/block_stage.hpp"

#include "bench/mesh/mesh_block.hpp"
#include "common/harness/errors.hpp"
#include "common/harness/phase_timer.hpp"
#include "common/sim/sim.hpp"

namespace suite::mesh {
namespace {

// Salt of a micro-batch's input values: each micro-batch its own tokens.
constexpr std::uint64_t kMicrobatchSalt = 0x6d62'0000;

}  // namespace

std::uint64_t layer_seed(std::uint64_t seed, int index) {
  return seed ^ (0x9e37'79b9'7f4a'7c15ULL * static_cast<std::uint64_t>(index + 1));
}

// The CP attention of one layer with one instance per micro-batch slot: each keeps the Q, K, V,
// output and lse its backward needs, so a micro-batch's backward finds its own.
class BlockStage::SlotAttention final : public sp_tp::AttentionPart {
 public:
  SlotAttention(const MeshConfig& cfg, Device& device, DeviceMesh& mesh,
                kernels::AttentionEngine& engine)
      : cfg_(cfg), device_(device), mesh_(mesh), engine_(engine) {
    use(0);
  }
  // Collective over the CP group the first time a slot is used (its instance is made). Under
  // modeled compute no backward reads a saved value, so slot 0's instance serves every
  // micro-batch: a simulated rank does not hold a CP attention's position lists and scratch
  // for each micro-batch in flight.
  void use(int slot) {
    if (sim::modeled()) slot = 0;
    while (static_cast<int>(slots_.size()) <= slot)
      slots_.push_back(std::make_unique<CpAttention>(cfg_, device_, mesh_, engine_));
    current_ = slots_[static_cast<std::size_t>(slot)].get();
  }
  void forward(const void* qkv, void* out, PhaseTimer& phases) override {
    current_->forward(qkv, out, phases);
  }
  void backward(const void* d_out, void* d_qkv, PhaseTimer& phases) override {
    current_->backward(d_out, d_qkv, phases);
  }
  const CpAttention& first() const { return *slots_.front(); }

 private:
  MeshConfig cfg_;
  Device& device_;
  DeviceMesh& mesh_;
  kernels::AttentionEngine& engine_;
  std::vector<std::unique_ptr<CpAttention>> slots_;
  CpAttention* current_ = nullptr;
};

BlockStage::BlockStage(const MeshConfig& cfg, BenchContext& ctx, Comm& tp, DeviceMesh* mesh,
                       int first_layer, int count)
    : cfg_(cfg), ctx_(ctx), mesh_(cfg.shape.cp > 1 ? mesh : nullptr), first_(first_layer) {
  SUITE_CHECK(!cfg.moe(), "a pipeline stage's block has a dense MLP");
  SUITE_CHECK(cfg.shape.cp == 1 || mesh != nullptr, "CP needs the mesh's CP group");
  ops_ = make_ops(ctx.device, cfg);
  for (int l = 0; l < count; ++l) {
    auto layer = std::make_unique<Layer>();
    sp_tp::LayerParts parts;
    if (mesh_) {
      layer->attention =
          std::make_unique<SlotAttention>(cfg, ctx.device, *mesh_, ops_->attention_engine());
      parts.attention = layer->attention.get();
    }
    if (l == 0) {
      std::vector<std::int64_t> positions;
      if (mesh_) positions = layer->attention->first().positions();
      for (std::int64_t p = 0; !mesh_ && p < cfg.s; ++p)
        positions.push_back(p);
      global_rows_ = token_rows(cfg, positions, tp.rank(), 0);
    }
    parts.global_rows = global_rows_;
    sp_tp::LayerConfig lc = cfg.layer();
    lc.seed = layer_seed(cfg.seed, first_layer + l);
    layer->layer = std::make_unique<sp_tp::TransformerLayer>(lc, sp_tp::Variant::tp_sp, ctx.device,
                                                             tp, *ops_, std::move(parts));
    layer->microbatches = std::make_unique<sp_tp::LayerMicrobatches>(*layer->layer, *ops_);
    layers_.push_back(std::move(layer));
  }
}

BlockStage::~BlockStage() = default;

bool BlockStage::placeholder_rows() const {
  return sim::is_placeholder(layers_.front()->layer->memory().buffer("ln1_input").data());
}

std::vector<double> BlockStage::input(int mb) const {
  if (placeholder_rows()) return {};
  const std::uint64_t seed = cfg_.seed ^ (kMicrobatchSalt + static_cast<std::uint64_t>(mb));
  const auto cols = sp_tp::column_range(0, cfg_.h);
  std::vector<double> rows;
  for (std::int64_t r : global_rows_) {
    const std::vector<double> row = sp_tp::init_slice(seed, sp_tp::Tensor::input, r, 1, cols);
    rows.insert(rows.end(), row.begin(), row.end());
  }
  return rows;
}

int BlockStage::take_slot(int mb) {
  SUITE_CHECK(slot_of_.count(mb) == 0, "a micro-batch's forward runs once per step");
  int slot = slots_;
  if (free_slots_.empty())
    ++slots_;
  else
    slot = free_slots_.back(), free_slots_.pop_back();
  slot_of_[mb] = slot;
  return slot;
}

std::vector<double> BlockStage::forward(int mb, const std::vector<double>& x) {
  const int slot = take_slot(mb);
  PhaseTimer phases(ctx_.device);
  phases.begin_step();
  // Each layer reads the previous one's output (the first, x) without a copy of its own: a
  // rank holds one host copy of the hop while it waits in the layer's collectives.
  const std::vector<double>* in = &x;
  std::vector<double> y;
  for (auto& l : layers_) {
    if (l->attention) l->attention->use(slot);
    l->microbatches->set_input(*in);
    l->layer->forward(phases, "fwd_");
    l->microbatches->stash(slot);
    y = placeholder_rows() ? std::vector<double>() : l->layer->local_output();
    in = &y;
  }
  phases.end_step(false);
  return y;
}

std::vector<double> BlockStage::backward(int mb, const std::vector<double>& dy, bool accumulate) {
  const auto it = slot_of_.find(mb);
  SUITE_CHECK(it != slot_of_.end(), "a micro-batch's backward follows its forward");
  const int slot = it->second;
  PhaseTimer phases(ctx_.device);
  phases.begin_step();
  const std::vector<double>* in = &dy;  // as in forward: no copy of the gradient arriving
  std::vector<double> g;
  for (auto l = layers_.rbegin(); l != layers_.rend(); ++l) {
    if ((*l)->attention) (*l)->attention->use(slot);
    (*l)->microbatches->restore(slot);
    (*l)->microbatches->set_output_grad(*in);
    (*l)->layer->backward(phases, /*overlap=*/true);
    if (accumulate) (*l)->microbatches->accumulate();
    g = placeholder_rows() ? std::vector<double>() : (*l)->layer->local_grad_input();
    in = &g;
  }
  phases.end_step(false);
  slot_of_.erase(it);
  free_slots_.push_back(slot);
  return g;
}

void BlockStage::begin_step() {
  for (auto& l : layers_)
    l->microbatches->begin_step();
}

void BlockStage::finish_step() {
  for (auto& l : layers_)
    l->microbatches->finish_step(mesh_ ? &mesh_->axis(MeshAxis::cp) : nullptr);
}

std::int64_t BlockStage::bytes_per_microbatch() const {
  std::int64_t sum = 0;
  for (const auto& l : layers_)
    sum +=
        l->microbatches->slot_bytes() + (l->attention ? l->attention->first().method_bytes() : 0);
  return sum;
}

}  // namespace suite::mesh
