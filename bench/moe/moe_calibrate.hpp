// F and W of METHODS.md's ratio (F/W)((N_e-1)/N_e)/d_ff, measured in the same run as the case
// (during its set-up, untimed): F the FLOP rate of one expert's first GEMM at the uniform
// load, W the bytes per second each rank sends in a uniform all-to-all of the uniform
// dispatch size. The ratio predicted from them sits beside the measured one.
#pragma once

#include "bench/moe/moe_config.hpp"
#include "bench/moe/moe_ops.hpp"
#include "common/transport/comm.hpp"

namespace suite::moe {

struct Rates {
  double flops_per_s = 0;  // F
  double bytes_per_s = 0;  // W (0 when the group has one rank: nothing crosses a link)
};

// Buffers the all-to-all may run on instead of its own (modeled compute: the layer's, which it
// keeps anyway, so that the run maps no extra placeholders); used when bytes suffice.
struct ExchangeBuffers {
  void* send = nullptr;
  void* recv = nullptr;
  std::size_t bytes = 0;
};

// Collective over the group (the all-to-all); the median of a few timed repetitions. Modeled
// compute (common/sim/sim.hpp): the GEMM runs on no buffers (it reads none), and its time and the
// all-to-all's are the simulator's, the same every repetition: one each, no warm-up.
Rates calibrate_rates(const MoeConfig& c, Device& device, Comm& group, MoeOps& ops,
                      const ExchangeBuffers& lend = {});

}  // namespace suite::moe
