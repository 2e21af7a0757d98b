#include "bench/moe/moe_flags.hpp"

#include <CLI/CLI.hpp>

#include <cmath>

#include "bench/moe/a2a_case.hpp"
#include "bench/moe/moe_cases.hpp"
#include "common/harness/errors.hpp"
#include "common/harness/pass_list.hpp"
#include "common/harness/shared_flags.hpp"
#include "common/harness/size_list.hpp"

namespace suite::moe {
namespace {

std::vector<double> parse_numbers(const std::string& text, const char* flag) {
  return parse_list(flag, text, [flag](const std::string& item) {
    std::size_t used = 0;
    double v = NAN;
    try {
      v = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || !std::isfinite(v))
      throw UsageError(std::string(flag) + ": '" + item + "' is not a number");
    return v;
  });
}

// A list of whole numbers >= 0 (counts), each named `what` in the error.
std::vector<int> parse_counts(const std::string& text, const char* flag, const char* what) {
  std::vector<int> out;
  for (double v : parse_numbers(text, flag)) {
    if (v != std::floor(v) || v < 0 || v > 1 << 20)
      throw UsageError(std::string(flag) + ": '" + std::to_string(v) + "' is not " + what);
    out.push_back(static_cast<int>(v));
  }
  return out;
}

// --overlap's list: none (1 micro-batch) or microbatch:M with M >= 1.
std::vector<int> parse_overlap(const std::string& text) {
  return parse_list("--overlap", text, [](const std::string& item) {
    if (item == "none") return 1;
    const std::string prefix = "microbatch:";
    const std::string m = item.rfind(prefix, 0) == 0 ? item.substr(prefix.size()) : "";
    const bool digits =
        !m.empty() && m.size() <= 7 && m.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || std::stoi(m) < 1)
      throw UsageError("--overlap: '" + item +
                       "' is not none or microbatch:M with M a whole number >= 1");
    return std::stoi(m);
  });
}

MoeSweep moe_sweep(const MoeFlags& o) {
  MoeSweep s;
  s.base.h = o.hidden;
  s.base.d_ff = o.ffn_hidden > 0 ? o.ffn_hidden : 4 * o.hidden;  // --ffn-hidden 0: 4h
  s.base.k = o.layer.top_k;
  s.base.balance_steps = o.balance_steps;
  s.base.balance_rate = o.balance_rate;
  s.base.mlp = parse_mlp(o.layer.mlp);
  s.skews =
      parse_list("--skew", o.skew,
                 named<Skew>("--skew", "skew kind",
                             {{"none", Skew::none}, {"zipf", Skew::zipf}, {"hot", Skew::hot}}));
  s.tokens = parse_sweep(o.tokens);
  s.experts = parse_sweep(o.layer.experts);
  s.alphas = parse_numbers(o.alpha, "--alpha");
  if (!o.hot.empty()) s.hot_factors = parse_numbers(o.hot, "--hot-factor");  // else per case
  s.capacity_factors = parse_numbers(o.capacity, "--capacity-factor");
  s.passes = parse_list("--pass", o.pass, parse_pass);
  s.dispatches = parse_list("--dispatch", o.layer.dispatch, parse_dispatch);
  s.ranks_per_node = o.layer.ranks_per_node;
  s.max_nodes = parse_counts(o.max_nodes, "--max-nodes-per-token", "a node count (0 = unlimited)");
  s.redundant = parse_counts(o.redundant, "--redundant-experts", "a count of experts (0 = none)");
  s.microbatches = parse_overlap(o.overlap);
  return s;
}

}  // namespace

void add_moe_flags(CLI::App& app, MoeFlags& o) {
  app.add_option("--tokens", o.tokens, "T: tokens per rank (list or range, e.g. 256:4096:x2)")
      ->capture_default_str();
  add_hidden_flag(app, o.hidden);
  add_ffn_hidden_flag(app, o.ffn_hidden);
  add_moe_layer_flags(app, o.layer);
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
  add_pass_flag(app, o.pass);
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
  app.add_option("--overlap", o.overlap,
                 "(list) none, or microbatch:M: the rank's T tokens cut into M micro-batches of "
                 "T/M (M must divide T) run as a pipeline, micro-batch i+1 dispatched while i's "
                 "experts compute and i-1 is combined (nonblocking all-to-all-v on MPI with host "
                 "buffers; one micro-batch after another elsewhere); the backward likewise. "
                 "Under a capacity factor each micro-batch's capacity is its share, so drops may "
                 "differ from M = 1's (counted per micro-batch). Cases named _mb<M>")
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
                 "N_e: expert-parallel group size in consecutive ranks, or as --order lays them "
                 "out (0 = all ranks); all "
                 "groups run the case at once, step time is the max over all ranks")
      ->capture_default_str();
}

std::vector<CaseSpec> moe_flag_cases(BenchContext& ctx, const MoeFlags& o) {
  // The layer's flags are parsed in every mode, so a typo never passes silently.
  const MoeSweep layer = moe_sweep(o);
  if (o.mode == "layer") return moe_cases(ctx, layer);
  if (o.mode != "a2a") throw UsageError("--mode: unknown mode '" + o.mode + "' (layer, a2a)");
  if (layer.microbatches != std::vector<int>{1})
    throw UsageError("--overlap " + o.overlap +
                     ": overlaps the layer's exchanges; --mode a2a "
                     "times one all-to-all-v alone");
  A2aSweep a;
  a.traffic = parse_list("--traffic", o.traffic, parse_traffic);
  a.bytes = parse_sweep(o.bytes);
  a.algos = parse_a2a_algos(o.a2a_algo);
  a.ranks_per_node = resolve_ranks_per_node(ctx, o.layer.ranks_per_node, ctx.comm.size());
  return a2a_cases(ctx, a);
}

}  // namespace suite::moe
