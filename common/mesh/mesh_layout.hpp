// Where each rank sits on a training job's device mesh (METHODS.md sections 6 and 7): TP x CP x
// DP ranks for the dense part, and EP folded from CP x DP for the experts, in each of PP pipeline
// stages, laid out by an axis order listed inner to outer (the first axis varies fastest over
// consecutive ranks, so it lands inside a node). Pure arithmetic, no MPI: DeviceMesh
// (device_mesh.hpp) builds the communicators from it.
//
// PP splits the job into P stages of T C D ranks each, the same inside every stage: a rank's
// place along PP is its index among the P stages, and its place along the other axes is that of
// its rank with PP taken out (the ranks of the other axes listed inside pp vary fastest, those
// outside it slowest), so every TP, CP, EP and DP group lies in one stage.
//
// As Megatron's rank generator does it: the dense ranks are the order without ep (sizes T, C,
// D), the expert ranks the order without cp, with dp standing for the expert data-parallel axis
// of C D / E ranks (sizes T, E, C D / E). Every expert group must hold ranks of one TP index (the
// experts are not split by TP: each TP rank routes its own sequence shard), which puts ep next
// to cp and dp on the same side of tp; the layout refuses orders where it is not.
#pragma once

#include <array>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace suite {

enum class MeshAxis { tp, cp, ep, dp, pp };

const char* mesh_axis_name(MeshAxis a);

// An axis order: the four axes of a stage inner to outer, and pp's place among them (how many
// are listed inside it; 4, outermost, where the order does not name pp, as Megatron's
// tp,cp,ep,dp,pp has it).
struct MeshOrder {
  std::array<MeshAxis, 4> axes{MeshAxis::tp, MeshAxis::cp, MeshAxis::ep, MeshAxis::dp};
  int pp_at = 4;
};

struct MeshShape {
  int tp = 1, cp = 1, dp = 1;
  int ep = 0;  // 0: C D (every CP x DP rank of one TP index in one expert group)
  int pp = 1;
  std::array<MeshAxis, 4> order = MeshOrder{}.axes;
  int pp_at = 4;  // MeshOrder::pp_at
  void set_order(const MeshOrder& o) { order = o.axes, pp_at = o.pp_at; }
};

// "tp,cp,ep,dp,pp" -> the order: tp, cp and dp once each; ep at most once (unnamed: just inside
// dp, where its place among the others is Megatron's); pp at most once (unnamed: outermost).
// Throws UsageError naming --order for an axis named twice, unknown or missing.
MeshOrder parse_mesh_order_pp(const std::string& text);
// The four axes alone, for a caller without a PP axis (pp's place, if named, is dropped).
std::array<MeshAxis, 4> parse_mesh_order(const std::string& text);
std::string mesh_order_name(const std::array<MeshAxis, 4>& order);
// With pp where it is not outermost or where there are stages (pp > 1).
std::string mesh_order_name(const MeshShape& shape);
// --order for a benchmark that runs one order a job: throws UsageError naming `bench` where the
// text lists several (mesh sweeps them).
std::array<MeshAxis, 4> one_mesh_order(const std::string& text, const std::string& bench);
MeshOrder one_mesh_order_pp(const std::string& text, const std::string& bench);
// --order: axis orders separated by '/' (the mesh benchmark sweeps them, model's mesh section
// predicts each), declared once for both.
void add_mesh_order_flag(CLI::App& app, std::string& orders);

// A standalone method's mesh and the axis it runs on: groups of `degree` ranks along `axis`
// (tp, cp or ep; 0: the whole job), the rest of the job data-parallel, laid out by `order` (the
// default puts a group on consecutive ranks). Throws UsageError naming `flag` when degree does
// not divide the job.
struct AxisMesh {
  MeshShape shape;
  MeshAxis axis = MeshAxis::dp;
};
AxisMesh axis_mesh(MeshAxis axis, int degree, int world, const char* flag,
                   const std::array<MeshAxis, 4>& order = MeshShape{}.order);

class MeshLayout {
 public:
  // Throws UsageError (naming --tp, --cp, --dp, --pp, --ep or --order and the numbers) when
  // T C D P is not the world size, E does not divide C D, or the order splits an expert group over
  // TP ranks.
  MeshLayout(const MeshShape& shape, int world);

  int world() const { return world_; }
  int tp() const { return shape_.tp; }
  int cp() const { return shape_.cp; }
  int dp() const { return shape_.dp; }
  int ep() const { return shape_.ep; }
  int pp() const { return shape_.pp; }
  // Copies of each expert in a stage: T C D / E.
  int expert_copies() const { return stage_ranks_ / shape_.ep; }
  const MeshShape& shape() const { return shape_; }

  // A rank's index along an axis (ep: its place in its expert group; pp: its stage).
  int coord(MeshAxis a, int rank) const;
  // The ranks of `rank`'s group along an axis (tp, cp, dp: the dense mesh; ep: the expert
  // mesh; pp: the rank of each stage in its place), in the axis's index order (which is also
  // world-rank order).
  std::vector<int> group(MeshAxis a, int rank) const;
  // The ranks that hold the same dense weights as `rank` (its TP index in its stage), whose
  // gradients are summed: the C D ranks of DP x CP.
  std::vector<int> dense_replicas(int rank) const;
  // The ranks that hold the same experts as `rank` (its index in its expert group, in its
  // stage): the T C D / E copies.
  std::vector<int> expert_replicas(int rank) const;
  // A number naming `rank`'s group of that kind, the same for every member (an MPI split color).
  int group_color(MeshAxis a, int rank) const;
  int dense_replicas_color(int rank) const {
    return coord(MeshAxis::pp, rank) * shape_.tp + coord(MeshAxis::tp, rank);
  }
  int expert_replicas_color(int rank) const {
    return coord(MeshAxis::pp, rank) * shape_.ep + coord(MeshAxis::ep, rank);
  }
  // How many members of `rank`'s expert group share its node (nodes: consecutive world ranks
  // of ranks_per_node). Throws UsageError naming --dispatch hierarchical when the group is not
  // spread evenly over its nodes (its node and rail groups would not be grids).
  int ep_ranks_per_node(int rank, int ranks_per_node) const;

 private:
  // Rank strides of the dense (tp, cp, dp) and expert (tp, ep, edp) axes.
  struct Strides {
    int tp = 0, second = 0, third = 0;  // dense: cp, dp; expert: ep, edp
  };
  // Of the axes inside a stage, over a rank with PP taken out (stage_rank).
  int stride(MeshAxis a) const;
  int size(MeshAxis a) const;
  int stage_coord(MeshAxis a, int stage_rank) const;
  // A rank with PP taken out (0 .. T C D - 1), and back.
  int stage_rank(int rank) const;
  int rank_of(int stage_rank, int stage) const;

  MeshShape shape_;
  int world_ = 1;
  int stage_ranks_ = 1;  // T C D
  int pp_inner_ = 1;     // the ranks of the axes listed inside pp: pp's stride
  Strides dense_, expert_;
};

}  // namespace suite
