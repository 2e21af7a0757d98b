// MoE layer compute on the CPU (the reference for the CUDA kernels), no MPI: the router's
// softmax + top-k + renormalisation, the capacity/drop rule, the dispatch and regroup plans
// (which row goes where), the row permutation and the gate-weighted combine; and the backward
// of each op: the combine's (gate gradients, gate-weighted output gradients), the router's
// (renormalised gates and softmax, choice held fixed) and the expert activations'.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/moe/moe_index.hpp"

namespace suite::kernels::moe {

// Copies an expert accepts under capacity factor cf: ceil(cf * k * tokens / experts), with
// tokens routed together (T * N_e); cf <= 0 means dropless and returns -1.
std::int64_t expert_capacity(double cf, int k, std::int64_t tokens, int experts);

// keep[i] = 1 for the copies each expert accepts, 0 for dropped ones. Copies are indexed in
// global order (copy_index); each expert keeps its first `capacity` copies in the order of
// copy_kept_before (lowest gates dropped, ties by copy index). capacity < 0 keeps all.
void capacity_keep(std::int64_t copies, const std::int32_t* chosen, const float* gates, int experts,
                   std::int64_t capacity, std::uint8_t* keep);

// Rows this rank sends, in [destination rank][local expert][token][slot] order.
struct DispatchPlan {
  std::vector<std::int64_t> send_counts;  // [ranks * experts_per_rank] rows per block
  std::vector<std::int64_t> send_src;     // per send row: the local token it carries
  std::vector<std::int64_t> slot_pos;     // per copy [tokens * k]: its send row, -1 dropped
};
DispatchPlan plan_dispatch(std::int64_t tokens, int k, int experts, int ranks,
                           const std::int32_t* chosen, const std::uint8_t* keep);

// Rows received in [source rank][local expert] blocks (recv_counts [ranks * experts_per_rank])
// regrouped into [local expert][source rank] order, each expert's rows contiguous.
struct RegroupPlan {
  std::vector<std::int64_t> gather;       // expert-major row i is received row gather[i]
  std::vector<std::int64_t> scatter;      // received row j is expert-major row scatter[j]
  std::vector<std::int64_t> expert_rows;  // rows per local expert
};
RegroupPlan plan_regroup(int ranks, int experts_per_rank, const std::int64_t* recv_counts);

namespace cpu {

// Per token: z = logits + logit_bias, p = softmax(z) (double arithmetic); the k experts with
// the highest p + select_bias (score_before order); gates = their p renormalised to sum 1.
// chosen and gates are [tokens, k]; prob_sum[e] += p_e summed over tokens (for P_i).
// select_bias may be null (zero).
template <class T>
void router_topk(std::int64_t tokens, int experts, int k, const T* logits, const float* logit_bias,
                 const float* select_bias, std::int32_t* chosen, float* gates, double* prob_sum,
                 GroupLimit limit = {});

// out[i, :] = in[src[i], :] for i < rows (a row permutation or selection).
template <class T>
void gather_rows(std::int64_t rows, std::int64_t cols, const std::int64_t* src, const T* in,
                 T* out);

// out[t, :] = sum over slots s with slot_pos[t k + s] >= 0 (in slot order) of
// gates[t k + s] * back[slot_pos[t k + s], :]; a token whose copies were all dropped gets 0.
// gates == nullptr: every gate is 1 (the dispatch's backward: a token's gradient is the sum
// of its copies' gradients).
template <class T>
void combine(std::int64_t tokens, int k, std::int64_t cols, const std::int64_t* slot_pos,
             const float* gates, const T* back, T* out);

// Backward of combine, from the output gradient grad_out [tokens, cols]: per kept copy c =
// (t, s) at row pos = slot_pos[c], grad_back[pos, :] = gates[c] * grad_out[t, :] and
// gate_grad[c] = <grad_out[t, :], back[pos, :]> (double accumulation). A dropped copy gets
// gate_grad 0 and no row: it carries no gradient.
template <class T>
void combine_backward(std::int64_t tokens, int k, std::int64_t cols, const std::int64_t* slot_pos,
                      const float* gates, const T* grad_out, const T* back, T* grad_back,
                      float* gate_grad);

// Backward of router_topk with the choice held fixed (top-k is piecewise constant): from the
// gates' gradient [tokens, k] and a gradient prob_grad [experts] added to every token's
// probabilities (the aux loss's alpha E f_i / N), dlogits [tokens, experts]: through the
// renormalised gates (gate_to_prob_grad), then the softmax (softmax_grad); double arithmetic.
template <class T>
void router_backward(std::int64_t tokens, int experts, int k, const T* logits,
                     const float* logit_bias, const std::int32_t* chosen, const float* gate_grad,
                     const float* prob_grad, T* dlogits);

// Backward of silu_mul_forward: x [rows, 2 cols] (gate half, up half), dy [rows, cols];
// dx [rows, 2 cols]: gate half dy * up * silu'(gate), up half dy * silu(gate).
template <class T>
void swiglu_backward(std::int64_t rows, std::int64_t cols, const T* x, const T* dy, T* dx);

}  // namespace cpu
}  // namespace suite::kernels::moe
