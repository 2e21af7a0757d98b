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
  m.dtype = DType::fp64;
  m.seed = cfg.seed;
  m.pass = Pass::fwd_bwd;
  return m;
}

Rows BlockChunk::input_grad(int, const Rows&) {
  throw std::logic_error("the block's backward runs whole (BW)");
}

void BlockChunk::weight_grad(int, bool) {
  throw std::logic_error("the block's backward runs whole (BW)");
}

}  // namespace suite::pipeline
