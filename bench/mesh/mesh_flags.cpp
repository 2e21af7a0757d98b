#include "bench/mesh/mesh_flags.hpp"

#include <CLI/CLI.hpp>

#include "bench/ring_attention/sweep_flags.hpp"
#include "common/errors.hpp"
#include "common/size_list.hpp"

namespace suite::mesh {
namespace {

std::vector<int> degrees(const std::string& flag, const std::string& text) {
  std::vector<int> out;
  for (const std::string& item : split_list(text)) {
    if (item.empty() || item.size() > 7 ||
        item.find_first_not_of("0123456789") != std::string::npos)
      throw UsageError(flag + " " + text + ": '" + item + "' is not a degree (a whole number, " +
                       "0 where the flag allows it)");
    out.push_back(std::stoi(item));
  }
  if (out.empty()) throw UsageError(flag + " names nothing");
  return out;
}

sp_tp::TpOverlapMode parse_tp_overlap(const std::string& v) {
  using sp_tp::TpOverlap;
  if (v == "none") return {};
  if (v == "ring") return {TpOverlap::ring, 0};
  if (v.rfind("chunks:", 0) == 0) {
    const std::string k = v.substr(7);
    if (!k.empty() && k.size() < 7 && k.find_first_not_of("0123456789") == std::string::npos &&
        std::stoi(k) >= 1)
      return {TpOverlap::chunks, std::stoi(k)};
  }
  throw UsageError("--tp-overlap: unknown mode '" + v + "' (none, ring, chunks:K)");
}

}  // namespace

void add_mesh_flags(CLI::App& app, MeshFlags& f) {
  app.add_option("--tp", f.tp, "T: tensor-parallel degrees (list); the layer's TP+SP group")
      ->capture_default_str();
  app.add_option("--cp", f.cp, "C: context-parallel degrees (list); attention's group")
      ->capture_default_str();
  app.add_option("--dp", f.dp,
                 "D: data-parallel degrees (list); 0 = the job's ranks / (T C). Every combination "
                 "of --tp, --cp, --dp must multiply to the job's ranks")
      ->capture_default_str();
  app.add_option("--ep", f.ep,
                 "E: expert-parallel degrees (list) for the MoE part, each dividing C D (an expert "
                 "group holds ranks of one TP index); 0 = C D")
      ->capture_default_str();
  app.add_option("--order", f.order,
                 "axis orders, inner to outer, separated by '/': each lists tp, cp, ep, dp once "
                 "(the first varies fastest over consecutive ranks, so it lands inside a node); "
                 "Megatron's default tp,cp,ep,dp; ep goes next to cp and dp (its groups fold them)")
      ->capture_default_str();
  app.add_option("--ranks-per-node", f.ranks_per_node,
                 "P: consecutive ranks that share a node (recorded; --dispatch hierarchical "
                 "groups the expert group's ranks by it); 0 = not given")
      ->capture_default_str();
  app.add_option("--seq", f.seq, "s: tokens per sequence (the CP group splits them)")
      ->capture_default_str();
  app.add_option("--batch", f.batch, "b: sequences per DP rank (the global batch is D b)")
      ->capture_default_str();
  app.add_option("--hidden", f.hidden, "h: hidden size")->capture_default_str();
  app.add_option("--heads", f.heads,
                 "a: query heads (h/a = 64 or 128; divisible by T, and by T U "
                 "for Ulysses' U)")
      ->capture_default_str();
  app.add_option("--kv-heads", f.kv_heads, "n_kv: K/V heads (GQA; at least T); 0 = a")
      ->capture_default_str();
  app.add_option("--ffn-hidden", f.ffn_hidden,
                 "d_ff: the MLP's width, or each expert's with --experts; 0 = 4h")
      ->capture_default_str();
  app.add_option("--causal", f.causal, "1: causal attention; 0: full")->capture_default_str();
  app.add_option("--cp-method", f.cp_method,
                 "attention over the CP group (list): ring (ring_attention's ring, overlapped), "
                 "allgather (K/V gathered once, Llama 3's), ulysses (all-to-all to head sharding), "
                 "hybrid:U (Ulysses inside groups of U CP ranks, the ring across them)")
      ->capture_default_str();
  app.add_option("--layout", f.layout,
                 "token layouts of the ring (list): contiguous, zigzag, striped; ignored by "
                 "ulysses")
      ->capture_default_str();
  app.add_option("--experts", f.experts,
                 "E_total: experts of the MoE that replaces the MLP (moe's layer, dropless, no "
                 "auxiliary loss); 0 = a dense MLP")
      ->capture_default_str();
  app.add_option("--top-k", f.top_k, "k: experts per token")->capture_default_str();
  app.add_option("--mlp", f.mlp, "expert MLP: gelu (two matrices) or swiglu")
      ->check(CLI::IsMember({"gelu", "swiglu"}))
      ->capture_default_str();
  app.add_option("--dispatch", f.dispatch,
                 "MoE dispatch: flat (one all-to-all-v over the expert group) or hierarchical "
                 "(across nodes once per token and node, then inside the node; needs "
                 "--ranks-per-node)")
      ->check(CLI::IsMember({"flat", "hierarchical"}))
      ->capture_default_str();
  app.add_option("--tp-overlap", f.tp_overlap,
                 "TP+SP's collectives beside their GEMMs (list): none, ring, chunks:K (sp_tp's)")
      ->capture_default_str();
  app.add_option("--pass", f.pass, std::string(kPassHelp) + "; fwd_bwd ends with the gradient sums")
      ->capture_default_str();
  app.add_option("--attn-kernel", f.attn_kernel, "attention kernel: auto, suite, cudnn")
      ->check(CLI::IsMember({"auto", "suite", "cudnn"}))
      ->capture_default_str();
}

std::vector<MeshConfig> mesh_configs(const MeshFlags& f, const BenchContext& ctx) {
  const int world = ctx.mpi.size();
  MeshConfig base;
  base.ranks_per_node = f.ranks_per_node;
  base.s = f.seq;
  base.b = f.batch;
  base.h = f.hidden;
  base.heads = f.heads;
  base.kv_heads = f.kv_heads;
  base.d_ff = f.ffn_hidden;
  base.causal = f.causal != 0;
  base.experts = f.experts;
  base.top_k = f.top_k;
  base.mlp = f.mlp == "swiglu" ? moe::Mlp::swiglu : moe::Mlp::gelu;
  base.dispatch = f.dispatch == "hierarchical" ? moe::Dispatch::hierarchical : moe::Dispatch::flat;
  base.attn_kernel = ring::parse_attn_kernel_flag(f.attn_kernel);
  base.dtype = ctx.dtype;
  base.seed = ctx.opts.seed;
  if (f.ranks_per_node < 0) throw UsageError("--ranks-per-node must be >= 0");
  if (base.dispatch == moe::Dispatch::hierarchical && f.ranks_per_node < 1)
    throw UsageError("--dispatch hierarchical needs --ranks-per-node (the ranks of one node)");
  if (f.experts < 0) throw UsageError("--experts must be >= 0 (0: a dense MLP)");
  std::vector<std::array<MeshAxis, 4>> orders;
  for (const std::string& o : split_list(f.order, '/'))
    orders.push_back(parse_mesh_order(o));
  std::vector<CpChoice> methods;
  for (const std::string& m : split_list(f.cp_method))
    methods.push_back(parse_cp_method(m));
  std::vector<sp_tp::TpOverlapMode> overlaps;
  for (const std::string& m : split_list(f.tp_overlap))
    overlaps.push_back(parse_tp_overlap(m));
  const std::vector<ring::Layout> layouts = ring::parse_layouts("--layout", f.layout);
  const std::vector<Pass> passes = parse_pass_list("--pass", f.pass);
  std::vector<MeshConfig> out;
  std::string skipped;  // --dp 0 combinations that leave no whole DP degree
  for (int tp : degrees("--tp", f.tp))
    for (int cp : degrees("--cp", f.cp))
      for (int dp_flag : degrees("--dp", f.dp))
        for (int ep_flag : degrees("--ep", f.ep))
          for (const auto& order : orders)
            for (CpChoice method : methods)
              for (ring::Layout layout : layouts)
                for (const auto& overlap : overlaps)
                  for (Pass pass : passes) {
                    MeshConfig c = base;
                    int dp = dp_flag;
                    if (dp_flag == 0) {  // the rest of the job, where T C divides it
                      if (tp < 1 || cp < 1 || world % (tp * cp) != 0) {
                        const std::string tc = std::to_string(tp) + " x " + std::to_string(cp);
                        if (skipped.find(tc) == std::string::npos)
                          skipped += (skipped.empty() ? "" : ", ") + tc;
                        continue;
                      }
                      dp = world / (tp * cp);
                    }
                    c.shape.tp = tp;
                    c.shape.cp = cp;
                    c.shape.dp = dp;
                    c.shape.ep = ep_flag;
                    c.shape.order = order;
                    c.shape.ep = MeshLayout(c.shape, world).ep();  // refuses bad degrees
                    // hybrid:1 is the ring, hybrid:C Ulysses: named as what they are.
                    if (method.method == CpMethod::hybrid && method.u == 1) method = {};
                    if (method.method == CpMethod::hybrid && method.u == cp)
                      method = {CpMethod::ulysses, cp};
                    if (method.method == CpMethod::ulysses) method.u = cp;
                    c.cp_method = method;
                    c.layout = layout;
                    c.tp_overlap = overlap;
                    c.pass = pass;
                    validate(c, world);
                    const bool same = std::any_of(out.begin(), out.end(), [&](const MeshConfig& o) {
                      return o.case_name() == c.case_name();
                    });
                    if (!same) out.push_back(c);  // C = 1 has no method or layout to sweep
                  }
  if (out.empty())
    throw UsageError("--tp " + f.tp + ", --cp " + f.cp + ", --dp 0: no T x C (" + skipped +
                     ") divides the job's " + std::to_string(world) + " ranks");
  return out;
}

}  // namespace suite::mesh
