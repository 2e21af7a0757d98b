// What a benchmark's cases get to work with: the parsed shared flags, resolved choices, and
// the device and transport of this rank.
#pragma once

#include <string>

#include "common/comm.hpp"
#include "common/device.hpp"
#include "common/mpi_env.hpp"
#include "common/options.hpp"

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
