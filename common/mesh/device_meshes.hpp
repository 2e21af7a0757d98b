// The device meshes of a run: the benchmark's own (a standalone method is a mesh of its own
// axis: BenchDefinition::mesh), those its cases ask for by shape (ulysses' CP group sizes),
// made on first use and kept for the run, and one case's own (mesh's sweep of degrees and
// orders). The harness counts the bytes of every communicator they made.
#pragma once

#include <memory>
#include <vector>

#include "common/mesh/device_mesh.hpp"

namespace suite {

class DeviceMeshes {
 public:
  // world: the job's communicator, which every mesh's groups are split from.
  DeviceMeshes(Device& device, const Comm& world) : device_(device), world_(world) {}

  // The mesh of `shape` (made now if new; throws UsageError for a shape the job cannot hold).
  DeviceMesh& get(const MeshShape& shape);
  // The benchmark's own mesh, set once by the harness; throws std::logic_error when the
  // benchmark declares none.
  void set_own(const MeshShape& shape) { own_ = &get(shape); }
  DeviceMesh& own();
  // A mesh for the running case alone, dropped when it ends (a sweep of shapes and orders would
  // otherwise keep every shape's communicators, NCCL's buffers with them, to the end).
  DeviceMesh& case_mesh(const MeshShape& shape);

  // Every communicator of every mesh.
  std::vector<const Comm*> comms() const;
  // Drops what the case that just ended made for itself (case_mesh, DeviceMesh::case_group).
  void end_case();

 private:
  Device& device_;
  const Comm& world_;
  std::vector<std::unique_ptr<DeviceMesh>> meshes_;
  DeviceMesh* own_ = nullptr;
  std::unique_ptr<DeviceMesh> case_mesh_;
};

}  // namespace suite
