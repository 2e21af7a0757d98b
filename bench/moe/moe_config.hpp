// Shape and options of one MoE layer case, their validation, the router skew (per-expert
// logit bias), and the deterministic values (tokens, weights) every rank derives for itself.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "common/harness/pass_list.hpp"
#include "kernels/core/dtype.hpp"
#include "kernels/moe/moe_index.hpp"

namespace suite::moe {

enum class Mlp { swiglu, gelu };
enum class Skew { none, zipf, hot };
// How token rows reach the experts' ranks: one all-to-all-v over the group (flat), or once per
// (token, destination node) across nodes, then fanned out inside the node (hierarchical,
// moe_hierarchical.hpp).
enum class Dispatch { flat, hierarchical };

constexpr const char* mlp_name(Mlp m) {
  return m == Mlp::swiglu ? "swiglu" : "gelu";
}
constexpr const char* dispatch_name(Dispatch d) {
  return d == Dispatch::flat ? "flat" : "hierarchical";
}
constexpr const char* skew_name(Skew s) {
  return s == Skew::none ? "none" : s == Skew::zipf ? "zipf" : "hot";
}

// METHODS.md's alpha of the Switch load-balancing loss alpha E sum_i f_i P_i: reported by
// every case, and its gradient (f_i held constant, P_i differentiable) is part of the backward.
constexpr double kAuxLossAlpha = 1e-2;

// Hot-expert load factor M used when --hot-factor is not given: 3 where E/k > 3, else
// (1 + E/k)/2, the middle of the valid range [1, E/k) (1 when k = E). Valid for every E and k.
constexpr double kDefaultHotFactor = 3.0;
double default_hot_factor(int experts, int k);

struct MoeConfig {
  std::int64_t tokens = 1024;  // T, per rank
  std::int64_t h = 512, d_ff = 1024;
  int experts = 8, k = 2;
  Mlp mlp = Mlp::swiglu;
  Skew skew = Skew::none;
  double alpha = 1.0;                     // zipf exponent
  double hot_factor = kDefaultHotFactor;  // hot: load of the hot expert / mean load (about)
  double capacity_factor = 0;             // 0: dropless
  int balance_steps = 0;                  // aux-loss-free balancing steps before the timed steps
  double balance_rate = 0.05;             // bias change per balancing step
  int n_e = 1;                            // EP group size
  Dispatch dispatch = Dispatch::flat;
  // Ranks per node inside the group (consecutive ranks share a node): the placement's, or
  // --ranks-per-node; it divides n_e. Flat dispatch only counts bytes per level with it.
  int ranks_per_node = 1;
  // Node-limited routing (DeepSeek-V3): a token's experts lie on at most this many nodes,
  // chosen by the sum of their best max(1, k / M) scores; 0 = unlimited.
  int max_nodes_per_token = 0;
  // EPLB: the R most loaded experts (the routing after balancing) get one more replica each,
  // all replicas packed onto the ranks by load (moe_eplb.hpp); 0 = the block placement.
  int redundant_experts = 0;
  // --overlap microbatch:M: the rank's tokens cut into M micro-batches of T / M, run as a
  // pipeline (moe_microbatch.hpp); 1 = none. Each micro-batch's capacity is its share.
  int microbatches = 1;
  DType dtype = DType::fp32;
  std::uint64_t seed = 1234;
  Pass pass = Pass::fwd;  // fwd_bwd: forward then backward of the same step
  // alpha of the load-balancing loss in the backward; 0: none (the mesh's block: the loss is
  // over the tokens a group routes together, so it would differ with the group), and no
  // all-gather of the routed counts.
  double aux_alpha = kAuxLossAlpha;

  int experts_per_rank() const { return experts / n_e; }
  int nodes() const { return n_e / ranks_per_node; }
  // The router's group limit: one group per node of the group's experts.
  kernels::moe::GroupLimit node_limit() const {
    if (max_nodes_per_token <= 0) return {};
    return {nodes(), max_nodes_per_token, std::max(1, k / max_nodes_per_token)};
  }
  // Columns of the first expert matrix: SwiGLU's gate and up halves side by side.
  std::int64_t w1_cols() const { return mlp == Mlp::swiglu ? 2 * d_ff : d_ff; }
  bool dropless() const { return !(capacity_factor > 0); }
  bool backward() const { return pass == Pass::fwd_bwd; }
};

// Throws UsageError naming the first constraint the case breaks.
void validate(const MoeConfig& c);

// Per-expert bias added to the router logits: zero (none); log(E p_i) with p_i a power law
// of exponent alpha over a seeded permutation of the experts (zipf); log of the weight that
// gives one seeded expert about hot_factor times the mean load (hot).
std::vector<float> skew_logit_bias(const MoeConfig& c);

// Deterministic values keyed by (seed, tensor, index, row, column): index is the expert for
// weights, 0 for the router; rows of `input` and `grad_output` (the loss's gradient dY with
// respect to the layer output, fed to the backward) are global token indices.
enum class Tensor : std::uint64_t { input = 1, router, w1, w2, grad_output, drawn_logit };
double init_value(const MoeConfig& c, Tensor t, std::int64_t index, std::int64_t row,
                  std::int64_t col);
// Row-major [rows, cols] block of rows [r0, r0 + rows).
std::vector<double> init_block(const MoeConfig& c, Tensor t, std::int64_t index, std::int64_t r0,
                               std::int64_t rows, std::int64_t cols);

// Modeled compute (common/sim/sim.hpp) holds no token values, so its router logits are drawn, not
// computed from x: logits[t, e] keyed by (seed, global token t, expert e), of mean 0 and
// standard deviation 1 like x W_router (Irwin-Hall sum of four uniforms, in about [-3.5, 3.5]).
// The skew bias, selection bias, softmax, top-k and drop rule then apply as to computed ones.
float drawn_logit(const MoeConfig& c, std::int64_t token, std::int64_t expert);
// rows x experts drawn logits of global tokens [t0, t0 + rows), row-major, into out.
void drawn_logits(const MoeConfig& c, std::int64_t t0, std::int64_t rows, float* out);

// "moe_fp32_T1024_h512_ff1024_E8_k2_swiglu_zipf_a1.2_cf1.25_ep4": readable, unique per case;
// the fwd_bwd pass appends "_fwd_bwd" (forward cases keep their names: baselines match on them),
// hierarchical dispatch "_hier<ranks per node>" before it, node-limited routing "_maxnodes<M>"
// and redundant experts "_red<R>" before that; micro-batches "_mb<M>" last of those.
std::string case_name(const MoeConfig& c);

}  // namespace suite::moe
