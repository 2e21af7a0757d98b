// MeshCase's memory per rank beside METHODS.md 6's formulas.
#include "bench/mesh/mesh_case_impl.hpp"
#include "common/transport/rank_gather.hpp"

namespace suite::mesh {

void MeshCase::report_memory(CaseRecord& rec, const model::MeshBlock& mb) {
  auto& a = rec.attrs;
  sp_tp::TransformerLayer& layer = block_->layer();
  const double e = static_cast<double>(dtype_size(cfg_.dtype));
  double weights = 0;
  for (const auto& s : layer.slices())
    weights += static_cast<double>(s.elems()) * e;
  if (MoeFfn* moe = block_->moe()) {
    const moe::MoeConfig mc = cfg_.moe_layer();
    weights += static_cast<double>(cfg_.h * cfg_.experts) * e +
               moe->layer().slots() * static_cast<double>(mc.h * mc.w1_cols() + mc.d_ff * mc.h) * e;
  }
  a.emplace_back("ledger_bytes", static_cast<double>(block_->ledger_bytes()));
  a.emplace_back("pred_ledger_bytes", model::mesh_ledger_bytes(mb));
  a.emplace_back("weight_bytes", weights);
  a.emplace_back("pred_weight_bytes",
                 (model::mesh_dense_params(mb) + model::mesh_expert_params(mb)) * e);
  a.emplace_back("grad_bytes", cfg_.backward() ? weights : 0.0);
  a.emplace_back("cp_method_bytes", static_cast<double>(block_->cp_method_bytes()));
  const AllocationCounters alloc = ctx_.device.allocation_counters();
  a.emplace_back("device_peak_bytes",
                 static_cast<double>(all_reduce_max(static_cast<double>(alloc.peak))));
  // Per rank (rows: ledger, weights, the CP method's buffers, the allocator's peak).
  const int ranks = ctx_.mpi.size(), rank = ctx_.mpi.rank();
  std::vector<std::int64_t> table;
  for (double v :
       {static_cast<double>(block_->ledger_bytes()), weights,
        static_cast<double>(block_->cp_method_bytes()), static_cast<double>(alloc.peak)}) {
    const auto all = gather_int(static_cast<std::int64_t>(v), ranks, rank);
    table.insert(table.end(), all.begin(), all.end());
  }
  rec.int_tables.push_back({"memory_bytes", 4, static_cast<std::size_t>(ranks), table});
}

}  // namespace suite::mesh
