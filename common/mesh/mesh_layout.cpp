#include "common/mesh/mesh_layout.hpp"

#include <algorithm>

#include <CLI/CLI.hpp>

#include "common/harness/errors.hpp"
#include "common/harness/size_list.hpp"

namespace suite {

const char* mesh_axis_name(MeshAxis a) {
  switch (a) {
    case MeshAxis::tp:
      return "tp";
    case MeshAxis::cp:
      return "cp";
    case MeshAxis::ep:
      return "ep";
    case MeshAxis::dp:
      return "dp";
    case MeshAxis::pp:
      return "pp";
  }
  return "?";
}

void add_mesh_order_flag(CLI::App& app, std::string& orders) {
  app.add_option(
         "--order", orders,
         "axis orders, inner to outer, separated by '/': each lists tp, cp, dp once, ep and pp "
         "at most once (the first varies fastest over consecutive ranks, so it lands "
         "inside a node); Megatron's default tp,cp,ep,dp,pp, the seed's tp,cp,pp,dp; ep "
         "goes next to cp and dp (its groups fold them; unnamed: just inside dp); pp "
         "unnamed: outermost")
      ->capture_default_str();
}

MeshOrder parse_mesh_order_pp(const std::string& text) {
  const std::vector<std::string> names = split_list(text);
  const std::string usage =
      " (list tp, cp and dp once each, ep and pp at most once, inner to outer, e.g. tp,cp,ep,dp,pp "
      "or tp,cp,pp,dp)";
  std::vector<MeshAxis> listed;
  for (const std::string& n : names) {
    MeshAxis a{};
    if (n == "tp")
      a = MeshAxis::tp;
    else if (n == "cp")
      a = MeshAxis::cp;
    else if (n == "ep")
      a = MeshAxis::ep;
    else if (n == "dp")
      a = MeshAxis::dp;
    else if (n == "pp")
      a = MeshAxis::pp;
    else
      throw UsageError("--order " + text + ": unknown axis '" + n + "'" + usage);
    if (std::find(listed.begin(), listed.end(), a) != listed.end())
      throw UsageError("--order " + text + ": " + n + " is named twice" + usage);
    listed.push_back(a);
  }
  for (MeshAxis a : {MeshAxis::tp, MeshAxis::cp, MeshAxis::dp})
    if (std::find(listed.begin(), listed.end(), a) == listed.end())
      throw UsageError("--order " + text + ": " + mesh_axis_name(a) + " is missing" + usage);
  if (std::find(listed.begin(), listed.end(), MeshAxis::ep) == listed.end())
    listed.insert(std::find(listed.begin(), listed.end(), MeshAxis::dp), MeshAxis::ep);
  MeshOrder order;
  const auto pp = std::find(listed.begin(), listed.end(), MeshAxis::pp);
  order.pp_at = static_cast<int>(pp - listed.begin());
  if (pp != listed.end()) listed.erase(pp);
  std::copy(listed.begin(), listed.end(), order.axes.begin());
  return order;
}

std::array<MeshAxis, 4> parse_mesh_order(const std::string& text) {
  return parse_mesh_order_pp(text).axes;
}

std::string mesh_order_name(const std::array<MeshAxis, 4>& order) {
  std::string s;
  for (MeshAxis a : order)
    s += (s.empty() ? "" : ",") + std::string(mesh_axis_name(a));
  return s;
}

std::string mesh_order_name(const MeshShape& shape) {
  if (shape.pp == 1 && shape.pp_at >= 4) return mesh_order_name(shape.order);
  std::string s;
  for (int i = 0; i <= 4; ++i) {
    if (i == shape.pp_at) s += (s.empty() ? "" : ",") + std::string("pp");
    if (i < 4) s += (s.empty() ? "" : ",") + std::string(mesh_axis_name(shape.order[i]));
  }
  return s;
}

MeshOrder one_mesh_order_pp(const std::string& text, const std::string& bench) {
  if (text.find('/') != std::string::npos)
    throw UsageError("--order " + text + ": " + bench +
                     " runs one order a job (mesh sweeps several): give one, e.g. tp,cp,ep,dp");
  return parse_mesh_order_pp(text);
}

std::array<MeshAxis, 4> one_mesh_order(const std::string& text, const std::string& bench) {
  return one_mesh_order_pp(text, bench).axes;
}

AxisMesh axis_mesh(MeshAxis axis, int degree, int world, const char* flag,
                   const std::array<MeshAxis, 4>& order) {
  if (degree < 0 || (degree > 0 && world % degree != 0))
    throw UsageError(std::string(flag) + " " + std::to_string(degree) +
                     " must be a positive divisor of the job's " + std::to_string(world) +
                     " ranks (0 = all ranks)");
  const int size = degree == 0 ? world : degree;
  AxisMesh m{{}, axis};
  m.shape.order = order;
  m.shape.dp = world / size;
  if (axis == MeshAxis::tp) m.shape.tp = size;
  if (axis == MeshAxis::cp) m.shape.cp = size;
  m.shape.ep = 1;
  if (axis == MeshAxis::ep) {  // the expert groups fold the data-parallel ranks
    m.shape.dp = world;
    m.shape.ep = size;
  }
  return m;
}

MeshLayout::MeshLayout(const MeshShape& shape, int world) : shape_(shape), world_(world) {
  auto n = [](int v) { return std::to_string(v); };
  if (shape.tp < 1 || shape.cp < 1 || shape.dp < 1 || shape.ep < 0 || shape.pp < 1)
    throw UsageError("--tp " + n(shape.tp) + ", --cp " + n(shape.cp) + ", --dp " + n(shape.dp) +
                     ", --ep " + n(shape.ep) + ", --pp " + n(shape.pp) +
                     ": degrees must be >= 1 (--ep 0: C D)");
  const long long ranks = static_cast<long long>(shape.tp) * shape.cp * shape.dp * shape.pp;
  if (ranks != world)
    throw UsageError("--tp " + n(shape.tp) + " x --cp " + n(shape.cp) + " x --dp " + n(shape.dp) +
                     (shape.pp > 1 ? " x --pp " + n(shape.pp) : std::string()) + " = " +
                     std::to_string(ranks) + " ranks, but the job has " + n(world));
  stage_ranks_ = world / shape.pp;
  const int cd = shape.cp * shape.dp;
  if (shape_.ep == 0) shape_.ep = cd;
  if (cd % shape_.ep != 0)
    throw UsageError("--ep " + n(shape_.ep) + " must divide C D = " + n(shape.cp) + " x " +
                     n(shape.dp) + " = " + n(cd) +
                     " (an expert group holds ranks of one TP index)");
  // Strides: each axis's is the product of the sizes listed before it in its decomposition.
  int dense = 1, expert = 1;
  for (int i = 0; i < 4; ++i) {
    const MeshAxis a = shape_.order[static_cast<std::size_t>(i)];
    if (i == shape_.pp_at) pp_inner_ = dense;
    if (a != MeshAxis::ep) {
      const int s = a == MeshAxis::tp ? shape_.tp : a == MeshAxis::cp ? shape_.cp : shape_.dp;
      (a == MeshAxis::tp ? dense_.tp : a == MeshAxis::cp ? dense_.second : dense_.third) = dense;
      dense *= s;
    }
    if (a != MeshAxis::cp) {
      const int s = a == MeshAxis::tp ? shape_.tp : a == MeshAxis::ep ? shape_.ep : cd / shape_.ep;
      (a == MeshAxis::tp   ? expert_.tp
       : a == MeshAxis::ep ? expert_.second
                           : expert_.third) = expert;
      expert *= s;
    }
  }
  if (shape_.pp_at >= 4) pp_inner_ = dense;
  for (int r = 0; r < stage_ranks_; ++r)
    if (r / dense_.tp % shape_.tp != r / expert_.tp % shape_.tp)
      throw UsageError(
          "--order " + mesh_order_name(shape_.order) +
          ": an expert group would hold ranks of different TP indices (with T = " + n(shape_.tp) +
          "); list ep next to cp and dp, on the same side of tp " + "(e.g. tp,cp,ep,dp)");
}

int MeshLayout::stage_rank(int rank) const {
  return rank / (pp_inner_ * shape_.pp) * pp_inner_ + rank % pp_inner_;
}

int MeshLayout::rank_of(int stage_rank, int stage) const {
  return stage_rank / pp_inner_ * pp_inner_ * shape_.pp + stage * pp_inner_ +
         stage_rank % pp_inner_;
}

int MeshLayout::stride(MeshAxis a) const {
  switch (a) {
    case MeshAxis::tp:
      return dense_.tp;
    case MeshAxis::cp:
      return dense_.second;
    case MeshAxis::dp:
      return dense_.third;
    case MeshAxis::ep:
      return expert_.second;
    case MeshAxis::pp:
      break;
  }
  return 1;
}

int MeshLayout::size(MeshAxis a) const {
  switch (a) {
    case MeshAxis::tp:
      return shape_.tp;
    case MeshAxis::cp:
      return shape_.cp;
    case MeshAxis::dp:
      return shape_.dp;
    case MeshAxis::ep:
      return shape_.ep;
    case MeshAxis::pp:
      return shape_.pp;
  }
  return 1;
}

int MeshLayout::stage_coord(MeshAxis a, int stage_rank) const {
  return stage_rank / stride(a) % size(a);
}

int MeshLayout::coord(MeshAxis a, int rank) const {
  if (a == MeshAxis::pp) return rank / pp_inner_ % shape_.pp;
  return stage_coord(a, stage_rank(rank));
}

std::vector<int> MeshLayout::group(MeshAxis a, int rank) const {
  std::vector<int> ranks;
  const int in_stage = stage_rank(rank), stage = coord(MeshAxis::pp, rank);
  if (a == MeshAxis::pp) {
    for (int i = 0; i < shape_.pp; ++i)
      ranks.push_back(rank_of(in_stage, i));
    return ranks;
  }
  const int base = in_stage - stage_coord(a, in_stage) * stride(a);
  for (int i = 0; i < size(a); ++i)
    ranks.push_back(rank_of(base + i * stride(a), stage));
  return ranks;
}

int MeshLayout::group_color(MeshAxis a, int rank) const {
  return group(a, rank).front();  // the group's first rank
}

int MeshLayout::ep_ranks_per_node(int rank, int ranks_per_node) const {
  const std::vector<int> members = group(MeshAxis::ep, rank);
  const int my_node = rank / ranks_per_node;
  int per_node = 0;
  for (int r : members)
    per_node += r / ranks_per_node == my_node ? 1 : 0;
  for (std::size_t i = 0; i < members.size(); ++i)
    if (members[i] / ranks_per_node !=
        members[i - i % static_cast<std::size_t>(per_node)] / ranks_per_node)
      throw UsageError(
          "--dispatch hierarchical: the expert group's ranks are not spread evenly "
          "over nodes of --ranks-per-node " +
          std::to_string(ranks_per_node) + " (" + std::to_string(per_node) +
          " on this rank's node)");
  return per_node;
}

std::vector<int> MeshLayout::dense_replicas(int rank) const {
  std::vector<int> ranks;
  for (int r = 0; r < world_; ++r)
    if (dense_replicas_color(r) == dense_replicas_color(rank)) ranks.push_back(r);
  return ranks;
}

std::vector<int> MeshLayout::expert_replicas(int rank) const {
  std::vector<int> ranks;
  for (int r = 0; r < world_; ++r)
    if (expert_replicas_color(r) == expert_replicas_color(rank)) ranks.push_back(r);
  return ranks;
}

}  // namespace suite
