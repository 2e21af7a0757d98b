// The METHODS.md formulas against values worked out by hand.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <tuple>

#include "bench/model/params.hpp"
#include "common/formulas/model.hpp"

namespace m = suite::model;

TEST(ModelCollectives, BytesPerRankFollowNcclTestsFactors) {
  EXPECT_DOUBLE_EQ(m::rs_or_ag_bytes_per_rank(1024, 4), 768);  // 3/4 of 1024
  EXPECT_DOUBLE_EQ(m::all_reduce_bytes_per_rank(1024, 4), 1536);
  EXPECT_DOUBLE_EQ(m::all_reduce_bytes_per_rank(1000, 1), 0);  // one rank sends nothing
  EXPECT_DOUBLE_EQ(m::busbw_factor_all_reduce(8), 1.75);
  EXPECT_DOUBLE_EQ(m::busbw_factor_rs_ag_a2a(8), 0.875);
}

TEST(ModelSpTp, SpCostsNoExtraBandwidth) {
  // s=2048 b=2 h=1024 bf16, t=4: n = 8 MiB; 4 * 3/4 * n = 3n = 25165824 B
  EXPECT_DOUBLE_EQ(m::tp_layer_comm_bytes_per_rank(2048, 2, 1024, 4, 2), 25165824);
  EXPECT_DOUBLE_EQ(m::sp_layer_comm_bytes_per_rank(2048, 2, 1024, 4, 2), 25165824);
}

// The thresholds of METHODS.md 1.1, by hand: h/t >= e F / (2 c W).
TEST(ModelSpTp, OverlapThresholdsAndTimes) {
  const double F = 7e14, W = 3.7e11, e = 2;
  using suite::model::tp_overlap_ops;
  const auto ops = tp_overlap_ops(4096, 1, 8192, 64, 64, 4 * 8192, false, 8, e, F, W);
  ASSERT_EQ(ops.size(), 10u);
  EXPECT_STREQ(ops[0].name, "qkv");
  EXPECT_NEAR(ops[0].threshold, 2 * 7e14 / (6 * 3.7e11), 1e-9);  // MHA: eF/(6W)
  EXPECT_NEAR(ops[1].threshold, 2 * 7e14 / (2 * 3.7e11), 1e-9);  // out_proj: eF/(2W) = 1891.9
  EXPECT_NEAR(ops[1].threshold, 1891.89, 0.01);
  EXPECT_NEAR(ops[2].threshold, 2 * 7e14 / (8 * 3.7e11), 1e-9);  // fc1
  EXPECT_NEAR(ops[3].threshold, 2 * 7e14 / (8 * 3.7e11), 1e-9);  // fc2
  // GQA narrows QKV: c = 1 + 2 * 8 / 64 = 1.25.
  EXPECT_NEAR(tp_overlap_ops(4096, 1, 8192, 64, 8, 4 * 8192, false, 8, e, F, W)[0].c, 1.25, 1e-12);
  // Times of t = 2 steps, by hand: out_proj on s b = 1024 rows, h 1024.
  const auto small = tp_overlap_ops(1024, 1, 1024, 8, 8, 4096, false, 2, e, 1e12, 1e9);
  const double G = 2 * 512.0 * 1024 * (1024 / 2.0) / 1e12, C = 512.0 * 1024 * 2 / 1e9;
  EXPECT_NEAR(small[1].serial_s, 2 * G + C, 1e-15);
  EXPECT_NEAR(small[1].overlapped_s, G + std::max(G, C), 1e-15);
  EXPECT_NEAR(small[1].exposed_s(), std::max(G, C) - G, 1e-15);
}

TEST(ModelSpTp, ActivationMemory) {
  // s=1024 b=1 h=512 a=8 t=4: sbh = 524288, 5as/h = 80
  m::Activation x{1024, 1, 512, 8, 4};
  EXPECT_DOUBLE_EQ(m::act_bytes_no_parallel(x), 524288.0 * (34 + 80));
  EXPECT_DOUBLE_EQ(m::act_bytes_tp(x), 524288.0 * (10 + 6 + 20));
  EXPECT_DOUBLE_EQ(m::act_bytes_tp_sp(x), 524288.0 / 4 * (34 + 80));
  EXPECT_DOUBLE_EQ(m::act_bytes_tp_flash(x), 524288.0 * 16);
  EXPECT_DOUBLE_EQ(m::act_bytes_tp_sp_flash(x), 34 * 524288.0 / 4);
  // t = 1: TP and TP+SP collapse to the unparallelised figure.
  m::Activation one{1024, 1, 512, 8, 1};
  EXPECT_DOUBLE_EQ(m::act_bytes_tp(one), m::act_bytes_no_parallel(one));
  EXPECT_DOUBLE_EQ(m::act_bytes_tp_sp(one), m::act_bytes_no_parallel(one));
  // fp32 activations (e = 4), masks still 1 byte: 18 + 48/t fixed/split, 9as/h scores.
  m::Activation f32{1024, 1, 512, 8, 4, 4};
  EXPECT_DOUBLE_EQ(m::act_bytes_tp_flash(f32), 524288.0 * (18 + 12));
  EXPECT_DOUBLE_EQ(m::act_bytes_tp_sp(f32), 524288.0 / 4 * (18 + 48 + 9 * 8 * 1024 / 512.0));
}

TEST(ModelRing, OverlapConditionAndRefinements) {
  // H100 bf16 peak over NVLink: F/W = 989e12 / 450e9 = 2197.8 tokens.
  EXPECT_NEAR(m::ring_min_block(989e12, 450e9, 1, false, 2), 2197.78, 0.01);
  EXPECT_NEAR(m::ring_min_block(989e12, 50e9, 1, false, 2), 19780, 1e-6);
  EXPECT_NEAR(m::ring_min_block(989e12, 450e9, 1, true, 2), 4395.56, 0.01);   // causal: 2F/W
  EXPECT_NEAR(m::ring_min_block(989e12, 450e9, 8, true, 2), 549.44, 0.01);    // GQA g=8
  EXPECT_NEAR(m::ring_min_block(989e12, 450e9, 1, false, 4), 4395.56, 0.01);  // fp32: x e/2
}

TEST(ModelRing, FlopsBytesMemory) {
  m::Ring r{4096, 1024, 8, 1, 2, false};
  EXPECT_DOUBLE_EQ(m::ring_flops_per_round(r), 4.0 * 1024 * 1024 * 4096);
  EXPECT_DOUBLE_EQ(m::ring_bytes_per_round(r), 4.0 * 1024 * 4096);  // 4ch for bf16
  EXPECT_DOUBLE_EQ(m::ring_bytes_per_layer(r), 7 * 4.0 * 1024 * 4096);
  EXPECT_DOUBLE_EQ(m::ring_memory_bytes(r), 6 * 1024.0 * 4096 * 2);
  m::Ring gqa{4096, 1024, 8, 4, 2, false};
  EXPECT_DOUBLE_EQ(m::ring_bytes_per_round(gqa), 1024.0 * 4096);
  EXPECT_DOUBLE_EQ(m::ring_causal_steps_contiguous(8), 7.5);
  EXPECT_DOUBLE_EQ(m::ring_causal_steps_balanced(8), 4);
  // A micro-batch of b sequences: b times the work, the bytes and the memory of one.
  m::Ring batch = r;
  batch.b = 3;
  EXPECT_DOUBLE_EQ(m::ring_flops_per_round(batch), 3 * m::ring_flops_per_round(r));
  EXPECT_DOUBLE_EQ(m::ring_bytes_per_layer(batch), 3 * m::ring_bytes_per_layer(r));
  EXPECT_DOUBLE_EQ(m::ring_memory_bytes(batch), 3 * m::ring_memory_bytes(r));
}

TEST(ModelUlysses, BytesAndHeadLimits) {
  // MHA: 4 * (N-1)/N * 2sh/N; s=8192 h=4096 N=8: 4 * 7/8 * 8 MiB = 29360128
  EXPECT_DOUBLE_EQ(m::ulysses_bytes_per_layer(8192, 4096, 8, 1, 2),
                   4 * 7.0 / 8 * 2 * 8192 * 4096 / 8);
  // GQA g=4: Q and O unchanged, K and V a quarter each: (2 + 0.5)/4 of MHA.
  EXPECT_DOUBLE_EQ(m::ulysses_bytes_per_layer(8192, 4096, 8, 4, 2),
                   2.5 * 7.0 / 8 * 2 * 8192 * 4096 / 8);
  EXPECT_TRUE(m::ulysses_degree_ok(8, 32, 8));
  EXPECT_FALSE(m::ulysses_degree_ok(16, 32, 8));  // more ranks than K/V heads
  EXPECT_FALSE(m::ulysses_degree_ok(3, 32, 32));  // does not divide
}

TEST(ModelUlysses, HybridsSpanRingAndUlysses) {
  const double s = 4096, h = 4096, g = 4, e = 2;
  // u = N_c: plain Ulysses, no ring part.
  EXPECT_DOUBLE_EQ(m::hybrid_ulysses_bytes_per_layer(s, h, 8, 8, g, e),
                   m::ulysses_bytes_per_layer(s, h, 8, g, e));
  EXPECT_EQ(m::hybrid_ring(s, h, 8, 8, g, e, true).n_c, 1);
  // u = 1: plain ring attention over N_c ranks, no all-to-all.
  const m::Ring ring{h, s / 8, 8, g, e, true};
  const m::Ring one = m::hybrid_ring(s, h, 8, 1, g, e, true);
  EXPECT_DOUBLE_EQ(m::ring_bytes_per_layer(one), m::ring_bytes_per_layer(ring));
  EXPECT_DOUBLE_EQ(m::hybrid_ulysses_bytes_per_layer(s, h, 8, 1, g, e), 0.0);
  // u = 2 of 8: groups of 2 hold s/4 tokens; the ring of 4 moves K/V of s/4 tokens, n_kv/2 heads.
  const m::Ring two = m::hybrid_ring(s, h, 8, 2, g, e, true);
  EXPECT_EQ(two.n_c, 4);
  EXPECT_DOUBLE_EQ(two.c, s / 4);
  EXPECT_DOUBLE_EQ(m::ring_bytes_per_layer(two), 3 * 2 * (s / 4) * (h / 2 / g) * e);
  EXPECT_DOUBLE_EQ(m::hybrid_ulysses_bytes_per_layer(s, h, 8, 2, g, e),
                   0.5 * (s / 4) * h * e / 2 * (2 + 2 / g));
}

TEST(ModelMoe, BytesFlopsRatioCapacityAux) {
  EXPECT_DOUBLE_EQ(m::moe_a2a_bytes_per_rank(2, 4096, 4096, 8, 2),
                   2 * 2 * 4096.0 * 4096 * 2 * 7 / 8);
  EXPECT_DOUBLE_EQ(m::moe_expert_flops_per_pair(1024, 4096, false), 4.0 * 1024 * 4096);
  EXPECT_DOUBLE_EQ(m::moe_expert_flops_per_pair(1024, 4096, true), 6.0 * 1024 * 4096);
  // F/W = 2000, (N-1)/N = 0.75, d_ff = 1000 -> 1.5; SwiGLU 1.0
  EXPECT_DOUBLE_EQ(m::moe_a2a_to_expert_ratio(2000, 1, 4, 1000, false), 1.5);
  EXPECT_DOUBLE_EQ(m::moe_a2a_to_expert_ratio(2000, 1, 4, 1000, true), 1.0);
  EXPECT_DOUBLE_EQ(m::moe_capacity(1.25, 2, 4096, 64), 160);
  double f[4] = {0.25, 0.25, 0.25, 0.25};
  EXPECT_DOUBLE_EQ(m::moe_aux_loss(f, f, 4, 1e-2), 1e-2);  // alpha under uniform routing
  double skew_f[4] = {1, 0, 0, 0}, skew_p[4] = {0.7, 0.1, 0.1, 0.1};
  EXPECT_DOUBLE_EQ(m::moe_aux_loss(skew_f, skew_p, 4, 1e-2), 1e-2 * 4 * 0.7);
}

TEST(ModelPlanning, FusedNoParallelismAndLayerFlops) {
  // s=1024 b=1 h=512 a=8: no parallelism with a fused kernel keeps 34 sbh, the unfused 5as/h more.
  m::Activation x{1024, 1, 512, 8, 1};
  EXPECT_DOUBLE_EQ(m::act_bytes_no_parallel_flash(x), 34 * 524288.0);
  EXPECT_DOUBLE_EQ(m::act_bytes_no_parallel(x) - m::act_bytes_no_parallel_flash(x), 80 * 524288.0);
  // 24 sbh^2 + 4 s^2 b h = 24*1024*512^2 + 4*1024^2*512; causal halves the attention part; /t.
  const double matmul = 24.0 * 1024 * 512 * 512, attention = 4.0 * 1024 * 1024 * 512;
  EXPECT_DOUBLE_EQ(m::layer_flops_per_rank(x, false), matmul + attention);
  m::Activation t4{1024, 1, 512, 8, 4};
  EXPECT_DOUBLE_EQ(m::layer_flops_per_rank(t4, true), (matmul + attention / 2) / 4);
}

// ---- the backward pass (METHODS.md section 5) ----

TEST(ModelBackwardSpTp, CollectiveCountsPerPass) {
  const m::LayerCollectives tp_f = m::tp_layer_collectives(false),
                            tp_b = m::tp_layer_collectives(true);
  EXPECT_EQ(std::make_tuple(tp_f.all_reduce, tp_f.reduce_scatter, tp_f.all_gather),
            std::make_tuple(2, 0, 0));
  EXPECT_EQ(std::make_tuple(tp_b.all_reduce, tp_b.reduce_scatter, tp_b.all_gather),
            std::make_tuple(2, 0, 0));
  const m::LayerCollectives sp_f = m::sp_layer_collectives(false),
                            sp_b = m::sp_layer_collectives(true);
  EXPECT_EQ(std::make_tuple(sp_f.all_reduce, sp_f.reduce_scatter, sp_f.all_gather),
            std::make_tuple(0, 2, 2));
  // g's backward RS, g_bar's backward AG, and 2 AG re-gathering the LayerNorm outputs.
  EXPECT_EQ(std::make_tuple(sp_b.all_reduce, sp_b.reduce_scatter, sp_b.all_gather),
            std::make_tuple(0, 2, 4));
  // n = 8 MiB over t = 4: an AR sends 2 x 3/4 n = 12582912 B, an RS or AG 6291456 B.
  const double n = 8388608;
  EXPECT_DOUBLE_EQ(m::layer_collectives_bytes_per_rank(tp_b, n, 4), 25165824);  // 2 AR
  EXPECT_DOUBLE_EQ(m::layer_collectives_bytes_per_rank(sp_b, n, 4), 37748736);  // 6 x 3/4 n
  EXPECT_DOUBLE_EQ(m::layer_collectives_bytes_per_rank(sp_b, n, 1), 0);
}

TEST(ModelBackwardSpTp, BytesPerLayerForwardPlusBackward) {
  // s=2048 b=2 h=1024 bf16, t=4: n = 8388608 B. TP 8 x 3/4 n = 6n; SP 10 x 3/4 n = 7.5n.
  EXPECT_DOUBLE_EQ(m::tp_layer_comm_bytes_fwd_bwd(2048, 2, 1024, 4, 2), 50331648);
  EXPECT_DOUBLE_EQ(m::sp_layer_comm_bytes_fwd_bwd(2048, 2, 1024, 4, 2), 62914560);
  // b = 1, fp32 (e = 4), t = 8: n = 2048*1024*4 = 8388608 again; TP 7n, SP 8.75n.
  EXPECT_DOUBLE_EQ(m::tp_layer_comm_bytes_fwd_bwd(2048, 1, 1024, 8, 4), 58720256);
  EXPECT_DOUBLE_EQ(m::sp_layer_comm_bytes_fwd_bwd(2048, 1, 1024, 8, 4), 73400320);
  EXPECT_DOUBLE_EQ(m::tp_layer_comm_bytes_fwd_bwd(2048, 2, 1024, 1, 2), 0);  // one rank
  EXPECT_DOUBLE_EQ(m::sp_layer_comm_bytes_fwd_bwd(2048, 2, 1024, 1, 2), 0);
}

TEST(ModelBackwardSpTp, LayerNormGradientAllReduce) {
  // 2 LayerNorms x (weight + bias) x h = 4h elements: h=1024 bf16 is 8192 B; AR over 4: 1.5x.
  EXPECT_DOUBLE_EQ(m::sp_layernorm_grad_bytes_per_rank(1024, 4, 2), 12288);
  // h=4096 bf16 over 8: 32768 B x 2 x 7/8.
  EXPECT_DOUBLE_EQ(m::sp_layernorm_grad_bytes_per_rank(4096, 8, 2), 57344);
  EXPECT_DOUBLE_EQ(m::sp_layernorm_grad_bytes_per_rank(4096, 1, 2), 0);
}

TEST(ModelBackwardSpTp, LayerBackwardFlops) {
  // s=1024 b=1 h=512: forward matmuls 24 sbh^2 = 6442450944, attention 4 s^2 b h = 2147483648.
  // Backward: 2 x 6442450944 + 2.5 x 2147483648 = 12884901888 + 5368709120.
  m::Activation x{1024, 1, 512, 8, 1};
  EXPECT_DOUBLE_EQ(m::layer_bwd_flops_per_rank(x, false), 18253611008.0);
  EXPECT_DOUBLE_EQ(m::layer_bwd_attention_flops_per_rank(x, false), 5368709120.0);
  // Causal halves attention (2684354560); t = 4 divides all: (12884901888 + 2684354560) / 4.
  m::Activation t4{1024, 1, 512, 8, 4};
  EXPECT_DOUBLE_EQ(m::layer_bwd_flops_per_rank(t4, true), 3892314112.0);
  EXPECT_DOUBLE_EQ(m::layer_bwd_attention_flops_per_rank(t4, true), 671088640.0);
  // b = 2: twice everything.
  m::Activation b2{1024, 2, 512, 8, 1};
  EXPECT_DOUBLE_EQ(m::layer_bwd_flops_per_rank(b2, false), 36507222016.0);
  // SwiGLU-sized MLP d_ff = 2h (ffn = 2): matmuls 2 sbh^2 (4 + 4) = 16 sbh^2 = 4294967296 fwd.
  m::Activation ffn2{1024, 1, 512, 8, 1, 2, 2};
  EXPECT_DOUBLE_EQ(m::layer_bwd_flops_per_rank(ffn2, false), 8589934592.0 + 5368709120.0);
}

TEST(ModelBackwardRing, FlopsAndBytesPerRound) {
  // h=4096 c=1024 N_c=8 MHA bf16: 10 c^2 h = 42949672960 FLOPs.
  const m::Ring r{4096, 1024, 8, 1, 2, false};
  EXPECT_DOUBLE_EQ(m::ring_bwd_flops_per_round(r), 42949672960.0);
  // K, V: 2 x 1024 x 4096 x 2 = 16777216 B; dK, dV in fp32 33554432 B, in bf16 16777216 B.
  EXPECT_DOUBLE_EQ(m::ring_bwd_bytes_per_round(r, 4), 50331648);
  EXPECT_DOUBLE_EQ(m::ring_bwd_bytes_per_round(r, 2), 33554432);
  // GQA g = 4, b = 2: K, V 2 x 1024 x 4096 x 2 x 2 / 4 = 8388608 B; dK, dV bf16 the same.
  const m::Ring gqa{4096, 1024, 8, 4, 2, false, 2};
  EXPECT_DOUBLE_EQ(m::ring_bwd_flops_per_round(gqa), 85899345920.0);
  EXPECT_DOUBLE_EQ(m::ring_bwd_bytes_per_round(gqa, 2), 16777216);
  // Causal: the full block's figures (a balanced layout halves the work per round, not these).
  const m::Ring causal{4096, 1024, 8, 1, 2, true};
  EXPECT_DOUBLE_EQ(m::ring_bwd_flops_per_round(causal), 42949672960.0);
  EXPECT_DOUBLE_EQ(m::ring_bwd_bytes_per_round(causal, 4), 50331648);
}

TEST(ModelBackwardRing, BytesPerLayerDkDvMakeOneHopMore) {
  // 7 K/V hops of 16777216 B and 8 dK/dV hops of 33554432 B (fp32).
  const m::Ring r{4096, 1024, 8, 1, 2, false};
  EXPECT_DOUBLE_EQ(m::ring_bwd_bytes_per_layer(r, 4), 117440512.0 + 268435456.0);
  // GQA g = 4, b = 2, bf16 partial sums: (7 + 8) x 8388608.
  const m::Ring gqa{4096, 1024, 8, 4, 2, false, 2};
  EXPECT_DOUBLE_EQ(m::ring_bwd_bytes_per_layer(gqa, 2), 125829120);
  // N_c = 2, h=64 c=8 g=2 b=2: K/V 2x8x64x2x2/2 = 2048 B once, dK/dV fp32 4096 B twice.
  const m::Ring two{64, 8, 2, 2, 2, true, 2};
  EXPECT_DOUBLE_EQ(m::ring_bwd_bytes_per_layer(two, 4), 10240);
  // N_c = 1: the rank's own block, nothing travels.
  const m::Ring one{4096, 4096, 1, 1, 2, false};
  EXPECT_DOUBLE_EQ(m::ring_bwd_bytes_per_layer(one, 4), 0);
}

TEST(ModelBackwardRing, MinimumBlockSizeForOverlap) {
  // METHODS.md: 0.8 F_b/(gW) with bf16 K/V and partial sums, 1.2 F_b/(gW) with fp32 sums.
  EXPECT_DOUBLE_EQ(m::ring_min_block_bwd(1000, 1, 1, false, 2, 2), 800);
  EXPECT_DOUBLE_EQ(m::ring_min_block_bwd(1000, 1, 1, false, 2, 4), 1200);
  EXPECT_DOUBLE_EQ(m::ring_min_block_bwd(1000, 1, 1, true, 2, 2), 1600);   // causal balanced x2
  EXPECT_DOUBLE_EQ(m::ring_min_block_bwd(1000, 1, 8, true, 2, 4), 300);    // GQA g=8: 2 x 1.2/8
  EXPECT_DOUBLE_EQ(m::ring_min_block_bwd(1000, 1, 1, false, 4, 4), 1600);  // fp32 K/V and sums
  // H100 peak over NVLink, F_b/W = 989e12/450e9 = 2197.78: 1758.22 bf16, 2637.33 fp32 sums.
  EXPECT_NEAR(m::ring_min_block_bwd(989e12, 450e9, 1, false, 2, 2), 1758.22, 0.01);
  EXPECT_NEAR(m::ring_min_block_bwd(989e12, 450e9, 1, false, 2, 4), 2637.33, 0.01);
  // At c = 1200 (fp32 sums, h = 64) the round's compute 10 c^2 h = 921600000 FLOPs at
  // F_b = 1000 FLOP/s and its bytes 2 c h (2 + 4) = 921600 B at W = 1 B/s both take 921600 s.
  const m::Ring at{64, 1200, 2, 1, 2, false};
  EXPECT_DOUBLE_EQ(m::ring_bwd_flops_per_round(at), 921600000.0);
  EXPECT_DOUBLE_EQ(m::ring_bwd_bytes_per_round(at, 4), 921600.0);
}

TEST(ModelBackwardRing, Memory) {
  // h=4096 c=1024 b=1 MHA bf16, fp32 sums: block c h = 4194304 elements;
  // Q, O, dO, dQ: (3 x 2 + 4) = 10 B each; K/V x2 and dK/dV x3: (4 x 2 + 6 x 4) = 32 B.
  const m::Ring r{4096, 1024, 8, 1, 2, false};
  EXPECT_DOUBLE_EQ(m::ring_bwd_memory_bytes(r, 4), 4194304.0 * 42);
  EXPECT_DOUBLE_EQ(m::ring_bwd_memory_bytes(r, 2), 4194304.0 * (8 + 20));  // bf16 sums
  // GQA g = 4, b = 2: 8388608 x 10 + 8388608 / 4 x 32.
  const m::Ring gqa{4096, 1024, 8, 4, 2, false, 2};
  EXPECT_DOUBLE_EQ(m::ring_bwd_memory_bytes(gqa, 4), 83886080.0 + 67108864.0);
  // N_c = 1 holds the same blocks (the buffers are there whether or not they travel).
  const m::Ring one{4096, 1024, 1, 1, 2, false};
  EXPECT_DOUBLE_EQ(m::ring_bwd_memory_bytes(one, 4), 4194304.0 * 42);
}

TEST(ModelBackwardRing, AllGatherVariantReduceScatter) {
  // s=8192 h=4096 N_c=8, fp32 sums: 7/8 x 2 x 8192 x 4096 x 4 = 7/8 x 268435456.
  EXPECT_DOUBLE_EQ(m::ring_allgather_bwd_bytes_per_layer(8192, 4096, 8, 1, 4, 1), 234881024);
  // GQA g=4, b=2, bf16 sums: 7/8 x 2 x 8192 x 4096 x 2 x 2 / 4 = 7/8 x 67108864.
  EXPECT_DOUBLE_EQ(m::ring_allgather_bwd_bytes_per_layer(8192, 4096, 8, 4, 2, 2), 58720256);
  EXPECT_DOUBLE_EQ(m::ring_allgather_bwd_bytes_per_layer(8192, 4096, 1, 1, 4, 1), 0);
}

TEST(ModelBackwardUlysses, SameBytesAsTheForward) {
  // MHA s=8192 h=4096 N=8 bf16: dO in, dQ, dK, dV out: 4 x 7/8 x 2 x 8192 x 4096 / 8.
  EXPECT_DOUBLE_EQ(m::ulysses_bwd_bytes_per_layer(8192, 4096, 8, 1, 2), 29360128);
  // GQA g=4: dQ and dO whole, dK and dV a quarter: 2.5 x 7/8 x 8388608.
  EXPECT_DOUBLE_EQ(m::ulysses_bwd_bytes_per_layer(8192, 4096, 8, 4, 2), 18350080);
  EXPECT_DOUBLE_EQ(m::ulysses_bwd_bytes_per_layer(8192, 4096, 1, 1, 2), 0);
  // Hybrid u = 2 of 8, s=h=4096 g=4: groups of 2 over s/4 = 1024 tokens:
  // 1/2 x 1024 x 4096 x 2 / 2 x (2 + 1/2) = 5242880 B, as in the forward.
  EXPECT_DOUBLE_EQ(m::hybrid_ulysses_bwd_bytes_per_layer(4096, 4096, 8, 2, 4, 2), 5242880);
  EXPECT_DOUBLE_EQ(m::hybrid_ulysses_bwd_bytes_per_layer(4096, 4096, 8, 1, 4, 2), 0);  // ring
  // Its ring part (4 groups, h/2 = 2048, c = 1024, g = 4), fp32 sums: K/V 2097152 B x 3 hops,
  // dK/dV 4194304 B x 4 hops.
  const m::Ring ring = m::hybrid_ring(4096, 4096, 8, 2, 4, 2, true);
  EXPECT_DOUBLE_EQ(m::ring_bwd_bytes_per_layer(ring, 4), 6291456.0 + 16777216.0);
}

// ---- the model executable's input rules (bench/model/params.hpp) ----

namespace {

using suite::model_cli::Params;
using suite::model_cli::params_error;

Params with(void (*set)(Params&)) {
  Params p;
  set(p);
  return p;
}

}  // namespace

TEST(ModelInputs, DefaultsAndSweepSizesPass) {
  for (const char* section : {"all", "sp", "ring", "ulysses", "moe"})
    EXPECT_EQ(params_error(Params{}, section), "") << section;
  // scripts/envs/sweep.py's GPU ring cell: h=8192 a=64 n_kv=8 causal, s = 4K x 16 over N_c = 16.
  Params ring = with(
      [](Params& p) { p.h = 8192, p.a = 64, p.kv = 8, p.causal = true, p.s = 65536, p.n_c = 16; });
  EXPECT_EQ(params_error(ring, "ring"), "");
  // A rule of another section does not apply: sp does not use n_kv, moe not the heads.
  Params gqa = with([](Params& p) { p.kv = 5; });
  EXPECT_EQ(params_error(gqa, "sp"), "");
  EXPECT_EQ(params_error(gqa, "moe"), "");
  Params ep = with([](Params& p) { p.experts = 10, p.n_e = 4; });
  EXPECT_EQ(params_error(ep, "ring"), "");
}

TEST(ModelInputs, DivisibilityRulesNameTheFlagValues) {
  // The review's cases: each printed predictions and exited 0 before.
  EXPECT_EQ(params_error(with([](Params& p) { p.kv = 5; }), "all"),
            "--heads 32 is not divisible by --kv-heads 5 (GQA group g = a/n_kv must be whole)");
  EXPECT_EQ(params_error(with([](Params& p) { p.s = 100, p.n_c = 3; }), "ring"),
            "--seq 100 is not divisible by --cp 3 (each rank holds c = s/N_c tokens: "
            "s % N_c == 0)");
  EXPECT_EQ(params_error(with([](Params& p) { p.experts = 10, p.n_e = 4; }), "moe"),
            "--experts 10 is not divisible by --ep 4 (each rank holds E/N_e experts: "
            "E % N_e == 0)");
  const std::string sp = params_error(with([](Params& p) { p.a = 6, p.t = 4; }), "sp");
  EXPECT_NE(sp.find("--heads 6 is not divisible by --tp 4"), std::string::npos) << sp;
  EXPECT_NE(sp.find("--hidden 4096 is not divisible by --heads 6"), std::string::npos) << sp;
  // The other rules the sections rely on.
  EXPECT_NE(params_error(with([](Params& p) { p.s = 4100; }), "sp")
                .find("--seq 4100 is not divisible by --tp 8"),
            std::string::npos);
  EXPECT_NE(params_error(with([](Params& p) { p.d_ff = 100; }), "sp")
                .find("d_ff 100 is not divisible by --tp 8"),
            std::string::npos);
  EXPECT_NE(params_error(with([](Params& p) { p.s = 24, p.causal = true; }), "ring")
                .find("--seq 24 is not divisible by 2 x --cp 8"),
            std::string::npos);
  EXPECT_EQ(params_error(with([](Params& p) { p.s = 24; }), "ring"), "");  // s % 2N_c: causal only
  EXPECT_NE(params_error(with([](Params& p) { p.a = 4, p.kv = 4, p.h = 256; }), "ulysses")
                .find("--heads 4 is not divisible by --cp 8"),
            std::string::npos);
  EXPECT_NE(params_error(with([](Params& p) { p.k = 65; }), "moe")
                .find("--top-k 65 must be <= --experts 64"),
            std::string::npos);
  // Sizes first, one at a time.
  EXPECT_EQ(params_error(with([](Params& p) { p.s = 100.5; }), "all"),
            "--seq 100.5 must be a whole number >= 1");
  EXPECT_EQ(params_error(with([](Params& p) { p.t = 0; }), "all"), "--tp 0 must be >= 1");
  EXPECT_EQ(params_error(with([](Params& p) { p.bw = 0; }), "moe"), "--bw 0 must be > 0");
  // Values no machine has, whose figures would print as inf or nan.
  EXPECT_EQ(params_error(with([](Params& p) { p.s = 1e300; }), "sp"),
            "--seq 1e+300 is above 2^53 (counts stay exact below)");
  EXPECT_EQ(params_error(with([](Params& p) { p.s = 9007199254740992.0; }), "sp"), "");
  EXPECT_EQ(params_error(with([](Params& p) { p.flops_bwd = 1e-300; }), "ring"),
            "--flops-bwd 1e-300 must be >= 1 (FLOP/s or bytes/s)");
  EXPECT_EQ(params_error(with([](Params& p) { p.bw = 0.5; }), "ring"),
            "--bw 0.5 must be >= 1 (FLOP/s or bytes/s)");
}

TEST(ModelInputs, BackwardRateAndGradientType) {
  EXPECT_EQ(params_error(with([](Params& p) { p.flops_bwd = 4e14; }), "ring"), "");
  for (const char* dtype : {"bf16", "fp32", "fp64"}) {
    Params p;
    p.grad_dtype = dtype;
    EXPECT_EQ(params_error(p, "all"), "") << dtype;
  }
  EXPECT_EQ(params_error(with([](Params& p) { p.flops_bwd = 0; }), "ring"),
            "--flops-bwd 0 must be > 0 (omit it to use --flops)");
  EXPECT_EQ(params_error(with([](Params& p) { p.flops_bwd = -1e12; }), "sp"),
            "--flops-bwd -1000000000000 must be > 0 (omit it to use --flops)");
  EXPECT_NE(params_error(with([](Params& p) { p.flops_bwd = HUGE_VAL; }), "ulysses"), "");
  EXPECT_EQ(params_error(with([](Params& p) { p.grad_dtype = "fp16"; }), "ring"),
            "--grad-dtype fp16 must be bf16, fp32 or fp64");
}

namespace {

// The model executable beside this test binary (both land in the build's bin/); empty if absent.
std::filesystem::path model_exe() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  const auto exe = self.parent_path() / "model";
  return std::filesystem::exists(exe) ? exe : std::filesystem::path{};
}

struct ModelRun {
  int status = -1;
  std::string out, err;
};

ModelRun run_model(const std::filesystem::path& exe, const std::string& args) {
  // One file per process: ctest -j runs each test in its own process, concurrently.
  const std::string err_file =
      testing::TempDir() + "model_stderr_" + std::to_string(getpid()) + ".txt";
  const std::string cmd = "'" + exe.string() + "' " + args + " 2>'" + err_file + "'";
  ModelRun r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), pipe) != nullptr)
    r.out += buf.data();
  const int raw = pclose(pipe);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  if (FILE* f = std::fopen(err_file.c_str(), "r")) {
    while (std::fgets(buf.data(), buf.size(), f) != nullptr)
      r.err += buf.data();
    std::fclose(f);
  }
  return r;
}

}  // namespace

TEST(ModelInputs, HybridDegreeRules) {
  // 4 heads over 8 ranks: plain Ulysses is refused, a hybrid of degree 4 (or 2) is not.
  auto few = [](int u) {
    Params p;
    p.a = 4, p.kv = 4, p.h = 256, p.u = u;
    return p;
  };
  EXPECT_NE(params_error(few(0), "ulysses").find("--ulysses-degree u"), std::string::npos);
  EXPECT_EQ(params_error(few(4), "ulysses"), "");
  EXPECT_EQ(params_error(few(2), "ulysses"), "");
  EXPECT_EQ(params_error(few(3), "ulysses"),
            "--ulysses-degree 3 does not divide --cp 8 (Ulysses groups of u ranks, a ring across "
            "N_c/u of them); --heads 4 is not divisible by --ulysses-degree 3 (Ulysses gives each "
            "rank a/u whole heads: a % u == 0)");
  EXPECT_NE(params_error(few(-1), "ulysses").find("must be >= 1"), std::string::npos);
}

TEST(ModelCli, ImpossibleSizesExitTwoWithOneMessage) {
  const auto exe = model_exe();
  if (exe.empty()) GTEST_SKIP() << "the model executable is not built beside unit_tests";
  const std::pair<const char*, const char*> cases[] = {
      {"--kv-heads 5", "--heads 32 is not divisible by --kv-heads 5"},
      {"--section ring --seq 100 --cp 3", "--seq 100 is not divisible by --cp 3"},
      {"--section moe --experts 10 --ep 4", "--experts 10 is not divisible by --ep 4"},
      {"--section sp --heads 6 --tp 4", "--heads 6 is not divisible by --tp 4"},
  };
  for (const auto& [args, needle] : cases) {
    const ModelRun r = run_model(exe, args);
    EXPECT_EQ(r.status, 2) << args;
    EXPECT_EQ(r.out, "") << args << ": predictions printed for impossible sizes";
    EXPECT_EQ(r.err.rfind("error: model: ", 0), 0u) << args << ": " << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << args << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
  }
  const ModelRun ok = run_model(exe, "--section ring --seq 131072 --cp 16 --kv-heads 8 --causal");
  EXPECT_EQ(ok.status, 0) << ok.err;
  EXPECT_NE(ok.out.find("prediction: section=ring"), std::string::npos);
}

TEST(ModelCli, BadBackwardFlagsExitTwoWithOneMessage) {
  const auto exe = model_exe();
  if (exe.empty()) GTEST_SKIP() << "the model executable is not built beside unit_tests";
  const std::pair<const char*, const char*> cases[] = {
      {"--grad-dtype fp16", "--grad-dtype fp16 must be bf16, fp32 or fp64"},
      {"--section ring --flops-bwd 0", "--flops-bwd 0 must be > 0"},
      {"--section sp --flops-bwd -5", "--flops-bwd -5 must be > 0"},
      // Values CLI11 itself refuses, like the benchmarks refuse theirs.
      {"--flops-bwd fast", "--flops-bwd"},
      {"--dtype fp16", "--dtype"},
      {"--no-such-flag", "--no-such-flag"},
  };
  for (const auto& [args, needle] : cases) {
    const ModelRun r = run_model(exe, args);
    EXPECT_EQ(r.status, 2) << args;
    EXPECT_EQ(r.out, "") << args;
    EXPECT_EQ(r.err.rfind("error: model: ", 0), 0u) << args << ": " << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << args << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
  }
}

TEST(ModelCli, BackwardRateDefaultsToTheForwards) {
  const auto exe = model_exe();
  if (exe.empty()) GTEST_SKIP() << "the model executable is not built beside unit_tests";
  const std::string args = "--section ring -F 1e12 -W 1e9 ";
  const ModelRun plain = run_model(exe, args), same = run_model(exe, args + "--flops-bwd 1e12");
  ASSERT_EQ(plain.status, 0) << plain.err;
  EXPECT_EQ(plain.out, same.out);  // omitted --flops-bwd is --flops
  // bf16 K/V and partial sums, MHA, full: c*_bwd = 0.8 F_b/W = 0.8 x 500 at F_b = 5e11.
  const ModelRun slow = run_model(exe, args + "--flops-bwd 5e11 --grad-dtype bf16");
  ASSERT_EQ(slow.status, 0) << slow.err;
  EXPECT_NE(slow.out.find("F_b=5e+11 FLOP/s, dK/dV partial sums in bf16"), std::string::npos)
      << slow.out;
  const auto at = slow.out.find("minimum block size for bwd overlap");
  ASSERT_NE(at, std::string::npos) << slow.out;
  EXPECT_NE(slow.out.substr(at, slow.out.find('\n', at) - at).find(" 400 tokens"),
            std::string::npos)
      << slow.out;
}
