// One ring-attention benchmark case (RingConfig): the method's step as the harness times it
// (the forward, or with --pass fwd_bwd the forward then the backward, each a phase), then the
// same schedule compute only and transfer only for each pass, the ideal (one rank's full
// attention) and the checks against full attention on the host.
#pragma once

#include <memory>

#include "bench/ring_attention/ring_config.hpp"
#include "common/harness/bench_case.hpp"
#include "common/harness/context.hpp"
#include "kernels/attention/attention_engine.hpp"

namespace suite::ring {

std::unique_ptr<BenchCase> make_ring_case(BenchContext& ctx, const RingConfig& cfg,
                                          kernels::AttnKernelChoice choice);

}  // namespace suite::ring
