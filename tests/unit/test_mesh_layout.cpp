// The device mesh's rank layout against groups counted by hand (Megatron's rank order
// tp-cp-ep-dp and others), and the orders and degrees it must refuse.
#include <gtest/gtest.h>

#include <set>

#include "common/harness/errors.hpp"
#include "common/mesh/mesh_layout.hpp"

namespace suite {
namespace {

using V = std::vector<int>;

MeshShape shape(int tp, int cp, int dp, int ep, const char* order = "tp,cp,ep,dp") {
  MeshShape s;
  s.tp = tp;
  s.cp = cp;
  s.dp = dp;
  s.ep = ep;
  s.order = parse_mesh_order(order);
  return s;
}

// 8 ranks, T = C = D = 2, Megatron's order: rank = tp + 2 (cp + 2 dp).
TEST(MeshLayout, MegatronOrderGroupsByHand) {
  const MeshLayout m(shape(2, 2, 2, 0), 8);
  EXPECT_EQ(m.ep(), 4);  // default: C D
  EXPECT_EQ(m.group(MeshAxis::tp, 0), (V{0, 1}));
  EXPECT_EQ(m.group(MeshAxis::tp, 5), (V{4, 5}));
  EXPECT_EQ(m.group(MeshAxis::cp, 0), (V{0, 2}));
  EXPECT_EQ(m.group(MeshAxis::cp, 5), (V{5, 7}));
  EXPECT_EQ(m.group(MeshAxis::dp, 0), (V{0, 4}));
  EXPECT_EQ(m.group(MeshAxis::dp, 3), (V{3, 7}));
  EXPECT_EQ(m.group(MeshAxis::ep, 0), (V{0, 2, 4, 6}));
  EXPECT_EQ(m.group(MeshAxis::ep, 7), (V{1, 3, 5, 7}));
  EXPECT_EQ(m.dense_replicas(2), (V{0, 2, 4, 6}));
  EXPECT_EQ(m.expert_replicas(0), (V{0, 1}));  // T C D / E = 2 copies: both TP ranks
  EXPECT_EQ(m.expert_copies(), 2);
  EXPECT_EQ(m.coord(MeshAxis::tp, 5), 1);
  EXPECT_EQ(m.coord(MeshAxis::cp, 5), 0);
  EXPECT_EQ(m.coord(MeshAxis::dp, 5), 1);
  EXPECT_EQ(m.coord(MeshAxis::ep, 5), 2);
}

// EP 2 inside C D = 4: the expert groups fold CP first (ep listed after cp), as Megatron's
// expert ranks tp-ep-dp do.
TEST(MeshLayout, ExpertGroupsFoldTheAxisListedBeforeEp) {
  const MeshLayout m(shape(2, 2, 2, 2), 8);
  EXPECT_EQ(m.group(MeshAxis::ep, 0), (V{0, 2}));  // = its CP group
  EXPECT_EQ(m.group(MeshAxis::ep, 4), (V{4, 6}));
  EXPECT_EQ(m.group(MeshAxis::ep, 3), (V{1, 3}));
  EXPECT_EQ(m.expert_replicas(0), (V{0, 1, 4, 5}));  // ep index 0 in every group
  // DP innermost of the two: rank = tp + 2 (dp + 2 cp); the expert ranks tp, edp, ep.
  const MeshLayout d(shape(2, 2, 2, 2, "tp,dp,ep,cp"), 8);
  EXPECT_EQ(d.group(MeshAxis::dp, 0), (V{0, 2}));
  EXPECT_EQ(d.group(MeshAxis::cp, 0), (V{0, 4}));
  EXPECT_EQ(d.group(MeshAxis::ep, 0), (V{0, 4}));
  EXPECT_EQ(d.group(MeshAxis::ep, 3), (V{3, 7}));
}

// TP outermost: tp varies slowest, CP fastest (a mesh that puts CP inside the node).
TEST(MeshLayout, TpOutermost) {
  const MeshLayout m(shape(2, 4, 1, 0, "cp,ep,dp,tp"), 8);
  EXPECT_EQ(m.group(MeshAxis::tp, 1), (V{1, 5}));
  EXPECT_EQ(m.group(MeshAxis::cp, 5), (V{4, 5, 6, 7}));
  EXPECT_EQ(m.group(MeshAxis::ep, 5), (V{4, 5, 6, 7}));
  EXPECT_EQ(m.dense_replicas(6), (V{4, 5, 6, 7}));
}

TEST(MeshLayout, GroupsPartitionTheRanks) {
  for (const char* order : {"tp,cp,ep,dp", "tp,dp,ep,cp", "cp,ep,dp,tp", "dp,ep,cp,tp"})
    for (int tp : {1, 2})
      for (int cp : {1, 2, 4})
        for (int ep : {0, 1, 2}) {
          const int dp = 2, world = tp * cp * dp;
          const MeshLayout m(shape(tp, cp, dp, ep, order), world);
          for (MeshAxis a : {MeshAxis::tp, MeshAxis::cp, MeshAxis::ep, MeshAxis::dp}) {
            std::set<V> groups;
            for (int r = 0; r < world; ++r) {
              const V g = m.group(a, r);
              EXPECT_EQ(g[static_cast<std::size_t>(m.coord(a, r))], r) << order;
              groups.insert(g);
            }
            std::multiset<int> members;
            for (const V& g : groups)
              members.insert(g.begin(), g.end());
            EXPECT_EQ(static_cast<int>(members.size()), world) << order << " " << mesh_axis_name(a);
            EXPECT_EQ(static_cast<int>(std::set<int>(members.begin(), members.end()).size()), world)
                << order << " " << mesh_axis_name(a);
          }
        }
}

TEST(MeshLayout, RefusesWhatCannotBeAMesh) {
  EXPECT_THROW(MeshLayout(shape(2, 2, 1, 0), 8), UsageError);  // 4 ranks of 8
  EXPECT_THROW(MeshLayout(shape(1, 2, 3, 4), 6), UsageError);  // E does not divide C D
  EXPECT_THROW(MeshLayout(shape(0, 2, 2, 0), 0), UsageError);
  // The expert ranks ep, tp, edp would put ranks 0 and 1 (TP 0 and 1) in one expert group.
  EXPECT_THROW(MeshLayout(shape(2, 2, 1, 2, "ep,tp,cp,dp"), 4), UsageError);
  try {
    MeshLayout(shape(2, 2, 1, 0), 8);
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--tp 2 x --cp 2 x --dp 1 = 4"), std::string::npos)
        << e.what();
  }
}

TEST(MeshLayout, StandaloneAxisMeshIsConsecutiveGroups) {
  // sp_tp --tp 2 on 8 ranks: TP groups of 2 consecutive ranks.
  const AxisMesh tp = axis_mesh(MeshAxis::tp, 2, 8, "--tp");
  EXPECT_EQ(tp.axis, MeshAxis::tp);
  EXPECT_EQ(MeshLayout(tp.shape, 8).group(MeshAxis::tp, 5), (V{4, 5}));
  // ring_attention --cp 0: one CP group of the whole job.
  EXPECT_EQ(MeshLayout(axis_mesh(MeshAxis::cp, 0, 4, "--cp").shape, 4).group(MeshAxis::cp, 3),
            (V{0, 1, 2, 3}));
  // moe --ep 4 on 8 ranks: expert groups of 4 consecutive ranks.
  const MeshLayout ep(axis_mesh(MeshAxis::ep, 4, 8, "--ep").shape, 8);
  EXPECT_EQ(ep.group(MeshAxis::ep, 6), (V{4, 5, 6, 7}));
  try {
    axis_mesh(MeshAxis::tp, 3, 4, "--tp");
    ADD_FAILURE() << "--tp 3 of 4 ranks accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--tp 3 must be a positive divisor of the job's 4"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(axis_mesh(MeshAxis::ep, -1, 4, "--ep"), UsageError);
}

// Hierarchical dispatch: the expert group's members on this rank's node.
TEST(MeshLayout, ExpertGroupMembersPerNode) {
  // Megatron's order, T = C = D = 2: expert groups {0, 2, 4, 6} and {1, 3, 5, 7}.
  const MeshLayout m(shape(2, 2, 2, 0), 8);
  EXPECT_EQ(m.ep_ranks_per_node(0, 4), 2);  // nodes {0..3}, {4..7}: 0 and 2 share one
  EXPECT_EQ(m.ep_ranks_per_node(7, 8), 4);
  EXPECT_EQ(m.ep_ranks_per_node(3, 2), 1);
  // Nodes of 3 ranks put 0 and 2 on node 0, 4 alone on node 1: not a grid.
  EXPECT_THROW(m.ep_ranks_per_node(0, 3), UsageError);
}

TEST(MeshLayout, OrderFlag) {
  EXPECT_EQ(mesh_order_name(parse_mesh_order("dp,ep,cp,tp")), "dp,ep,cp,tp");
  EXPECT_THROW(parse_mesh_order("tp,cp,ep"), UsageError);
  EXPECT_THROW(parse_mesh_order("tp,cp,ep,tp"), UsageError);
  EXPECT_THROW(parse_mesh_order("tp,cp,ep,pp"), UsageError);  // dp missing
  EXPECT_THROW(parse_mesh_order("tp,cp,ep,xx,dp"), UsageError);
  EXPECT_THROW(parse_mesh_order("tp,cp,pp,pp,dp"), UsageError);
}

MeshShape pp_shape(int tp, int cp, int dp, int pp, const char* order, int ep = 0) {
  MeshShape s;
  s.tp = tp, s.cp = cp, s.dp = dp, s.pp = pp, s.ep = ep;
  s.set_order(parse_mesh_order_pp(order));
  return s;
}

TEST(MeshLayout, PpOrderFlag) {
  // ep unnamed goes just inside dp, pp unnamed outermost.
  const MeshOrder seed = parse_mesh_order_pp("tp,cp,pp,dp");
  EXPECT_EQ(mesh_order_name(seed.axes), "tp,cp,ep,dp");
  EXPECT_EQ(seed.pp_at, 2);
  EXPECT_EQ(parse_mesh_order_pp("tp,cp,ep,dp,pp").pp_at, 4);
  EXPECT_EQ(parse_mesh_order_pp("tp,cp,ep,dp").pp_at, 4);
  EXPECT_EQ(parse_mesh_order_pp("pp,tp,cp,dp").pp_at, 0);
  EXPECT_EQ(mesh_order_name(pp_shape(1, 1, 2, 2, "tp,cp,pp,dp")), "tp,cp,pp,ep,dp");
  EXPECT_EQ(mesh_order_name(pp_shape(1, 1, 4, 1, "tp,cp,ep,dp,pp")), "tp,cp,ep,dp");
}

// Megatron's order with pp outermost, 8 ranks, T = C = P = 2: rank = tp + 2 cp + 4 pp.
TEST(MeshLayout, PpOutermostByHand) {
  const MeshLayout m(pp_shape(2, 2, 1, 2, "tp,cp,ep,dp,pp"), 8);
  EXPECT_EQ(m.group(MeshAxis::pp, 0), (V{0, 4}));
  EXPECT_EQ(m.group(MeshAxis::pp, 7), (V{3, 7}));
  EXPECT_EQ(m.group(MeshAxis::tp, 5), (V{4, 5}));
  EXPECT_EQ(m.group(MeshAxis::cp, 5), (V{5, 7}));
  EXPECT_EQ(m.coord(MeshAxis::pp, 5), 1);
  EXPECT_EQ(m.dense_replicas(5), (V{5, 7}));   // its TP index in its own stage
  EXPECT_EQ(m.expert_replicas(5), (V{4, 5}));  // T C D / E = 2 copies in its stage
  EXPECT_EQ(m.expert_copies(), 2);
}

// The seed's order, 16 ranks, T = C = P = D = 2: rank = tp + 2 cp + 4 pp + 8 dp.
TEST(MeshLayout, SeedOrderByHand) {
  const MeshLayout m(pp_shape(2, 2, 2, 2, "tp,cp,pp,dp"), 16);
  EXPECT_EQ(m.group(MeshAxis::pp, 0), (V{0, 4}));
  EXPECT_EQ(m.group(MeshAxis::pp, 13), (V{9, 13}));
  EXPECT_EQ(m.group(MeshAxis::dp, 0), (V{0, 8}));
  EXPECT_EQ(m.group(MeshAxis::cp, 13), (V{13, 15}));
  EXPECT_EQ(m.group(MeshAxis::ep, 0), (V{0, 2, 8, 10}));
  EXPECT_EQ(m.coord(MeshAxis::tp, 13), 1);
  EXPECT_EQ(m.coord(MeshAxis::cp, 13), 0);
  EXPECT_EQ(m.coord(MeshAxis::pp, 13), 1);
  EXPECT_EQ(m.coord(MeshAxis::dp, 13), 1);
  EXPECT_EQ(m.dense_replicas(0), (V{0, 2, 8, 10}));
  EXPECT_EQ(m.dense_replicas(13), (V{5, 7, 13, 15}));
  EXPECT_NE(m.group_color(MeshAxis::pp, 0), m.group_color(MeshAxis::pp, 1));
  EXPECT_NE(m.dense_replicas_color(0), m.dense_replicas_color(4));
}

// pp innermost: a pipeline's hops between consecutive ranks, 4 ranks, T = P = 2.
TEST(MeshLayout, PpInnermostByHand) {
  const MeshLayout m(pp_shape(2, 1, 1, 2, "pp,tp,cp,dp"), 4);
  EXPECT_EQ(m.group(MeshAxis::pp, 0), (V{0, 1}));
  EXPECT_EQ(m.group(MeshAxis::tp, 0), (V{0, 2}));
  EXPECT_EQ(m.group(MeshAxis::tp, 3), (V{1, 3}));
  EXPECT_THROW(MeshLayout(pp_shape(2, 1, 1, 2, "pp,tp,cp,dp"), 8), UsageError);
}

}  // namespace
}  // namespace suite
