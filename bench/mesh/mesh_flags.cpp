#include "bench/mesh/mesh_flags.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <map>

#include "bench/ring_attention/sweep_flags.hpp"
#include "common/device/attention_select.hpp"
#include "common/harness/errors.hpp"
#include "common/harness/pass_list.hpp"
#include "common/harness/size_list.hpp"

namespace suite::mesh {

std::vector<int> degrees(const std::string& flag, const std::string& text) {
  return parse_int_list(flag, text, 0);
}

namespace {

// One --grad-bucket item: a size in MB.
double bucket_mb(const std::string& item) {
  std::size_t used = 0;
  double v = -1;
  try {
    v = std::stod(item, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (item.empty() || used != item.size() || !(v >= 0) || v > 1e6)
    throw UsageError("--grad-bucket " + item + ": a size in MB >= 0 (0: after the backward)");
  return v;
}

// One --moe-overlap item: whether the block runs as two micro-batches.
bool two_batch(const std::string& item) {
  if (item == "none") return false;
  if (item == "two-batch") return true;
  throw UsageError("--moe-overlap: unknown item '" + item + "' (none or two-batch)");
}

}  // namespace

void add_tp_cp_flags(CLI::App& app, std::string& tp, std::string& cp) {
  app.add_option("--tp", tp, "T: tensor-parallel degrees (list); the layer's TP+SP group")
      ->capture_default_str();
  app.add_option("--cp", cp, "C: context-parallel degrees (list); attention's group")
      ->capture_default_str();
}

void add_mesh_flags(CLI::App& app, MeshFlags& f) {
  add_tp_cp_flags(app, f.tp, f.cp);
  app.add_option("--dp", f.dp,
                 "D: data-parallel degrees (list); 0 = the job's ranks / (T C). Every combination "
                 "of --tp, --cp, --dp must multiply to the job's ranks")
      ->capture_default_str();
  app.add_option("--ep", f.ep,
                 "E: expert-parallel degrees (list) for the MoE part, each dividing C D (an expert "
                 "group holds ranks of one TP index); 0 = C D")
      ->capture_default_str();
  add_mesh_order_flag(app, f.order);
  sp_tp::add_layer_shape_flags(app, f.shape);
  add_causal_flag(app, f.causal);
  ring::add_kv_heads_flag(app, f.kv_heads);
  add_cp_method_flag(app, f.cp_method);
  ring::add_layout_flag(app, f.layout);
  moe::add_moe_layer_flags(app, f.moe);
  sp_tp::add_tp_overlap_flag(app, f.tp_overlap);
  app.add_option("--grad-bucket", f.grad_bucket,
                 "MB (list): the gradient sums in buckets of about this many MB, each started "
                 "(nonblocking all-reduce) as soon as the backward has made its gradients, so it "
                 "moves while the rest of the backward computes, as DDP and Megatron do; 0 = one "
                 "all-reduce per group after the backward")
      ->capture_default_str();
  app.add_option(
         "--moe-overlap", f.moe_overlap,
         "(list) none, or two-batch: the rank's b sequences cut into two micro-batches of b/2 "
         "(--batch must be even; with experts; with --cp above 1 each micro-batch's attention "
         "runs over the CP group on its own b/2 sequences, any --cp-method), the MoE all-to-all "
         "of one travelling (nonblocking all-to-all-v on MPI with host buffers and on NCCL) while "
         "the other computes: micro-batch 1's attention (its CP exchanges included), TP "
         "collectives and route beside 0's dispatch, each one's experts beside the other's "
         "exchange. The backward hides only part of its all-to-all "
         "(each expert backward beside the other's exchange; the attention backward has none "
         "in flight). Under a capacity factor each micro-batch's capacity is its share. The "
         "case also runs the block without it on the same tokens and reports both steps, the "
         "all-to-all and compute it measured and the schedule's critical path. Cases named _tbo")
      ->capture_default_str();
  add_pass_flag(app, f.pass);
  add_attn_kernel_flag(app, f.attn_kernel);
}

std::vector<MeshConfig> mesh_configs(const MeshFlags& f, const BenchContext& ctx) {
  const int world = ctx.mpi.size();
  MeshConfig base;
  base.ranks_per_node = f.moe.ranks_per_node;
  base.s = f.shape.seq;
  base.b = f.shape.batch;
  base.h = f.shape.hidden;
  base.heads = f.shape.heads;
  base.kv_heads = f.kv_heads;
  base.d_ff = f.shape.ffn_hidden;
  base.top_k = f.moe.top_k;
  base.mlp = moe::parse_mlp(f.moe.mlp);
  base.attn_kernel = f.attn_kernel;
  base.dtype = ctx.dtype;
  base.seed = ctx.opts.seed;
  if (f.moe.ranks_per_node < 0) throw UsageError("--ranks-per-node must be >= 0");
  const std::vector<moe::Dispatch> dispatches =
      parse_list("--dispatch", f.moe.dispatch, moe::parse_dispatch);
  for (moe::Dispatch d : dispatches)
    if (d == moe::Dispatch::hierarchical && f.moe.ranks_per_node < 1)
      throw UsageError("--dispatch hierarchical needs --ranks-per-node (the ranks of one node)");
  const std::vector<int> experts = degrees("--experts", f.moe.experts);
  const std::vector<bool> causal = parse_list("--causal", f.causal, parse_causal);
  const auto orders = parse_list("--order", f.order, parse_mesh_order_pp, '/');
  const auto methods = parse_list("--cp-method", f.cp_method, parse_cp_method);
  const std::vector<sp_tp::TpOverlapMode> overlaps =
      parse_list("--tp-overlap", f.tp_overlap, sp_tp::parse_tp_overlap);
  const std::vector<ring::Layout> layouts =
      parse_list("--layout", f.layout, ring::parse_layout_name);
  const std::vector<Pass> passes = parse_list("--pass", f.pass, parse_pass);
  const auto buckets = parse_list("--grad-bucket", f.grad_bucket, bucket_mb);
  const std::vector<bool> two_batches = parse_list("--moe-overlap", f.moe_overlap, two_batch);
  const std::vector<int> pps = degrees("--pp", f.pp);
  for (int pp : pps)
    if (pp < 1) throw UsageError("--pp " + std::to_string(pp) + ": mesh runs P >= 1 stages");
  std::vector<MeshConfig> out;
  std::map<int, std::string> skipped;  // per P: --dp 0 combinations that leave no whole DP degree
  for (int tp : degrees("--tp", f.tp))
    for (int cp : degrees("--cp", f.cp))
      for (int pp : pps)
        for (int dp_flag : degrees("--dp", f.dp))
          for (int ep_flag : degrees("--ep", f.ep))
            for (const auto& order : orders)
              for (CpChoice method : methods)
                for (ring::Layout layout : layouts)
                  for (const auto& overlap : overlaps)
                    for (Pass pass : passes)
                      for (int expert_count : experts)
                        for (moe::Dispatch dispatch : dispatches)
                          for (bool is_causal : causal)
                            for (double bucket : buckets) {
                              MeshConfig c = base;
                              c.experts = expert_count;
                              c.dispatch = dispatch;
                              c.causal = is_causal;
                              c.grad_bucket_mb = bucket;
                              int dp = dp_flag;
                              if (dp_flag == 0) {  // the rest of the job, where T C P divides it
                                if (tp < 1 || cp < 1 || pp < 1 || world % (tp * cp * pp) != 0) {
                                  const std::string tc = std::to_string(tp) + " x " +
                                                         std::to_string(cp) +
                                                         (pp > 1 ? " x " + std::to_string(pp) : "");
                                  std::string& skip = skipped[pp];
                                  if (skip.find(tc) == std::string::npos)
                                    skip += (skip.empty() ? "" : ", ") + tc;
                                  continue;
                                }
                                dp = world / (tp * cp * pp);
                              }
                              c.shape.tp = tp;
                              c.shape.cp = cp;
                              c.shape.dp = dp;
                              c.shape.pp = pp;
                              c.shape.ep = ep_flag;
                              c.shape.set_order(order);
                              c.shape.ep = MeshLayout(c.shape, world).ep();  // refuses bad degrees
                              // hybrid:1 is the ring, hybrid:C Ulysses: named as what they are.
                              if (method.method == CpMethod::hybrid && method.u == 1) method = {};
                              if (method.method == CpMethod::hybrid && method.u == cp)
                                method = {CpMethod::ulysses, cp};
                              if (method.method == CpMethod::ulysses) method.u = cp;
                              c.cp_method = method;
                              c.layout = layout;
                              c.tp_overlap = overlap;
                              c.pass = pp > 1 ? Pass::fwd_bwd : pass;  // a pipeline step trains
                              for (bool tbo : two_batches) {
                                c.two_batch = tbo;
                                validate(c, world);
                                const bool same =
                                    std::any_of(out.begin(), out.end(), [&](const MeshConfig& o) {
                                      return o.case_name() == c.case_name();
                                    });
                                if (!same) out.push_back(c);  // C = 1: no method or layout to sweep
                              }
                            }
  // Each P a case at least: a value no T x C leaves room for is refused, not dropped.
  for (int pp : pps)
    if (std::none_of(out.begin(), out.end(), [&](const MeshConfig& c) { return c.shape.pp == pp; }))
      throw UsageError("--tp " + f.tp + ", --cp " + f.cp + ", --pp " + std::to_string(pp) +
                       ", --dp 0: no T x C (x P) (" + skipped[pp] + ") divides the job's " +
                       std::to_string(world) + " ranks");
  return out;
}

}  // namespace suite::mesh
