// The gradient sums of a data-parallel step (METHODS.md section 6): each replicated weight's
// gradient summed over the ranks that hold a copy of it. The dense weights over DP x CP, the
// experts over their copies, the weights replicated inside the TP group whose gradients are
// partial sums over its sequence shards (the router) over TP first. A group's tensors are packed
// into buckets and each bucket all-reduced in one call, as DDP's and Megatron's are: with no
// bucket size, one bucket per group after the backward; with one, buckets of about that many
// bytes, each started (nonblocking) as soon as the backward has made all its gradients, so its
// sum moves while the rest of the backward computes; what is left is waited for at the end.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/device/device.hpp"
#include "common/harness/phase_timer.hpp"
#include "common/transport/comm.hpp"

namespace suite::mesh {

struct GradTensor {
  std::string name;
  void* data;  // on the device, summed in place
  std::int64_t elems;
  std::string ready;  // the backward's name for the moment it is final (layer_parts.hpp)
};

class GradientSums {
 public:
  // bucket_bytes 0: each group summed after the backward in one all-reduce.
  GradientSums(Device& device, DType dtype, std::size_t bucket_bytes)
      : device_(device), dtype_(dtype), bucket_bytes_(bucket_bytes) {}

  // A group of tensors summed over `comm`, in the order the backward makes them; `phase` times
  // its wait. at_once: its sum completes when it starts (a later group reads its tensors: the
  // router's TP sum before the dense one).
  void add(std::string phase, Comm& comm, std::vector<GradTensor> tensors, bool at_once = false);
  // The backward's notice that the gradients named `ready` are final: every bucket whose
  // tensors all are starts (phase grad_sum_start: packing and the start; an at_once group's
  // whole sum in its own phase).
  void ready(const std::string& ready, PhaseTimer& phases);
  // After the backward: the buckets not started yet, then every wait and the unpacking.
  void finish(PhaseTimer& phases);
  // Elements summed by the group timed as `phase`, and its buckets (0 for none).
  std::int64_t elems(const std::string& phase) const;
  int buckets(const std::string& phase) const;
  bool bucketed() const { return bucket_bytes_ > 0; }

 private:
  struct Bucket {
    std::size_t group = 0, first = 0, last = 0;  // tensors [first, last) of the group
    std::int64_t elems = 0;
    std::size_t ready = 0;
    bool started = false;
    Buffer packed, summed;
  };
  struct Group {
    std::string phase;
    Comm* comm;
    std::vector<GradTensor> tensors;
    bool at_once = false;
  };
  void start(Bucket& b);
  void unpack(Bucket& b);
  Device& device_;
  DType dtype_;
  std::size_t bucket_bytes_ = 0;
  std::vector<Group> groups_;
  std::vector<Bucket> buckets_;
};

}  // namespace suite::mesh
