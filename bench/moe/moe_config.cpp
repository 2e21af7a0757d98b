#include "bench/moe/moe_config.hpp"

#include <cmath>
#include <numeric>
#include <sstream>

#include "common/harness/errors.hpp"
#include "kernels/core/counter_rng.hpp"
#include "kernels/moe/moe_index.hpp"

namespace suite::moe {
namespace {

constexpr std::uint64_t kSkewTag = 0x5e3d0b1a5ull;

std::string num(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// Seeded permutation of the experts (Fisher-Yates on counter-based bits).
std::vector<int> expert_permutation(const MoeConfig& c) {
  std::vector<int> perm(static_cast<std::size_t>(c.experts));
  std::iota(perm.begin(), perm.end(), 0);
  for (int i = c.experts - 1; i > 0; --i) {
    const auto j = static_cast<int>(kernels::counter_hash(c.seed ^ kSkewTag, 1, i) %
                                    static_cast<std::uint64_t>(i + 1));
    std::swap(perm[i], perm[j]);
  }
  return perm;
}

}  // namespace

double default_hot_factor(int experts, int k) {
  const double most = static_cast<double>(experts) / k;
  return most > kDefaultHotFactor ? kDefaultHotFactor : (1 + most) / 2;
}

void validate(const MoeConfig& c) {
  auto need = [](bool ok, const std::string& why) {
    if (!ok) throw UsageError("moe: " + why);
  };
  need(c.tokens >= 1, "--tokens must be >= 1 (got " + std::to_string(c.tokens) + ")");
  need(c.microbatches <= c.tokens && c.tokens % c.microbatches == 0,
       "--overlap microbatch:" + std::to_string(c.microbatches) +
           (c.microbatches > c.tokens ? " is more micro-batches than the rank's "
                                      : " does not divide the rank's ") +
           std::to_string(c.tokens) + " tokens (--tokens)");
  need(c.h >= 1 && c.d_ff >= 1, "--hidden and --ffn-hidden must be >= 1");
  need(c.experts >= 1, "--experts must be >= 1");
  need(c.experts % c.n_e == 0,
       "--experts " + std::to_string(c.experts) +
           " is not divisible by the expert-parallel group size N_e = " + std::to_string(c.n_e));
  need(c.k >= 1 && c.k <= c.experts,
       "--top-k " + std::to_string(c.k) + " must be in [1, E = " + std::to_string(c.experts) + "]");
  need(c.k <= kernels::moe::kMaxTopK,
       "--top-k above " + std::to_string(kernels::moe::kMaxTopK) + " is not supported");
  need(c.capacity_factor >= 0 && std::isfinite(c.capacity_factor),
       "--capacity-factor must be > 0 (or 0 for dropless), got " + num(c.capacity_factor));
  need(c.alpha >= 0 && std::isfinite(c.alpha), "--alpha must be >= 0, got " + num(c.alpha));
  if (c.skew == Skew::hot) {
    const double most = static_cast<double>(c.experts) / c.k;
    need(c.hot_factor >= 1 && (c.hot_factor < most || c.hot_factor == 1),
         "--hot-factor " + num(c.hot_factor) + " must be in [1, E/k = " + num(most) +
             "): an expert takes each token at most once");
  }
  need(c.ranks_per_node >= 1 && c.n_e % c.ranks_per_node == 0,
       "--ranks-per-node " + std::to_string(c.ranks_per_node) +
           " does not divide the expert-parallel group size N_e = " + std::to_string(c.n_e));
  if (c.max_nodes_per_token != 0) {
    need(c.max_nodes_per_token >= 1 && c.max_nodes_per_token <= c.nodes(),
         "--max-nodes-per-token " + std::to_string(c.max_nodes_per_token) + " must be in [1, " +
             std::to_string(c.nodes()) + "], the nodes of the group (N_e / --ranks-per-node)");
    need(c.max_nodes_per_token <= kernels::moe::kMaxTopK,
         "--max-nodes-per-token above " + std::to_string(kernels::moe::kMaxTopK) +
             " is not supported");
    need(static_cast<std::int64_t>(c.max_nodes_per_token) * (c.experts / c.nodes()) >= c.k,
         "--max-nodes-per-token " + std::to_string(c.max_nodes_per_token) +
             " leaves fewer than k = " + std::to_string(c.k) + " experts (" +
             std::to_string(c.experts / c.nodes()) + " per node)");
  }
  if (c.redundant_experts != 0) {
    const int R = c.redundant_experts;
    need(R >= 1 && R <= c.experts, "--redundant-experts " + std::to_string(R) +
                                       " must be in [0, E = " + std::to_string(c.experts) + "]");
    need((c.experts + R) % c.n_e == 0,
         "--redundant-experts " + std::to_string(R) + ": E + R = " + std::to_string(c.experts + R) +
             " slots do not divide over N_e = " + std::to_string(c.n_e) + " ranks");
    need(c.n_e >= 2, "--redundant-experts needs N_e >= 2 (a replica on another rank)");
    need(c.dropless(),
         "--redundant-experts needs dropless routing (--capacity-factor 0): "
         "capacity is per expert, replicas would split it");
  }
  need(c.balance_steps >= 0, "--balance-steps must be >= 0");
  need(c.balance_rate > 0 && std::isfinite(c.balance_rate), "--balance-rate must be > 0");
}

std::vector<float> skew_logit_bias(const MoeConfig& c) {
  std::vector<float> bias(static_cast<std::size_t>(c.experts), 0.0f);
  const std::vector<int> perm = expert_permutation(c);
  if (c.skew == Skew::zipf) {
    double z = 0;
    for (int r = 0; r < c.experts; ++r)
      z += std::pow(r + 1.0, -c.alpha);
    for (int r = 0; r < c.experts; ++r)
      bias[static_cast<std::size_t>(perm[r])] =
          static_cast<float>(std::log(c.experts * std::pow(r + 1.0, -c.alpha) / z));
  } else if (c.skew == Skew::hot && c.hot_factor > 1) {
    // One expert with softmax weight w against E-1 of weight 1 is picked first with
    // probability w / (w + E - 1); setting that to M/E gives w = M (E-1) / (E-M).
    const double m = c.hot_factor, e = c.experts;
    bias[static_cast<std::size_t>(perm[0])] = static_cast<float>(std::log(m * (e - 1) / (e - m)));
  }
  return bias;
}

double init_value(const MoeConfig& c, Tensor t, std::int64_t index, std::int64_t row,
                  std::int64_t col) {
  const std::uint64_t bits = kernels::counter_hash(
      c.seed ^ (static_cast<std::uint64_t>(t) << 56), static_cast<std::uint64_t>(index),
      static_cast<std::uint64_t>(row), static_cast<std::uint64_t>(col));
  const double u = static_cast<double>(bits >> 11) * 0x1.0p-53 * 2 - 1;  // uniform in [-1, 1)
  switch (t) {
    case Tensor::input:
    case Tensor::grad_output:
      return u;
    case Tensor::router:  // logits of standard deviation about 1
      return u * 3.0 / std::sqrt(static_cast<double>(c.h));
    case Tensor::w1:  // fan-in h
      return u * std::sqrt(3.0 / static_cast<double>(c.h));
    case Tensor::w2:  // fan-in d_ff
      return u * std::sqrt(3.0 / static_cast<double>(c.d_ff));
    case Tensor::drawn_logit:
      return drawn_logit(c, row, col);
  }
  return 0;
}

std::vector<double> init_block(const MoeConfig& c, Tensor t, std::int64_t index, std::int64_t r0,
                               std::int64_t rows, std::int64_t cols) {
  std::vector<double> out;
  out.reserve(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = r0; r < r0 + rows; ++r)
    for (std::int64_t col = 0; col < cols; ++col)
      out.push_back(init_value(c, t, index, r, col));
  return out;
}

namespace {

constexpr double kSqrt3 = 1.7320508075688772;

// Four 16-bit uniforms of one hash, summed (Irwin-Hall: mean 2, variance 1/3), to unit variance.
float logit_of_bits(std::uint64_t bits) {
  double sum = 0;
  for (int i = 0; i < 4; ++i)
    sum += (static_cast<double>((bits >> (16 * i)) & 0xffffu) + 0.5) * 0x1.0p-16;
  return static_cast<float>((sum - 2.0) * kSqrt3);
}

std::uint64_t drawn_logit_seed(const MoeConfig& c) {
  return c.seed ^ (static_cast<std::uint64_t>(Tensor::drawn_logit) << 56);
}

}  // namespace

float drawn_logit(const MoeConfig& c, std::int64_t token, std::int64_t expert) {
  return logit_of_bits(kernels::counter_hash(drawn_logit_seed(c), static_cast<std::uint64_t>(token),
                                             static_cast<std::uint64_t>(expert)));
}

void drawn_logits(const MoeConfig& c, std::int64_t t0, std::int64_t rows, float* out) {
  // counter_hash(s, t, e) = mix64(mix64(mix64(s) ^ t) ^ e): the token's part once per row.
  const std::uint64_t seed = kernels::mix64(drawn_logit_seed(c));
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::uint64_t row = kernels::mix64(seed ^ static_cast<std::uint64_t>(t0 + r));
    for (std::int64_t e = 0; e < c.experts; ++e)
      *out++ = logit_of_bits(kernels::mix64(row ^ static_cast<std::uint64_t>(e)));
  }
}

std::string case_name(const MoeConfig& c) {
  std::string name = "moe_" + std::string(dtype_name(c.dtype)) + "_T" + std::to_string(c.tokens) +
                     "_h" + std::to_string(c.h) + "_ff" + std::to_string(c.d_ff) + "_E" +
                     std::to_string(c.experts) + "_k" + std::to_string(c.k) + "_" +
                     mlp_name(c.mlp) + "_" + skew_name(c.skew);
  if (c.skew == Skew::zipf) name += "_a" + num(c.alpha);
  if (c.skew == Skew::hot) name += "_m" + num(c.hot_factor);
  name += c.dropless() ? "_dropless" : "_cf" + num(c.capacity_factor);
  if (c.balance_steps > 0) name += "_bal" + std::to_string(c.balance_steps);
  name += "_ep" + std::to_string(c.n_e);
  if (c.redundant_experts > 0) name += "_red" + std::to_string(c.redundant_experts);
  if (c.max_nodes_per_token > 0) name += "_maxnodes" + std::to_string(c.max_nodes_per_token);
  if (c.dispatch == Dispatch::hierarchical) name += "_hier" + std::to_string(c.ranks_per_node);
  if (c.microbatches > 1) name += "_mb" + std::to_string(c.microbatches);
  return c.backward() ? name + "_fwd_bwd" : name;
}

}  // namespace suite::moe
