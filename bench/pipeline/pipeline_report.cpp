// The report of a pipeline case: the timeline of the first PP group (each op's start and end on
// each rank), the bubble it shows beside the critical path of the schedule's graph with the F,
// B, W and hop times measured in the same step and beside METHODS.md 7's closed form, the bytes
// per hop the transport counted beside c b_mb h e / T, and each rank's peak activations beside
// the schedule's in-flight count; with DP sums, their bytes per collective beside dp_shard_cost's
// and their time.
#include <mpi.h>

#include <algorithm>
#include <map>

#include "bench/pipeline/pipeline_case.hpp"
#include "common/formulas/dp_shard.hpp"
#include "common/formulas/pipeline_graph.hpp"
#include "common/harness/stats.hpp"
#include "common/transport/rank_gather.hpp"

namespace suite::pipeline {

namespace {

constexpr std::size_t kSpanColumns = 7;  // rank, kind, microbatch, chunk, stage, start, end

// Every rank's spans as rows to rank 0 (ranks of other PP groups send none).
std::vector<double> gather_spans(const std::vector<double>& mine, MPI_Comm comm) {
  int size = 0, rank = 0;
  MPI_Comm_size(comm, &size);
  MPI_Comm_rank(comm, &rank);
  const int count = static_cast<int>(mine.size());
  std::vector<int> counts(size), displs(size, 0);
  MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm);
  for (int r = 1; r < size; ++r)
    displs[r] = displs[r - 1] + counts[r - 1];
  std::vector<double> all(rank == 0 ? displs.back() + counts.back() : 0);
  MPI_Gatherv(mine.data(), count, MPI_DOUBLE, all.data(), counts.data(), displs.data(), MPI_DOUBLE,
              0, comm);
  return all;
}

// The spans' times from the first op's start, so they read without the clock's origin.
std::vector<double> from_first_start(std::vector<double> rows) {
  double t0 = INFINITY;
  for (std::size_t i = 0; i < rows.size(); i += kSpanColumns)
    t0 = std::min(t0, rows[i + 5]);
  for (std::size_t i = 0; i < rows.size(); i += kSpanColumns)
    rows[i + 5] -= t0, rows[i + 6] -= t0;
  return rows;
}

struct Measured {
  Schedule schedule;
  std::vector<std::vector<double>> start, end;  // [rank][index], seconds from the first start
  std::map<std::pair<int, OpKind>, std::vector<double>> durations;  // (rank, kind)
};

Measured from_rows(const Schedule& s, const std::vector<double>& rows) {
  Measured m{s, {}, {}, {}};
  const int p = s.spec.ranks;
  m.start.resize(p), m.end.resize(p);
  for (std::size_t i = 0; i < rows.size(); i += kSpanColumns) {
    const int r = static_cast<int>(rows[i]);
    m.start[r].push_back(rows[i + 5]);
    m.end[r].push_back(rows[i + 6]);
    m.durations[{r, static_cast<OpKind>(rows[i + 1])}].push_back(rows[i + 6] - rows[i + 5]);
  }
  return m;
}

double mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v)
    sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

// A hop: how long an op waited for data from another rank after its producer ended, where the
// rank was idle for it (its previous op ended first); the median over such waits.
double measured_hop(const Measured& m, const ScheduleGraph& g) {
  std::vector<double> waits;
  for (int r = 0; r < m.schedule.spec.ranks; ++r)
    for (std::size_t i = 0; i < g.deps[r].size(); ++i)
      for (const Dependency& d : g.deps[r][i]) {
        const double produced = m.end[d.from.rank][d.from.index];
        const double own = i > 0 ? m.end[r][i - 1] : 0;
        if (d.hop && own <= produced) waits.push_back(m.start[r][i] - produced);
      }
  return waits.empty() ? 0 : percentile(waits, 0.5);
}

}  // namespace

void PipelineCase::report_dp_sums(CaseRecord& rec) const {
  if (!dp_sums_) return;
  model::DpShardSizes sizes;
  sizes.params = static_cast<double>(dp_sums_->params());
  sizes.layer_params = static_cast<double>(dp_sums_->layer_params());
  sizes.replicas = cfg_.replicas;  // the DP group (the block sums over its CP group before)
  sizes.microbatches = cfg_.spec.microbatches;
  sizes.param_bytes = sizes.grad_bytes = sizeof(double);  // fp64 weights and gradients here
  const model::DpShardCost pred = model::dp_shard_cost(cfg_.dp_shard, sizes);
  const DataParallelSums::Sent& sent = dp_sums_->sent();
  Attributes& a = rec.attrs;
  a.emplace_back("dp_params", sizes.params);
  a.emplace_back("dp_all_reduce_bytes", sent.all_reduce);
  a.emplace_back("pred_dp_all_reduce_bytes", pred.all_reduce);
  a.emplace_back("dp_reduce_scatter_bytes", sent.reduce_scatter);
  a.emplace_back("pred_dp_reduce_scatter_bytes", pred.reduce_scatter);
  a.emplace_back("dp_all_gather_bytes", sent.all_gather);
  a.emplace_back("pred_dp_all_gather_bytes", pred.all_gather);
  a.emplace_back("dp_sum_s", dp_sums_->sum_seconds());
  a.emplace_back("dp_gather_s", dp_sums_->gather_seconds());
}

void PipelineCase::report(const Measurement&, CaseRecord& rec) {
  const int p = cfg_.spec.ranks, world_rank = ctx_.mpi.rank(), pp_rank = pp_comm_->rank();
  std::vector<double> mine;
  if (recorded())
    for (const OpSpan& span : executor_->timeline())
      mine.insert(
          mine.end(),
          {static_cast<double>(pp_rank), static_cast<double>(span.op.kind),
           static_cast<double>(span.op.microbatch), static_cast<double>(span.op.chunk),
           static_cast<double>(schedule_.stage_of(pp_rank, span.op.chunk)), span.start, span.end});
  const std::vector<double> rows = from_first_start(gather_spans(mine, ctx_.comm.mpi_comm()));
  const std::vector<std::int64_t> peaks =
      gather_int(executor_->peak_held(), ctx_.mpi.size(), world_rank);
  const std::vector<std::int64_t> peak_bytes =
      gather_int(executor_->peak_activation_bytes(), ctx_.mpi.size(), world_rank);
  const std::vector<std::int64_t> sent =
      gather_int(hops_->bytes_sent(), ctx_.mpi.size(), world_rank);
  const std::vector<std::int64_t> sends =
      gather_int(executor_->sends(), ctx_.mpi.size(), world_rank);
  // The loss of the first PP group, from the ranks that hold its last stage: each its rows',
  // summed over the stage's TP and CP groups.
  double loss = executor_->loss(), group_loss = 0;
  for (Comm* group : stage_groups_)
    MPI_Allreduce(MPI_IN_PLACE, &loss, 1, MPI_DOUBLE, MPI_SUM, group->mpi_comm());
  if (!recorded()) loss = 0;
  MPI_Reduce(&loss, &group_loss, 1, MPI_DOUBLE, MPI_SUM, 0, ctx_.comm.mpi_comm());
  if (world_rank != 0) return;

  const Measured m = from_rows(schedule_, rows);
  const ScheduleGraph graph = build_graph(schedule_);
  double step = 0;
  std::vector<double> busy(p, 0);
  for (int r = 0; r < p; ++r)
    for (std::size_t i = 0; i < m.start[r].size(); ++i) {
      step = std::max(step, m.end[r][i]);
      busy[r] += m.end[r][i] - m.start[r][i];
    }
  double bubble = 0;
  for (double b : busy)
    bubble += (step - b) / p;
  const double hop = measured_hop(m, graph);
  const auto measured_duration = [&m](int rank, const Op& op) {
    return mean(m.durations.at({rank, op.kind}));
  };
  const Timeline predicted = critical_path(schedule_, graph, measured_duration, hop);
  // One chunk op's times over every rank (BW stands for B when the backward is fused).
  std::map<OpKind, std::vector<double>> all;
  for (const auto& [key, v] : m.durations)
    all[key.second].insert(all[key.second].end(), v.begin(), v.end());
  OpCosts chunk{mean(all[OpKind::F]),
                mean(all[schedule_.split_backward() ? OpKind::B : OpKind::BW]),
                mean(all[OpKind::W])};
  const double closed = closed_form_bubble(cfg_.spec.kind, p, chunk);

  Attributes& a = rec.attrs;
  a.emplace_back("loss", group_loss);
  a.emplace_back("step_timeline_s", step);
  a.emplace_back("bubble_s", bubble);
  a.emplace_back("bubble_fraction", step > 0 ? bubble / step : 0.0);
  a.emplace_back("forward_s", chunk.forward);
  a.emplace_back("input_grad_s", chunk.input_grad);
  a.emplace_back("weight_grad_s", chunk.weight_grad);
  a.emplace_back("hop_s", hop);
  a.emplace_back("pred_step_s", predicted.step);
  a.emplace_back("pred_bubble_s", predicted.bubble());
  a.emplace_back("pred_bubble_fraction",
                 predicted.step > 0 ? predicted.bubble() / predicted.step : 0.0);
  a.emplace_back("pred_closed_bubble_s", closed);
  std::int64_t bytes = 0, messages = 0;
  for (int r : recorded_)
    bytes += sent[r], messages += sends[r];
  a.emplace_back("bytes_per_hop", messages > 0 ? static_cast<double>(bytes) / messages : 0.0);
  const auto e = static_cast<std::int64_t>(dtype_size(hop_wire_type(cfg_.hops)));
  a.emplace_back("pred_bytes_per_hop", static_cast<double>(cfg_.seq * cfg_.batch * cfg_.hidden * e /
                                                           (cfg_.mesh.tp * cfg_.mesh.cp)));
  a.emplace_back("hops_per_step", messages);
  report_dp_sums(rec);

  const std::vector<int> in_flight = peak_in_flight(schedule_);
  IntTable memory{"peak_in_flight", 3, static_cast<std::size_t>(p), {}};
  for (int r : recorded_)
    memory.values.push_back(peaks[r]);
  for (int r = 0; r < p; ++r)
    memory.values.push_back(in_flight[r]);
  for (int r : recorded_)
    memory.values.push_back(peak_bytes[r]);
  rec.int_tables.push_back(std::move(memory));
  rec.tables.push_back({"timeline", rows.size() / kSpanColumns, kSpanColumns, rows});
  rec.string_lists.push_back(
      {"timeline_columns", {"rank", "kind", "microbatch", "chunk", "stage", "start_s", "end_s"}});
  rec.string_lists.push_back({"op_kinds", {"F", "B", "W", "BW"}});
}

}  // namespace suite::pipeline
