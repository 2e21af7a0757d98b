#include "bench/mesh/grad_sums.hpp"

#include <algorithm>

namespace suite::mesh {

void GradientSums::add(std::string phase, Comm& comm, std::vector<GradTensor> tensors,
                       bool at_once) {
  const std::size_t e = dtype_size(dtype_), g = groups_.size();
  groups_.push_back({std::move(phase), &comm, std::move(tensors), at_once});
  const std::vector<GradTensor>& ts = groups_.back().tensors;
  // Consecutive tensors until a bucket holds bucket_bytes_ (one bucket without a size).
  for (std::size_t i = 0; i < ts.size();) {
    Bucket b;
    b.group = g;
    b.first = i;
    while (i < ts.size() && (b.elems == 0 || bucket_bytes_ == 0 ||
                             static_cast<std::size_t>(b.elems) * e < bucket_bytes_))
      b.elems += ts[i++].elems;
    b.last = i;
    const std::size_t bytes = static_cast<std::size_t>(b.elems) * e;
    b.packed = device_.alloc(bytes);
    b.summed = device_.alloc(bytes);
    buckets_.push_back(std::move(b));
  }
}

void GradientSums::start(Bucket& b) {
  Group& g = groups_[b.group];
  const std::size_t e = dtype_size(dtype_);
  {
    std::size_t at = 0;
    for (std::size_t i = b.first; i < b.last; ++i) {
      const GradTensor& t = g.tensors[i];
      device_.copy_on_device(b.packed.as<std::byte>() + at, t.data, t.elems * e);
      at += t.elems * e;
    }
    const auto n = static_cast<std::size_t>(b.elems);
    if (bucket_bytes_ == 0 || g.at_once)
      g.comm->all_reduce(b.packed.data(), b.summed.data(), n, dtype_);
    else
      g.comm->start_all_reduce(b.packed.data(), b.summed.data(), n, dtype_);
  }
  b.started = true;
  if (g.at_once) unpack(b);
}

void GradientSums::unpack(Bucket& b) {
  const Group& g = groups_[b.group];
  const std::size_t e = dtype_size(dtype_);
  std::size_t at = 0;
  for (std::size_t i = b.first; i < b.last; ++i) {
    const GradTensor& t = g.tensors[i];
    device_.copy_on_device(t.data, b.summed.as<std::byte>() + at, t.elems * e);
    at += t.elems * e;
  }
}

void GradientSums::ready(const std::string& ready, PhaseTimer& phases) {
  if (bucket_bytes_ == 0) return;  // all after the backward
  for (Bucket& b : buckets_) {
    const Group& g = groups_[b.group];
    for (std::size_t i = b.first; i < b.last; ++i)
      if (g.tensors[i].ready == ready) ++b.ready;
    if (!b.started && b.ready == b.last - b.first)
      phases.time(g.at_once ? g.phase : std::string("grad_sum_start"), [&] { start(b); });
  }
}

void GradientSums::finish(PhaseTimer& phases) {
  for (std::size_t gi = 0; gi < groups_.size(); ++gi) {
    Group& g = groups_[gi];
    phases.time(g.phase, [&] {
      for (Bucket& b : buckets_)
        if (b.group == gi && !b.started) start(b);
      if (g.at_once) return;  // summed and unpacked when it started
      g.comm->finish_all_reduces();
      for (Bucket& b : buckets_)
        if (b.group == gi) unpack(b);
    });
  }
  for (Bucket& b : buckets_) {
    b.started = false;
    b.ready = 0;
  }
}

std::int64_t GradientSums::elems(const std::string& phase) const {
  std::int64_t n = 0;
  for (const Bucket& b : buckets_)
    if (groups_[b.group].phase == phase) n += b.elems;
  return n;
}

int GradientSums::buckets(const std::string& phase) const {
  return static_cast<int>(std::count_if(buckets_.begin(), buckets_.end(), [&](const Bucket& b) {
    return groups_[b.group].phase == phase;
  }));
}

}  // namespace suite::mesh
