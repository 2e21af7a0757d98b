#include "common/mesh/device_meshes.hpp"

#include <stdexcept>

namespace suite {

DeviceMesh& DeviceMeshes::get(const MeshShape& shape) {
  const MeshShape want = MeshLayout(shape, world_.size()).shape();  // ep 0 resolved
  for (const auto& m : meshes_) {
    const MeshShape& have = m->layout().shape();
    if (have.tp == want.tp && have.cp == want.cp && have.dp == want.dp && have.ep == want.ep &&
        have.pp == want.pp && have.order == want.order && have.pp_at == want.pp_at)
      return *m;
  }
  meshes_.push_back(std::make_unique<DeviceMesh>(device_, world_, want));
  return *meshes_.back();
}

DeviceMesh& DeviceMeshes::case_mesh(const MeshShape& shape) {
  case_mesh_ = std::make_unique<DeviceMesh>(device_, world_, shape);
  return *case_mesh_;
}

DeviceMesh& DeviceMeshes::own() {
  if (!own_) throw std::logic_error("this benchmark declares no mesh (BenchDefinition::mesh)");
  return *own_;
}

std::vector<const Comm*> DeviceMeshes::comms() const {
  std::vector<const Comm*> all;
  auto add = [&](const DeviceMesh& m) {
    const std::vector<const Comm*> of = m.comms();
    all.insert(all.end(), of.begin(), of.end());
  };
  for (const auto& m : meshes_)
    add(*m);
  if (case_mesh_) add(*case_mesh_);
  return all;
}

void DeviceMeshes::end_case() {
  for (const auto& m : meshes_)
    m->drop_case_groups();
  case_mesh_.reset();
}

}  // namespace suite
