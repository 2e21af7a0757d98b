// moe: MoE expert parallelism (METHODS.md sections 4 and 5): a router with controllable skew,
// capacity and drops, dispatch/combine all-to-alls, grouped expert GEMMs; forward, or forward
// and backward (--pass).
#include <CLI/CLI.hpp>

#include <cmath>

#include "bench/moe/a2a_case.hpp"
#include "bench/moe/moe_cases.hpp"
#include "bench/moe/moe_flags.hpp"
#include "bench/moe/moe_report.hpp"
#include "common/harness/bench_main.hpp"
#include "common/harness/errors.hpp"
#include "common/harness/pass_list.hpp"
#include "common/results/record_access.hpp"
#include "common/harness/size_list.hpp"

namespace {

struct MoeOptions {
  suite::moe::MoeLayerFlags layer;
  std::string tokens = "1024", skew = "none", alpha = "1.0", hot = "", capacity = "0", pass = "fwd",
              max_nodes = "0", mode = "layer", traffic = "uniform", bytes = "1M", redundant = "0",
              a2a_algo = "flat,pairwise,hierarchical";
  std::int64_t hidden = 512, ffn_hidden = 1024;
  int balance_steps = 0, ep = 0;
  double balance_rate = 0.05;
};

std::vector<double> parse_numbers(const std::string& text, const char* flag) {
  std::vector<double> out;
  for (const auto& item : suite::split_list(text)) {
    std::size_t used = 0;
    double v = NAN;
    try {
      v = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || !std::isfinite(v))
      throw suite::UsageError(std::string(flag) + ": '" + item + "' is not a number");
    out.push_back(v);
  }
  return out;
}

// A list of whole numbers >= 0 (counts), each named `what` in the error.
std::vector<int> parse_counts(const std::string& text, const char* flag, const char* what) {
  std::vector<int> out;
  for (double v : parse_numbers(text, flag)) {
    if (v != std::floor(v) || v < 0 || v > 1 << 20)
      throw suite::UsageError(std::string(flag) + ": '" + std::to_string(v) + "' is not " + what);
    out.push_back(static_cast<int>(v));
  }
  return out;
}

suite::moe::MoeSweep make_sweep(const MoeOptions& o) {
  suite::moe::MoeSweep s;
  s.base.h = o.hidden;
  s.base.d_ff = o.ffn_hidden;
  s.base.k = o.layer.top_k;
  s.base.balance_steps = o.balance_steps;
  s.base.balance_rate = o.balance_rate;
  s.base.mlp = suite::moe::parse_mlp(o.layer.mlp);
  for (const auto& k : suite::split_list(o.skew)) {
    if (k == "none")
      s.skews.push_back(suite::moe::Skew::none);
    else if (k == "zipf")
      s.skews.push_back(suite::moe::Skew::zipf);
    else if (k == "hot")
      s.skews.push_back(suite::moe::Skew::hot);
    else
      throw suite::UsageError("--skew: unknown skew kind '" + k + "' (none, zipf, hot)");
  }
  s.tokens = suite::parse_sweep(o.tokens);
  s.experts = suite::parse_sweep(o.layer.experts);
  s.alphas = parse_numbers(o.alpha, "--alpha");
  if (!o.hot.empty()) s.hot_factors = parse_numbers(o.hot, "--hot-factor");  // else per case
  s.capacity_factors = parse_numbers(o.capacity, "--capacity-factor");
  s.passes = suite::parse_pass_list("--pass", o.pass);
  s.dispatches = suite::moe::parse_dispatch_list(o.layer.dispatch);
  s.ranks_per_node = o.layer.ranks_per_node;
  s.max_nodes = parse_counts(o.max_nodes, "--max-nodes-per-token", "a node count (0 = unlimited)");
  s.redundant = parse_counts(o.redundant, "--redundant-experts", "a count of experts (0 = none)");
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  MoeOptions o;
  suite::BenchDefinition def;
  def.name = "moe";
  def.description =
      "MoE expert parallelism (METHODS.md sections 4, 5): one MoE layer per case and pass on "
      "groups of\n"
      "N_e consecutive ranks (--ep), each holding E/N_e experts and T tokens: route (router GEMM,\n"
      "softmax, top-k, renormalised gates, optional skew and capacity with deterministic drops:\n"
      "lowest gate dropped first, ties by global token index), permute, dispatch (counts, then\n"
      "all-to-all-v), expert MLPs (one GEMM per expert and matrix), combine (reverse "
      "all-to-all-v,\n"
      "gate-weighted sum). Per case: per-phase times, per-expert and per-rank loads, drops, aux\n"
      "loss, bytes per rank counted by the transport = what the routing implies, beside\n"
      "2kThe(N_e-1)/N_e, and the all-to-all / expert time ratio beside (F/W)((N_e-1)/N_e)/d_ff.\n"
      "The output is checked against a host reference of the same layer (same routing and drops).\n"
      "--pass fwd_bwd adds the backward of the same step (METHODS.md section 5) for the loss\n"
      "<dY, out> + alpha E sum f_i P_i (dY seeded, alpha = 1e-2, f_i held constant): output\n"
      "gradients to the experts with the dispatch counts, per-expert input and weight gradients\n"
      "(four GEMMs per expert, 2x the forward FLOPs), input gradients home with the combine\n"
      "counts, the gates' and router's gradients; dropped copies carry no gradient. Bytes of\n"
      "both passes = what the routing implies, beside 4kThe(N_e-1)/N_e; gradients (input, expert\n"
      "weights, router weight, gates) checked against a host double reference.\n"
      "--save-tensors writes chosen experts, gates, kept flags, per-expert counts, input and\n"
      "output per rank when T*h and T*k are at most 1M elements (fwd_bwd: also dY, the\n"
      "gradients of the input, gates, router weight and local experts' weights).\n"
      "Modeled compute (SMPI build, --sim-flops) holds no tensor values: the router's logits are\n"
      "drawn per (seed, global token, expert) instead of computed from x (results attribute\n"
      "router_logits), then routed, skewed, balanced and dropped as above; a capacity factor's\n"
      "drops are settled before timing by each expert's owner. Bytes, loads and drops are exact\n"
      "for that routing; --save-tensors writes the routing only.";
  def.add_options = [&](CLI::App& app) {
    app.add_option("--tokens", o.tokens, "T: tokens per rank (list or range, e.g. 256:4096:x2)")
        ->capture_default_str();
    app.add_option("--hidden", o.hidden, "h: hidden size")->capture_default_str();
    app.add_option("--ffn-hidden", o.ffn_hidden, "d_ff: expert MLP width")->capture_default_str();
    suite::moe::add_moe_layer_flags(app, o.layer, ", a multiple of N_e",
                                    " inside the EP group (0 = the placement's: ranks on this "
                                    "host, cut to divide N_e); set it to pretend several nodes on "
                                    "one machine. Must divide N_e");
    app.add_option("--skew", o.skew,
                   "router skew kinds (list): none; zipf (power law of exponent --alpha over a "
                   "seeded permutation of the experts, as logit bias); hot (one seeded expert gets "
                   "about --hot-factor times the mean load)")
        ->capture_default_str();
    app.add_option("--alpha", o.alpha, "zipf exponents (list), >= 0; 0 = uniform")
        ->capture_default_str();
    app.add_option("--hot-factor", o.hot,
                   "hot-expert load factors M (list), 1 <= M < E/k; default per case: 3, or "
                   "(1 + E/k)/2 where E/k <= 3 (valid for every E and k; 3 at E=8, k=2)");
    app.add_option("--capacity-factor", o.capacity,
                   "capacity factors CF (list): each expert accepts at most ceil(CF k T N_e / E) "
                   "copies, dropping the lowest gates first; 0 = dropless")
        ->capture_default_str();
    app.add_option("--balance-steps", o.balance_steps,
                   "S: aux-loss-free balancing steps before timing (per-expert selection bias "
                   "moved by --balance-rate against the load after each); max/mean load per "
                   "step recorded")
        ->capture_default_str();
    app.add_option("--balance-rate", o.balance_rate, "bias change per balancing step")
        ->capture_default_str();
    suite::add_pass_flag(app, o.pass,
                         ". A fwd_bwd case is named <forward case>_fwd_bwd and has the parameter "
                         "pass = fwd_bwd");
    app.add_option("--max-nodes-per-token", o.max_nodes,
                   "M (list): node-limited routing (DeepSeek-V3): each token's experts lie on at "
                   "most M nodes, those whose best max(1, k/M) router scores sum highest; its "
                   "top-k is taken among their experts. 0 = unlimited; 1 <= M <= nodes of the "
                   "group (N_e / --ranks-per-node). Cases named _maxnodes<M>")
        ->capture_default_str();
    app.add_option("--redundant-experts", o.redundant,
                   "R (list): EPLB's redundant experts: the R most loaded experts (the routing "
                   "after --balance-steps) get one more replica, all E + R replicas packed onto "
                   "the ranks by load ((E + R) / N_e slots each, never two replicas of one expert "
                   "on a rank); the n-th copy a rank routes to a replicated expert goes to its "
                   "replica n mod 2; the backward all-reduces the two replicas' weight gradients. "
                   "Needs dropless routing and N_e >= 2. Cases named _red<R>")
        ->capture_default_str();
    app.add_option("--mode", o.mode,
                   "layer (the MoE layer, default) or a2a: one all-to-all-v over a traffic "
                   "matrix (--traffic, --bytes, --a2a-algo), nccl-tests style, no layer")
        ->capture_default_str();
    app.add_option("--traffic", o.traffic,
                   "a2a mode, traffic matrices (list): uniform (--bytes / N to every rank), "
                   "zipf[:ALPHA] (destinations hot by a seeded power law, default 1.2), incast "
                   "(every rank sends all to rank 0), pair (node 0 and node 1 exchange, rank to "
                   "the rank with its local index), file:PATH (N rows of N comma-separated bytes, "
                   "or fractions of --bytes when all are at most 1)")
        ->capture_default_str();
    app.add_option("--bytes", o.bytes,
                   "a2a mode: bytes a rank sends in all, the patterns' total (list or range, "
                   "e.g. 64K:64M:x4); pairs are rounded down to whole elements of --dtype")
        ->capture_default_str();
    app.add_option("--a2a-algo", o.a2a_algo,
                   "a2a mode, algorithms (list): flat (one all-to-all-v), pairwise (N steps, "
                   "rank + i each, timed per pair), hierarchical (one message per other node to "
                   "the rail peer there, then forwarded inside the node)")
        ->capture_default_str();
    app.add_option("--ep", o.ep,
                   "N_e: expert-parallel group size in consecutive ranks (0 = all ranks); all "
                   "groups run the case at once, step time is the max over all ranks")
        ->capture_default_str();
  };
  def.mesh = [&](int world) { return suite::axis_mesh(suite::MeshAxis::ep, o.ep, world, "--ep"); };
  def.make_cases = [&](suite::BenchContext& ctx) {
    // The layer's flags are parsed in every mode, so a typo never passes silently.
    const suite::moe::MoeSweep layer = make_sweep(o);
    if (o.mode == "layer") return suite::moe::moe_cases(ctx, layer);
    if (o.mode != "a2a")
      throw suite::UsageError("--mode: unknown mode '" + o.mode + "' (layer, a2a)");
    suite::moe::A2aSweep a;
    for (const auto& t : suite::split_list(o.traffic))
      a.traffic.push_back(suite::moe::parse_traffic(t));
    if (a.traffic.empty()) throw suite::UsageError("--traffic: name at least one pattern");
    a.bytes = suite::parse_sweep(o.bytes);
    a.algos = suite::moe::parse_a2a_algos(o.a2a_algo);
    a.ranks_per_node =
        suite::moe::resolve_ranks_per_node(ctx, o.layer.ranks_per_node, ctx.comm.size());
    return suite::moe::a2a_cases(ctx, a);
  };
  def.summarize = [](const suite::BenchContext&, const std::vector<suite::CaseRecord>& records) {
    std::vector<suite::CaseRecord> layer, a2a;
    for (const auto& r : records)
      (suite::param_text(r, "mode") == "a2a" ? a2a : layer).push_back(r);
    suite::moe::print_moe_table(layer);
    suite::moe::print_a2a_table(a2a);
  };
  return suite::run_benchmark(argc, argv, def);
}
