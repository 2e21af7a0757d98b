#include "bench/mesh/grad_sums.hpp"

namespace suite::mesh {

void GradientSums::add(std::string phase, Comm& comm, std::vector<GradTensor> tensors) {
  Group g{std::move(phase), &comm, std::move(tensors)};
  for (const GradTensor& t : g.tensors)
    g.elems += t.elems;
  const std::size_t bytes = static_cast<std::size_t>(g.elems) * dtype_size(dtype_);
  g.packed = device_.alloc(bytes);
  g.summed = device_.alloc(bytes);
  groups_.push_back(std::move(g));
}

void GradientSums::run(PhaseTimer& phases) {
  const std::size_t e = dtype_size(dtype_);
  for (Group& g : groups_)
    phases.time(g.phase, [&] {
      std::size_t at = 0;
      for (const GradTensor& t : g.tensors) {
        device_.copy_on_device(g.packed.as<std::byte>() + at, t.data, t.elems * e);
        at += t.elems * e;
      }
      g.comm->all_reduce(g.packed.data(), g.summed.data(), static_cast<std::size_t>(g.elems),
                         dtype_);
      at = 0;
      for (const GradTensor& t : g.tensors) {
        device_.copy_on_device(t.data, g.summed.as<std::byte>() + at, t.elems * e);
        at += t.elems * e;
      }
    });
}

std::int64_t GradientSums::elems(const std::string& phase) const {
  for (const Group& g : groups_)
    if (g.phase == phase) return g.elems;
  return 0;
}

}  // namespace suite::mesh
