#include "bench/mesh/mesh_config.hpp"

#include <sstream>

#include "common/harness/errors.hpp"

namespace suite::mesh {

sp_tp::LayerConfig MeshConfig::layer() const {
  sp_tp::LayerConfig l;
  l.s = c();
  l.b = b;
  l.h = h;
  l.heads = heads;
  l.kv_heads = kv();
  l.d_ff = ffn();
  l.t = shape.tp;
  l.dropout = 0;
  l.causal = causal;
  l.fused_attention = true;
  l.attn_kernel = attn_kernel;
  l.dtype = dtype;
  l.seed = seed;
  l.pass = pass;
  l.bwd_overlap = true;
  l.tp_overlap = tp_overlap;
  l.dense_mlp = !moe();
  return l;
}

moe::MoeConfig MeshConfig::moe_layer() const {
  moe::MoeConfig m;
  m.tokens = sp_rows();
  m.h = h;
  m.d_ff = ffn();
  m.experts = experts;
  m.k = top_k;
  m.mlp = mlp;
  m.n_e = shape.ep;
  m.dispatch = dispatch;
  m.ranks_per_node = ranks_per_node > 0 && shape.ep % ranks_per_node == 0 ? ranks_per_node : 1;
  m.dtype = dtype;
  m.seed = seed;
  m.pass = pass;
  m.aux_alpha = 0;
  return m;
}

std::string MeshConfig::case_name() const {
  std::ostringstream n;
  n << "mesh_" << dtype_name(dtype) << "_tp" << shape.tp << "_cp" << shape.cp << "_dp" << shape.dp;
  if (moe()) n << "_ep" << shape.ep;
  if (shape.pp > 1) n << "_pp" << shape.pp;
  n << "_" << mesh_order_name(shape) << "_s" << s << "_b" << b << "_h" << h << "_a" << heads;
  if (kv() != heads) n << "_kv" << kv();
  n << "_ff" << ffn();
  if (moe()) n << "_E" << experts << "_k" << top_k << "_" << moe::mlp_name(mlp);
  if (moe() && dispatch == moe::Dispatch::hierarchical) n << "_hier";
  if (shape.cp > 1) {
    std::string m = cp_method.name();
    for (char& ch : m)
      if (ch == ':') ch = '-';
    n << "_" << m;
    if (cp_method.method != CpMethod::ulysses) n << "_" << ring::layout_name(layout);
  }
  if (!causal) n << "_full";
  if (tp_overlap.kind != sp_tp::TpOverlap::none) n << "_ov" << tp_overlap.tag();
  if (grad_bucket_mb > 0) n << "_bucket" << grad_bucket_mb;
  if (two_batch) n << "_tbo";
  if (backward()) n << "_fwd_bwd";
  std::string name = n.str();
  for (char& ch : name)
    if (ch == ',') ch = '-';
  return name;
}

namespace {

// With P > 1 the block runs as the pipeline's block stage (bench/pipeline/block_chunk.hpp):
// dense MLP, the zig-zag causal ring over CP, one K/V head per head, fp64 on the host, blocking
// TP collectives and the gradient sums after the step.
void validate_block_stage(const MeshConfig& c) {
  const std::string pp = "--pp " + std::to_string(c.shape.pp);
  auto refuse = [&](bool bad, const std::string& what) {
    if (bad) throw UsageError(pp + " with " + what + ": not built");
  };
  refuse(c.moe(), "experts (--experts " + std::to_string(c.experts) + ")");
  refuse(c.shape.cp > 1 && c.cp_method.method != CpMethod::ring,
         "--cp-method " + c.cp_method.name());
  refuse(c.shape.cp > 1 && c.layout != ring::Layout::zigzag,
         "--layout " + std::string(ring::layout_name(c.layout)));
  refuse(!c.causal, "--causal 0");
  refuse(c.kv() != c.heads, "--kv-heads " + std::to_string(c.kv_heads));
  refuse(c.tp_overlap.kind != sp_tp::TpOverlap::none, "--tp-overlap " + c.tp_overlap.name());
  refuse(c.grad_bucket_mb > 0, "--grad-bucket " + std::to_string(c.grad_bucket_mb));
  if (c.dtype != DType::fp64)
    throw UsageError(pp + " runs the block's stages in fp64 on the host: use --dtype fp64 (got " +
                     std::string(dtype_name(c.dtype)) + ")");
}

}  // namespace

void validate(const MeshConfig& c, int world) {
  const MeshLayout layout(c.shape, world);  // degrees, EP, order
  if (c.shape.pp > 1) validate_block_stage(c);
  auto n = [](std::int64_t v) { return std::to_string(v); };
  auto need = [](bool ok, const std::string& why) {
    if (!ok) throw UsageError("mesh: " + why);
  };
  const int T = c.shape.tp, C = c.shape.cp;
  need(c.s > 0 && c.b > 0 && c.h > 0 && c.heads > 0,
       "--seq, --batch, --hidden, --heads must be >= 1");
  need(c.heads % T == 0, "--heads " + n(c.heads) + " is not divisible by --tp " + n(T) +
                             " (each TP rank needs whole heads)");
  need(c.kv() >= T, "--kv-heads " + n(c.kv()) + " is fewer than --tp " + n(T) +
                        " (each TP rank needs whole K/V heads)");
  need(c.kv() % T == 0 && c.heads % c.kv() == 0, "--kv-heads " + n(c.kv()) +
                                                     " must divide --heads " + n(c.heads) +
                                                     " and be divisible by " + "--tp " + n(T));
  const bool zigzag =
      C > 1 && c.cp_method.method != CpMethod::ulysses && (c.layout == ring::Layout::zigzag);
  const std::int64_t unit = zigzag ? 2 * C : C;
  need(c.s % unit == 0, "--seq " + n(c.s) + " is not divisible by " +
                            (zigzag ? "2 x --cp = " : "--cp = ") + n(unit) +
                            (zigzag ? " (zig-zag cuts the sequence into 2 C chunks)" : ""));
  need(c.c() % T == 0, "--seq " + n(c.s) + " / --cp " + n(C) + " = " + n(c.c()) +
                           " tokens per CP rank is not divisible by --tp " + n(T) +
                           " (SP shards them)");
  if (C > 1 &&
      (c.cp_method.method == CpMethod::ulysses || c.cp_method.method == CpMethod::hybrid)) {
    const int u = c.cp_method.method == CpMethod::ulysses ? C : c.cp_method.u;
    need(C % u == 0, "--cp-method hybrid:" + n(u) + ": U must divide --cp " + n(C));
    need((c.heads / T) % u == 0, "--cp-method " + c.cp_method.name() + ": the " + n(c.heads) +
                                     " heads over T U = " + n(T) + " x " + n(u) +
                                     " ranks are not whole (heads must be divisible by T U)");
    need((c.kv() / T) % u == 0, "--cp-method " + c.cp_method.name() + ": the " + n(c.kv()) +
                                    " K/V heads over T U = " + n(T) + " x " + n(u) +
                                    " ranks are not whole (K/V heads must be divisible by T U)");
  }
  if (c.moe()) {
    need(c.experts % layout.ep() == 0,
         "--experts " + n(c.experts) + " is not divisible by --ep " + n(layout.ep()));
    need(c.top_k >= 1 && c.top_k <= c.experts,
         "--top-k " + n(c.top_k) + " must be in [1, --experts " + n(c.experts) + "]");
  }
  need(c.grad_bucket_mb >= 0, "--grad-bucket " + std::to_string(c.grad_bucket_mb) +
                                  " must be >= 0 (MB per bucket; 0 = after the backward)");
  if (c.two_batch) {
    need(c.moe(), "--moe-overlap two-batch needs experts (--experts " + n(c.experts) +
                      "): it hides the MoE all-to-all");
    need(c.b % 2 == 0, "--moe-overlap two-batch: --batch " + n(c.b) +
                           " sequences per DP rank is not divisible by 2 (each micro-batch takes "
                           "whole sequences)");
  }
  sp_tp::validate(c.layer());
  if (c.moe()) {
    moe::MoeConfig m = c.moe_layer();
    m.n_e = layout.ep();
    moe::validate(m);
  }
}

}  // namespace suite::mesh
