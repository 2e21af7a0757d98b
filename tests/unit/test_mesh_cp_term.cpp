// The planner's CP term (mesh_step in common/formulas/mesh_model.hpp) on a ring of 4 ranks over
// nodes of 2, against timelines worked out by hand here.
#include <gtest/gtest.h>

#include "common/formulas/mesh_model.hpp"

namespace sm = suite::model;

namespace {

// s 8, h 8, a 4, n_kv 4 (g 1), C 4: c 2 tokens a rank, a K/V block 2 c h e = 64 bytes; causal
// attention 4 (64 / 2 / 4) 8 = 256 FLOPs a rank, 64 ns a round at 1e9 FLOP/s.
sm::MeshBlock ring_block(suite::CpMethod method) {
  sm::MeshBlock m;
  m.s = 8, m.h = 8, m.a = 4, m.n_kv = 4, m.d_ff = 16, m.e = 2, m.e_grad = 2;
  m.C = 4, m.cp = method, m.u = method == suite::CpMethod::ulysses ? 4 : 1;
  return m;
}

// The node's links 4e9 B/s and no latency, the network 0.5e9 B/s and 1 ns a message: a K/V
// block takes 16 ns inside a node, 1 + 128 ns across.
sm::Cluster cluster(int ranks_per_node) {
  return {ranks_per_node, sm::same_rates({4e9, 0}), sm::same_rates({0.5e9, 1e-9}), 1e9, 1e9, 1e9};
}

sm::AxisTime cp_term(const sm::MeshBlock& m, int ranks_per_node, bool backward) {
  suite::MeshShape shape;
  shape.cp = 4;
  return sm::mesh_step(m, suite::MeshLayout(shape, 4), cluster(ranks_per_node), backward, true).cp;
}

}  // namespace

// Ranks 0 1 | 2 3: hops 0->1 and 2->3 inside a node (16 ns), 1->2 and 3->0 across (129 ns).
// Each round a rank posts its send and receive, computes (64 ns) and waits for both; a block
// moves once both ends have posted, so a round ends at max(start + 64, the hop in, the hop out).
// Every rank has a crossing hop on one side: rounds 0-2 end at 129, 258, 387 on all four, the
// last (no send) at 451 against 256 of compute: 195 ns exposed, 3 (129 - 64), the ring at its
// slowest hop's pace (a ring charged its mean hop, 72.5 ns, would show 3 x 8.5 = 25.5).
TEST(MeshCpTerm, RingAcrossNodesAtItsSlowestHopByHand) {
  const sm::AxisTime fwd = cp_term(ring_block(suite::CpMethod::ring), 2, false);
  EXPECT_TRUE(fwd.across);
  EXPECT_NEAR(fwd.exposed, 195e-9, 1e-15);
  EXPECT_NEAR(fwd.time, 3 * 129e-9, 1e-15);
}

// The backward: K/V and the dK/dV partial sums (64 bytes in bf16) a hop, 1 + 256 ns across,
// against 2.5 x 64 = 160 ns of compute a round: 3 x 97 exposed, and the sums' home hop (129 ns)
// after the last round with nothing beside it: 420 ns, 615 with the forward's. In fp32 the sums
// are 128 bytes: 1 + 384 ns a hop, 3 x 225 + (1 + 256) = 932 ns, 1127 with the forward's.
TEST(MeshCpTerm, RingBackwardAndItsPartialSumsByHand) {
  sm::MeshBlock m = ring_block(suite::CpMethod::ring);
  EXPECT_NEAR(cp_term(m, 2, true).exposed, 615e-9, 1e-15);
  m.e_grad = 4;
  EXPECT_NEAR(cp_term(m, 2, true).exposed, 1127e-9, 1e-15);
}

// All four on one node: a hop of 16 ns hides behind each round; the backward's 32 ns hops too,
// but its home hop (16 ns) is exposed.
TEST(MeshCpTerm, RingInsideANodeHidesByHand) {
  const sm::MeshBlock m = ring_block(suite::CpMethod::ring);
  EXPECT_FALSE(cp_term(m, 4, false).across);
  EXPECT_NEAR(cp_term(m, 4, false).exposed, 0, 1e-15);
  EXPECT_NEAR(cp_term(m, 4, true).exposed, 16e-9, 1e-15);
}

// Ulysses over the 4 ranks: each all-to-all of Q, K, V and the output sends 3/4 of c h e = 24
// bytes a tensor, 96 in all, 32 to each peer: to its node's one peer at 4e9 (8 ns) while to the
// two on the other node at 0.5e9 (128 ns), and 4 x 3 messages of 1 ns: 140 ns; the backward's
// four again: 280 ns. (Charged all at the network's rate it would be 12 + 192 = 204 ns.)
TEST(MeshCpTerm, UlyssesSplitsItsBytesByNodeByHand) {
  const sm::MeshBlock m = ring_block(suite::CpMethod::ulysses);
  EXPECT_NEAR(cp_term(m, 2, false).exposed, 140e-9, 1e-15);
  EXPECT_NEAR(cp_term(m, 2, true).exposed, 280e-9, 1e-15);
}
