#include "bench/pipeline/block_chunk.hpp"

#include <stdexcept>

namespace suite::pipeline {

mesh::MeshConfig block_config(const PipelineConfig& cfg) {
  mesh::MeshConfig m;
  m.shape.tp = cfg.mesh.tp;
  m.shape.cp = cfg.mesh.cp;
  m.shape.ep = 1;
  m.s = cfg.seq;
  m.b = cfg.batch;
  m.h = cfg.hidden;
  m.heads = cfg.heads;
  m.d_ff = cfg.ffn;
  m.dtype = cfg.dtype;
  m.seed = cfg.seed;
  m.pass = Pass::fwd_bwd;
  return m;
}

void BlockChunk::finish_step() {
  if (finished_) return;
  block_.finish_step();
  finished_ = true;
}

std::vector<ParamTensor> BlockChunk::params() {
  std::vector<ParamTensor> tensors;
  for (int l = 0; l < block_.count(); ++l) {
    sp_tp::TransformerLayer& layer = block_.layer(l);
    // The four LayerNorm gradients share the first buffer ([4, h]); each weight has its own.
    const std::vector<sp_tp::TransformerLayer::GradBuffer> grads = layer.grad_buffers();
    for (std::size_t i = 0; i < layer.slices().size(); ++i) {
      const bool norm = i < sp_tp::kLayerNormParams;
      double* grad = static_cast<double*>(grads[norm ? 0 : i - sp_tp::kLayerNormParams + 1].data);
      tensors.push_back({static_cast<double*>(layer.memory().buffer(layer.slices()[i].name).data()),
                         norm ? grad + i * static_cast<std::size_t>(hidden_) : grad,
                         static_cast<std::size_t>(layer.slices()[i].elems())});
    }
  }
  return tensors;
}

Rows BlockChunk::input_grad(int, const Rows&) {
  throw std::logic_error("the block's backward runs whole (BW)");
}

void BlockChunk::weight_grad(int, bool) {
  throw std::logic_error("the block's backward runs whole (BW)");
}

}  // namespace suite::pipeline
