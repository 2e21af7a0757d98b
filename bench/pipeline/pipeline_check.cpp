#include "bench/pipeline/pipeline_check.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "bench/pipeline/block_chunk.hpp"
#include "bench/pipeline/stage_layers.hpp"

namespace suite::pipeline {

namespace {

// max |mine - ref| over max |ref| (1 when ref is all zeros).
double relative_error(const Rows& mine, const Rows& ref) {
  if (mine.size() != ref.size()) return INFINITY;
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    diff = std::max(diff, std::abs(mine[i] - ref[i]));
    scale = std::max(scale, std::abs(ref[i]));
  }
  return diff / (scale > 0 ? scale : 1.0);
}

// What one rank running every layer yields on this rank's rows.
struct Reference {
  double loss = 0;
  std::map<int, Rows> grad_input;
};

// The loss where this rank holds the last stage, the input gradients where it holds the first,
// and layer_errors(chunk, layer of the chunk) for every layer of its chunks.
NamedErrors compare(const PipelineConfig& cfg, const Schedule& schedule, PipelineExecutor& executor,
                    int pp_rank, const Reference& ref,
                    const std::function<NamedErrors(int, int)>& layer_errors) {
  NamedErrors errors;
  const int last = schedule.stages() - 1;
  for (int c = 0; c < cfg.spec.chunks; ++c) {
    const int stage = schedule.stage_of(pp_rank, c);
    if (stage == last)
      errors.emplace_back(
          "loss", std::abs(executor.loss() - ref.loss) / std::max(std::abs(ref.loss), 1e-300));
    if (stage == 0)
      for (const auto& [mb, rows] : ref.grad_input) {
        const auto it = executor.input_grads().find(mb);
        errors.emplace_back(
            "grad_input_mb" + std::to_string(mb),
            it == executor.input_grads().end() ? INFINITY : relative_error(it->second, rows));
      }
    for (int l = 0; l < executor.chunk(c).count(); ++l)
      for (auto& e : layer_errors(c, l))
        errors.push_back(std::move(e));
  }
  return errors;
}

// Chunk c's summed gradients and updated parameters against the reference's (every layer on
// every replica's micro-batches, its tensors laid out as the chunk's), on this rank's shard.
NamedErrors dp_errors(const DataParallelSums& dp, int c, const std::vector<ParamTensor>& ref) {
  const Rows grads = dp.shard_of(c, ref, true);
  Rows updated = dp.shard_of(c, ref, false);
  for (std::size_t i = 0; i < updated.size(); ++i)
    updated[i] -= DataParallelSums::kLearningRate * grads[i];
  const std::string at = "_chunk" + std::to_string(c);
  return {{"dp_summed_grads" + at, relative_error(dp.grad_shard(c), grads)},
          {"dp_updated_params" + at, relative_error(dp.param_shard(c), updated)}};
}

// The single-rank block's initial weights and gradients cut to a chunk's TP slices (the inverse
// of sp_tp::assemble), in the chunk's params() order: the reference the DP sums are held to.
class ReferenceSlices {
 public:
  ReferenceSlices(mesh::BlockStage& chunk, mesh::BlockStage& all) {
    for (int l = 0; l < chunk.count(); ++l) {
      const sp_tp::TransformerLayer& mine = chunk.layer(l);
      sp_tp::TransformerLayer& whole = all.layer(chunk.first_layer() + l);
      for (std::size_t i = 0; i < mine.slices().size(); ++i) {
        values_.push_back(cut(mine.slices()[i], whole.gathered_param(i, false)));
        grads_.push_back(cut(mine.slices()[i], whole.gathered_param(i, true)));
      }
    }
  }
  std::vector<ParamTensor> tensors() {
    std::vector<ParamTensor> out;
    for (std::size_t i = 0; i < values_.size(); ++i)
      out.push_back({values_[i].data(), grads_[i].data(), values_[i].size()});
    return out;
  }

 private:
  static Rows cut(const sp_tp::ParamSlice& s, const Rows& global) {
    Rows out;
    const std::vector<std::int64_t> cols = s.cols();
    for (std::int64_t r = s.r0; r < s.r0 + s.rows; ++r)
      for (std::int64_t col : cols)
        out.push_back(global[static_cast<std::size_t>(r * s.global_cols + col)]);
    return out;
  }
  std::vector<Rows> values_, grads_;
};

}  // namespace

NamedErrors mlp_errors(const PipelineConfig& cfg, const Schedule& schedule,
                       PipelineExecutor& executor, int pp_rank, const DataParallelSums* dp,
                       int replica) {
  const LayerShape shape{cfg.seq * cfg.batch, cfg.hidden, cfg.ffn};
  const int m = cfg.spec.microbatches, replicas = dp ? cfg.replicas : 1;
  StageLayers all(shape, 0, cfg.layers);
  Reference ref;
  for (int id = 0; id < replicas * m; ++id) {  // replica r's micro-batch mb is input r m + mb
    Rows y = all.forward(id, pipeline_input(shape, id));
    Rows dx = all.input_grad(id, y);
    all.weight_grad(id, true);
    if (id / m != replica) continue;
    for (double v : y)
      ref.loss += 0.5 * v * v;
    ref.grad_input[id % m] = std::move(dx);
  }
  NamedErrors errors =
      compare(cfg, schedule, executor, pp_rank, ref, [&](int c, int l) -> NamedErrors {
        if (dp) return {};
        const auto& mine = dynamic_cast<const StageLayers&>(executor.chunk(c));
        const int global = mine.first_layer() + l;
        const std::string at = "_layer" + std::to_string(global);
        return {{"grad_w1" + at, relative_error(mine.grad_w1()[l], all.grad_w1()[global])},
                {"grad_w2" + at, relative_error(mine.grad_w2()[l], all.grad_w2()[global])}};
      });
  const std::vector<ParamTensor> every = all.params();  // W1 and W2 of each layer in turn
  for (int c = 0; dp && c < cfg.spec.chunks; ++c) {
    const Stage& chunk = executor.chunk(c);
    const std::vector<ParamTensor> mine(every.begin() + 2 * chunk.first_layer(),
                                        every.begin() + 2 * (chunk.first_layer() + chunk.count()));
    for (auto& e : dp_errors(*dp, c, mine))
      errors.push_back(std::move(e));
  }
  return errors;
}

NamedErrors block_errors(const PipelineConfig& cfg, BenchContext& ctx, const Schedule& schedule,
                         PipelineExecutor& executor, int pp_rank, const DataParallelSums* dp,
                         int replica) {
  mesh::MeshConfig one = block_config(cfg);
  one.shape.tp = one.shape.cp = 1;
  std::unique_ptr<Comm> self = make_mpi_comm(ctx.device, MPI_COMM_SELF);
  mesh::BlockStage all(one, ctx, *self, nullptr, 0, cfg.layers);
  // This rank's rows of the whole micro-batch (rows p b + g of the single-rank block).
  const auto& mine_rows = dynamic_cast<BlockChunk&>(executor.chunk(0)).block().global_rows();
  const auto my_rows = [&](const Rows& whole) {
    Rows out;
    for (std::int64_t r : mine_rows)
      out.insert(out.end(), whole.begin() + r * cfg.hidden, whole.begin() + (r + 1) * cfg.hidden);
    return out;
  };
  const int m = cfg.spec.microbatches, replicas = dp ? cfg.replicas : 1;
  Reference ref;
  all.begin_step();
  for (int id = 0; id < replicas * m; ++id) {  // replica r's micro-batch mb is input r m + mb
    const Rows y = all.forward(id, all.input(id));
    const Rows dx = all.backward(id, y, true);
    if (id / m != replica) continue;
    for (double v : my_rows(y))
      ref.loss += 0.5 * v * v;
    ref.grad_input[id % m] = my_rows(dx);
  }
  all.finish_step();
  NamedErrors errors = compare(cfg, schedule, executor, pp_rank, ref, [&](int c, int l) {
    NamedErrors layer_errors;
    if (dp) return layer_errors;
    mesh::BlockStage& mine = dynamic_cast<BlockChunk&>(executor.chunk(c)).block();
    const int global = mine.first_layer() + l;
    sp_tp::TransformerLayer& layer = mine.layer(l);
    for (std::size_t i = 0; i < layer.slices().size(); ++i)
      layer_errors.emplace_back(
          "grad_" + layer.slices()[i].name + "_layer" + std::to_string(global),
          relative_error(layer.gathered_param(i, true), all.layer(global).param_grad(i)));
    return layer_errors;
  });
  for (int c = 0; dp && c < cfg.spec.chunks; ++c) {
    ReferenceSlices slices(dynamic_cast<BlockChunk&>(executor.chunk(c)).block(), all);
    for (auto& e : dp_errors(*dp, c, slices.tensors()))
      errors.push_back(std::move(e));
  }
  return errors;
}

}  // namespace suite::pipeline
