// The mask kinds a ring or Ulysses step hands an attention kernel (full, causal top-left /
// bottom-right, zig-zag and striped position sets, fully masked), and the check of a kernel's
// o and lse against the double-precision reference. Shared by the CUDA engine tests and the
// emulated tensor-core kernel tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/attention/attention_cpu.hpp"
#include "kernels/attention/attention_engine.hpp"
#include "kernels/core/bf16.hpp"
#include "tests/kernels/kernel_test_util.hpp"

namespace suite::kernels::test {

enum class Kind {
  full,
  full_causal_offdiag,
  top_left,
  bottom_right,
  zigzag,
  striped,
  masked,
  documents,       // packed documents of mixed lengths, causal within each
  documents_full,  // the same, bidirectional within each document
};

inline const char* kind_name(Kind k) {
  switch (k) {
    case Kind::full:
      return "full";
    case Kind::full_causal_offdiag:
      return "offdiag";
    case Kind::top_left:
      return "topleft";
    case Kind::bottom_right:
      return "bottomright";
    case Kind::zigzag:
      return "zigzag";
    case Kind::striped:
      return "striped";
    case Kind::masked:
      return "masked";
    case Kind::documents:
      return "documents";
    case Kind::documents_full:
      return "documentsfull";
  }
  return "?";
}

inline constexpr Kind kAllKinds[] = {Kind::full,          Kind::full_causal_offdiag,
                                     Kind::top_left,      Kind::bottom_right,
                                     Kind::zigzag,        Kind::striped,
                                     Kind::masked,        Kind::documents,
                                     Kind::documents_full};

// Tagged positions (attention_index.hpp) of n tokens from `first` packed into documents of
// lengths 1, 9, 40, 3, 70, 17, ... (cycling): tiles straddle several documents.
inline std::vector<std::int64_t> document_positions(std::int64_t n, std::int64_t first = 0) {
  static constexpr std::int64_t kLengths[] = {1, 9, 40, 3, 70, 17};
  std::vector<std::int64_t> pos;
  std::int64_t doc = 0, left = kLengths[0];
  for (std::int64_t p = 0; p < first + n; ++p) {
    while (left == 0)
      left = kLengths[++doc % 6];
    if (p >= first) pos.push_back(tag_document(doc, p));
    --left;
  }
  return pos;
}

// Positions, causal flag and the mask hint a caller with this layout would pass.
struct Block {
  std::vector<std::int64_t> qp, kp;
  bool causal;
  BlockMask hint;
};

inline Block block_for(Kind kind, std::int64_t cq, std::int64_t ck) {
  switch (kind) {
    case Kind::full:
      return {iota_positions(cq), iota_positions(ck), false, BlockMask::full};
    case Kind::full_causal_offdiag:  // a ring step whose keys all precede its queries
      return {iota_positions(cq, ck), iota_positions(ck), true, BlockMask::full};
    case Kind::top_left:
      return {iota_positions(cq), iota_positions(ck), true, BlockMask::causal_top_left};
    case Kind::bottom_right:
      return {iota_positions(cq, ck - cq), iota_positions(ck), true,
              BlockMask::causal_bottom_right};
    case Kind::zigzag:
      return {block_positions(Layout::zigzag, 2, 4, cq), block_positions(Layout::zigzag, 1, 4, ck),
              true, BlockMask::positions};
    case Kind::striped:  // query rank 1, key rank 2: the strictly-lower diagonal
      return {block_positions(Layout::striped, 1, 4, cq),
              block_positions(Layout::striped, 2, 4, ck), true, BlockMask::positions};
    case Kind::masked:  // every key after every query
      return {iota_positions(cq), iota_positions(ck, cq + 5), true, BlockMask::positions};
    case Kind::documents:  // queries end where the keys do, as a ring's diagonal block
      return {document_positions(cq, std::max<std::int64_t>(ck - cq, 0)), document_positions(ck),
              true, BlockMask::positions};
    case Kind::documents_full:
      return {document_positions(cq, std::max<std::int64_t>(ck - cq, 0)), document_positions(ck),
              false, BlockMask::positions};
  }
  return {};
}

// One block's problem as the tests pose it: strided rows (as inside a packed qkv tensor) and
// seeded inputs, keys spread wider than queries so the softmax is not flat.
struct AttentionProblem {
  Block blk;
  AttentionParams p;
  std::vector<float> q, k, v;
};

inline AttentionProblem make_problem(Kind kind, std::int64_t cq, std::int64_t ck, int heads,
                                     int kv_heads, int head_dim) {
  AttentionProblem x{block_for(kind, cq, ck), {}, {}, {}, {}};
  x.p = make_attention_params(cq, ck, heads, kv_heads, head_dim, x.blk.causal);
  x.p.ld_q += 8;
  x.p.ld_o += 16;
  x.q = random_vector<float>(x.p.cq * x.p.ld_q, 7);
  x.k = random_vector<float>(x.p.ck * x.p.ld_k, 8, -2, 2);
  x.v = random_vector<float>(x.p.ck * x.p.ld_v, 9);
  return x;
}

// o (row stride p.ld_o) and lse [heads, cq] against attention_reference<double> on the same
// inputs q, k, v (already rounded to the storage type, unit roundoff eps). Tensor-core kernels
// round P to bf16 before P V: up to eps * max|v| on top of o's own rounding.
inline void expect_matches_reference(const AttentionParams& p, const Block& blk,
                                     const std::vector<float>& q, const std::vector<float>& k,
                                     const std::vector<float>& v, const std::vector<float>& got_o,
                                     const std::vector<float>& got_lse, double eps,
                                     const std::string& what) {
  std::vector<double> qd(q.begin(), q.end()), kd(k.begin(), k.end()), vd(v.begin(), v.end()),
      o(got_o.size(), 0.0), lse(static_cast<std::size_t>(p.heads) * p.cq);
  cpu::attention_reference<double>(p, qd.data(), kd.data(), vd.data(), blk.qp.data(), blk.kp.data(),
                                   o.data(), lse.data());
  const double vmax = max_abs(vd);
  for (int h = 0; h < p.heads; ++h) {
    for (std::int64_t i = 0; i < p.cq; ++i) {
      for (int e = 0; e < p.head_dim; ++e) {
        const std::size_t idx = i * p.ld_o + h * p.head_dim + e;
        ASSERT_FALSE(std::isnan(got_o[idx])) << what << " o row " << i << " head " << h;
        ASSERT_NEAR(got_o[idx], o[idx], eps * (std::abs(o[idx]) + 2 * vmax) + 3e-5)
            << what << " o row " << i << " head " << h << " col " << e;
      }
      const double ref = lse[h * p.cq + i];
      const float g = got_lse[h * p.cq + i];
      if (std::isinf(ref)) {
        ASSERT_EQ(g, -INFINITY) << what << " lse row " << i << " head " << h;
      } else {
        ASSERT_NEAR(g, ref, 1e-3 * std::max(1.0, std::abs(ref))) << what << " lse row " << i;
      }
    }
  }
}

// One query block (rank `q_rank` of n, c tokens, causal) against the keys of all n ranks in
// rank order (block r: rows [r c, (r+1) c)): the ring's view, where the gradient of each key
// block is computed on its own with the final statistics.
inline AttentionProblem all_keys_problem(Layout layout, int q_rank, int n, std::int64_t c) {
  AttentionProblem x{
      {block_positions(layout, q_rank, n, c), {}, true, BlockMask::positions}, {}, {}, {}, {}};
  for (int r = 0; r < n; ++r) {
    const auto kp = block_positions(layout, r, n, c);
    x.blk.kp.insert(x.blk.kp.end(), kp.begin(), kp.end());
  }
  x.p = make_attention_params(c, c * n, 4, 2, 64, true);
  x.q = random_vector<float>(c * x.p.ld_q, 31);
  x.k = random_vector<float>(c * n * x.p.ld_k, 32, -2, 2);
  x.v = random_vector<float>(c * n * x.p.ld_v, 33);
  return x;
}

// One block problem of a parameterised test: storage type, mask kind, query and key counts,
// query and key/value heads, head dim.
struct BlockCase {
  DType t;
  Kind kind;
  std::int64_t cq, ck;
  int a, nkv, d;
};

inline AttentionProblem make_problem(const BlockCase& c) {
  return make_problem(c.kind, c.cq, c.ck, c.a, c.nkv, c.d);
}

// The case's test name, e.g. bf16_topleft_q128_k96_a4_kv2_d64.
inline std::string block_case_name(const BlockCase& c) {
  return std::string(dtype_name(c.t)) + "_" + kind_name(c.kind) + "_q" + std::to_string(c.cq) +
         "_k" + std::to_string(c.ck) + "_a" + std::to_string(c.a) + "_kv" + std::to_string(c.nkv) +
         "_d" + std::to_string(c.d);
}

// Readable failure messages for BlockCase parameters (found by ADL).
inline void PrintTo(const BlockCase& c, std::ostream* os) {
  *os << block_case_name(c);
}

// A block problem run through one engine choice.
struct EngineCase {
  AttnKernelChoice choice;
  BlockCase block;
};

inline std::string engine_case_name(const EngineCase& c) {
  return std::string(attn_kernel_choice_name(c.choice)) + "_" + block_case_name(c.block);
}

inline void PrintTo(const EngineCase& c, std::ostream* os) {
  *os << engine_case_name(c);
}

// Whether `choice` asks for cuDNN in a build without it (such a case skips).
inline bool cudnn_not_built(AttnKernelChoice choice) {
#if defined(SUITE_HAVE_CUDNN)
  (void)choice;
  return false;
#else
  return choice == AttnKernelChoice::cudnn;
#endif
}

// The gradient side of one block problem: a seeded output gradient dO (o's layout, row stride
// p.ld_o) and, from the double-precision references on the same (storage-rounded) inputs,
// the block's o, lse, delta = rowsum(dO o) and the gradients dq, dk, dv.
struct BackwardProblem {
  std::vector<float> d_o;
  std::vector<double> o, lse, delta, dq, dk, dv;
  // One key (ck = 1): P = 1, so dS = dP - delta is 0 in exact arithmetic and dQ, dK are sums of
  // rounding errors. Their worst case, per unit roundoff of the kernel's type: dP = dO . V and
  // delta = dO . O (O = V) are two dot products of d terms, each off by at most
  // d u sum |dO_l V_l|; dQ = dS K / sqrt(d) and dK = sum_i dS_i Q_i / sqrt(d) carry that.
  // A bound of the arithmetic, whatever the summation order the host's BLAS picks.
  double dq_rounding_per_u = 0, dk_rounding_per_u = 0;
};

// The one-key problem's worst-case rounding of dQ and dK per unit roundoff (BackwardProblem).
inline void one_key_rounding_bounds(const AttentionProblem& x, BackwardProblem& b) {
  const AttentionParams& p = x.p;
  if (p.ck != 1) return;
  const int d = p.head_dim, g = p.heads / p.kv_heads;
  const double inv_sqrt_d = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> dk_bound(static_cast<std::size_t>(p.kv_heads) * d, 0.0);
  for (std::int64_t i = 0; i < p.cq; ++i)
    for (int h = 0; h < p.heads; ++h) {
      const int kvh = h / g;
      double dot = 0;  // sum |dO_l V_l|
      for (int l = 0; l < d; ++l)
        dot +=
            std::fabs(static_cast<double>(b.d_o[static_cast<std::size_t>(i * p.ld_o + h * d + l)]) *
                      x.v[static_cast<std::size_t>(kvh * d + l)]);
      const double ds = 2.0 * d * dot;  // dP's and delta's rounding
      for (int l = 0; l < d; ++l) {
        const double q = std::fabs(x.q[static_cast<std::size_t>(i * p.ld_q + h * d + l)]);
        const double k = std::fabs(x.k[static_cast<std::size_t>(kvh * d + l)]);
        b.dq_rounding_per_u = std::max(b.dq_rounding_per_u, ds * k * inv_sqrt_d);
        dk_bound[static_cast<std::size_t>(kvh * d + l)] += ds * q * inv_sqrt_d;
      }
    }
  for (double v : dk_bound)
    b.dk_rounding_per_u = std::max(b.dk_rounding_per_u, v);
}

// round_d_o_to_bf16: dO as a bf16 device tensor holds it (the references see those values).
inline BackwardProblem make_backward(const AttentionProblem& x, bool round_d_o_to_bf16 = false) {
  const AttentionParams& p = x.p;
  BackwardProblem b;
  b.d_o = random_vector<float>(std::max<std::int64_t>(p.cq, 1) * p.ld_o, 11);
  if (round_d_o_to_bf16) {
    for (float& g : b.d_o)
      g = to_float(to_bf16(g));
  }
  std::vector<double> qd(x.q.begin(), x.q.end()), kd(x.k.begin(), x.k.end()),
      vd(x.v.begin(), x.v.end()), gd(b.d_o.begin(), b.d_o.end());
  b.o.assign(gd.size(), 0.0);
  b.lse.assign(static_cast<std::size_t>(p.heads * p.cq), 0.0);
  b.delta.assign(b.lse.size(), 0.0);
  b.dq.assign(qd.size(), 0.0);
  b.dk.assign(kd.size(), 0.0);
  b.dv.assign(vd.size(), 0.0);
  cpu::attention_reference<double>(p, qd.data(), kd.data(), vd.data(), x.blk.qp.data(),
                                   x.blk.kp.data(), b.o.data(), b.lse.data());
  cpu::attention_backward_delta<double>(p.cq, p.heads, p.head_dim, b.o.data(), gd.data(), p.ld_o,
                                        b.delta.data());
  cpu::attention_backward_reference<double>(p, qd.data(), kd.data(), vd.data(), gd.data(),
                                            x.blk.qp.data(), x.blk.kp.data(), b.dq.data(),
                                            b.dk.data(), b.dv.data());
  one_key_rounding_bounds(x, b);
  return b;
}

// Each gradient element within tol * (|ref| + max |ref| of that tensor) + rounding of the
// reference, and no NaN; `rows`, `row_elems` and `ld` describe which elements are data (the
// rest is padding). A gradient that is exactly 0 in exact arithmetic (one visible key: dS = 0)
// is a difference of O(1) terms in the kernel: the floor of 1e-2 on the scale, and `rounding`,
// the computation's worst-case rounding error (BackwardProblem), which no host's BLAS exceeds.
template <class G>
void expect_grad_near(const std::vector<G>& got, const std::vector<double>& ref, std::int64_t rows,
                      std::int64_t row_elems, std::int64_t ld, double tol, const std::string& what,
                      double rounding = 0) {
  const double scale = std::max(max_abs(ref), 1e-2);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < row_elems; ++c) {
      const std::size_t i = static_cast<std::size_t>(r * ld + c);
      ASSERT_FALSE(std::isnan(static_cast<double>(got[i]))) << what << " row " << r << " col " << c;
      ASSERT_NEAR(static_cast<double>(got[i]), ref[i], tol * (std::abs(ref[i]) + scale) + rounding)
          << what << " row " << r << " col " << c;
    }
}

// dq, dk, dv (layouts of q, k, v) against the reference gradients of `ref`.
template <class G>
void expect_grads_match(const AttentionParams& p, const BackwardProblem& ref,
                        const std::vector<G>& dq, const std::vector<G>& dk,
                        const std::vector<G>& dv, double tol, const std::string& what) {
  const std::int64_t q_row = static_cast<std::int64_t>(p.heads) * p.head_dim;
  const std::int64_t kv_row = static_cast<std::int64_t>(p.kv_heads) * p.head_dim;
  // The unit roundoff of the type the kernel accumulates in (fp32 for bf16 storage too).
  const double u = std::is_same_v<G, double> ? 0x1p-53 : 0x1p-24;
  expect_grad_near(dq, ref.dq, p.cq, q_row, p.ld_q, tol, what + " dq", u * ref.dq_rounding_per_u);
  expect_grad_near(dk, ref.dk, p.ck, kv_row, p.ld_k, tol, what + " dk", u * ref.dk_rounding_per_u);
  expect_grad_near(dv, ref.dv, p.ck, kv_row, p.ld_v, tol, what + " dv");
}

}  // namespace suite::kernels::test
