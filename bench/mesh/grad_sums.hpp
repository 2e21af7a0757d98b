// The gradient sums of a data-parallel step (METHODS.md section 6): after the backward, each
// replicated weight's gradient is summed over the ranks that hold a copy of it. The dense
// weights over DP x CP, the experts over their copies, the weights replicated inside the TP group
// whose gradients are partial sums over its sequence shards (the router) over TP first. Each
// group's tensors are packed into one buffer and all-reduced in one call, as DDP's buckets are.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/comm.hpp"
#include "common/device.hpp"
#include "common/phase_timer.hpp"

namespace suite::mesh {

struct GradTensor {
  std::string name;
  void* data;  // on the device, summed in place
  std::int64_t elems;
};

class GradientSums {
 public:
  GradientSums(Device& device, DType dtype) : device_(device), dtype_(dtype) {}

  // A group of tensors summed over `comm`, in the order added; `phase` times its all-reduce.
  void add(std::string phase, Comm& comm, std::vector<GradTensor> tensors);
  // Every group's all-reduce, in the order added.
  void run(PhaseTimer& phases);
  // Elements summed by the group timed as `phase` (0 for none).
  std::int64_t elems(const std::string& phase) const;

 private:
  struct Group {
    std::string phase;
    Comm* comm;
    std::vector<GradTensor> tensors;
    std::int64_t elems = 0;
    Buffer packed, summed;
  };
  Device& device_;
  DType dtype_;
  std::vector<Group> groups_;
};

}  // namespace suite::mesh
