// What a benchmark's cases get to work with: the parsed shared flags, resolved choices, the
// device and transport of this rank, and the device meshes its groups come from.
#pragma once

#include <string>

#include "common/device/device.hpp"
#include "common/harness/options.hpp"
#include "common/transport/comm.hpp"
#include "common/transport/mpi_env.hpp"

namespace suite {

class DeviceMeshes;  // common/mesh/device_meshes.hpp

struct BenchContext {
  MpiSession& mpi;
  const CommonOptions& opts;
  std::string bench;
  Backend backend;
  DType dtype;
  Device& device;
  // This rank's group along the benchmark's own axis (BenchDefinition::mesh), else the job's.
  Comm& comm;
  DeviceMeshes& meshes;
};

}  // namespace suite
