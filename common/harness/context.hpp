// What a benchmark's cases get to work with: the parsed shared flags, resolved choices, and
// the device and transport of this rank.
#pragma once

#include <string>

#include "common/transport/comm.hpp"
#include "common/device/device.hpp"
#include "common/transport/mpi_env.hpp"
#include "common/harness/options.hpp"

namespace suite {

struct BenchContext {
  MpiSession& mpi;
  const CommonOptions& opts;
  std::string bench;
  Backend backend;
  DType dtype;
  Device& device;
  Comm& comm;
};

}  // namespace suite
