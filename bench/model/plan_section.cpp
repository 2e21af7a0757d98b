#include "bench/model/plan_section.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "bench/model/plan_explain.hpp"
#include "common/formulas/mesh_plan.hpp"
#include "common/harness/errors.hpp"
#include "common/harness/shared_flags.hpp"
#include "common/harness/size_list.hpp"

namespace suite::model_cli {
namespace {

using nlohmann::json;

constexpr const char* kFormat = "parallelism-bench calibration";

model::LinkLevel link_of(const json& level, const char* kind, const std::string& where) {
  if (!level.contains(kind) || !level[kind].contains("bw") || !level[kind].contains("lat"))
    throw UsageError("--calibration: " + where + " has no " + kind + " rate");
  const double bw = level[kind]["bw"].get<double>(), lat = level[kind]["lat"].get<double>();
  if (!(bw > 0) || !(lat >= 0))
    throw UsageError("--calibration: " + where + "'s " + kind + " rate is not a rate");
  return {bw, lat};
}

model::LevelRates level_of(const json& doc, const char* name, const std::string& file) {
  const json& l = doc["levels"][name];
  const std::string where = file + "'s " + name + " level";
  return {link_of(l, "rs_ag", where), link_of(l, "all_reduce", where), link_of(l, "a2a", where),
          link_of(l, "p2p", where)};
}

// The cluster of a calibration file: both levels, the compute rates, the element type.
model::Cluster read_calibration(const std::string& file, const std::string& dtype, int gpus) {
  std::ifstream in(file);
  if (!in) throw UsageError("--calibration " + file + ": cannot be read");
  json doc;
  try {
    doc = json::parse(in);
  } catch (const json::exception& e) {
    throw UsageError("--calibration " + file + ": not JSON (" + e.what() + ")");
  }
  if (!doc.is_object() || doc.value("format", "") != kFormat)
    throw UsageError("--calibration " + file + ": not a calibration of this suite (no format \"" +
                     kFormat + "\"; suite calibrate writes one)");
  if (doc.value("dtype", "") != dtype)
    throw UsageError("--calibration " + file + ": measured in " + doc.value("dtype", "?") +
                     ", the plan is in --dtype " + dtype + "; calibrate in " + dtype);
  model::Cluster c;
  try {
    c.ranks_per_node = doc.at("ranks_per_node").get<int>();
    if (!doc.contains("levels") || !doc["levels"].contains("intra"))
      throw UsageError("--calibration " + file + ": no level inside a node");
    c.intra = level_of(doc, "intra", file);
    if (doc["levels"].contains("inter"))
      c.inter = level_of(doc, "inter", file);
    else if (gpus > c.ranks_per_node)
      throw UsageError(
          "--calibration " + file + ": no across-nodes level (measured on one node of " +
          std::to_string(c.ranks_per_node) + " ranks), and --gpus " + std::to_string(gpus) +
          " spans nodes: calibrate across nodes (Slurm or a simulated cluster)");
    else
      c.inter = c.intra;
    const json& comp = doc.at("compute");
    c.flops = comp.at("gemm_flops").get<double>();
    c.attn_flops = comp.at("attention_flops").get<double>();
    c.attn_flops_bwd = comp.at("attention_bwd_flops").get<double>();
    // Optional: the GEMM rates by size and HBM's rate (a spec's published figures).
    for (const json& point : comp.value("gemm_by_size", json::array()))
      c.gemm_table.push_back({point.at("flops").get<double>(), point.at("rate").get<double>()});
    c.hbm_bw = comp.value("hbm_bw", 0.0);
  } catch (const json::exception& e) {
    throw UsageError("--calibration " + file + ": " + e.what());
  }
  if (!(c.flops > 0) || !(c.attn_flops > 0) || c.ranks_per_node < 1)
    throw UsageError("--calibration " + file + ": no compute rate or no ranks per node");
  for (std::size_t i = 0; i < c.gemm_table.size(); ++i)
    if (!(c.gemm_table[i].rate > 0) ||
        !(c.gemm_table[i].flops > (i ? c.gemm_table[i - 1].flops : 0)))
      throw UsageError("--calibration " + file +
                       ": gemm_by_size needs rates > 0 at increasing flops");
  if (!(c.hbm_bw >= 0)) throw UsageError("--calibration " + file + ": hbm_bw is not a rate");
  return c;
}

void print_row(int rank, const model::PlanEntry& e) {
  const double s = e.step_s;
  std::printf(
      "%4d  %-52s %9.4f %7.1f %5.0f%% %5.0f%% %5.0f%% %5.0f%% %5.0f%% %5.0f%% %5.0f%% %8.1f %4s\n",
      rank, e.name().c_str(), s, e.micro_batches, 100 * e.compute_s / s, 100 * e.tp_s / s,
      100 * e.cp_s / s, 100 * e.ep_s / s, 100 * e.dp_s / s, 100 * e.pp_s / s,
      100 * e.recompute_s / s, e.memory_bytes / 1e9, e.fits ? "yes" : "no");
}

// A --compare name matches an entry's name, or its name without the schedule (every schedule
// of that mesh).
bool matches(const model::PlanEntry& e, const std::string& compare) {
  std::string n = e.name();
  if (n.find(compare) != std::string::npos) return true;
  if (e.PP == 1) return false;
  const std::string schedule = ":" + e.schedule_name() + "-dp";
  n.replace(n.find(schedule), schedule.size(), "-dp");
  return n.find(compare) != std::string::npos;
}

std::vector<pipeline::ScheduleKind> schedules_of(const PlanOptions& o) {
  if (o.chunks < 0) throw UsageError("--chunks " + std::to_string(o.chunks) + " must be >= 0");
  if (o.schedules.empty()) return model::JobSpec{}.schedules;
  std::vector<pipeline::ScheduleKind> kinds;
  for (const std::string& name : split_list(o.schedules))
    kinds.push_back(pipeline::parse_schedule(name));
  return kinds;
}

}  // namespace

void print_plan(const Params& p, const PlanOptions& o, const std::string& dtype, double e,
                double e_grad) {
  if (o.gpus < 1) throw UsageError("--gpus " + std::to_string(o.gpus) + " must be >= 1");
  if (!(o.memory_gb > 0)) throw UsageError("--memory-gb must be > 0");
  if (o.top < 1) throw UsageError("--top must be >= 1");
  model::Cluster cl;
  if (!o.calibration.empty()) {
    cl = read_calibration(o.calibration, dtype, o.gpus);
  } else {
    cl = {o.ranks_per_node,
          model::same_rates({p.bw, o.lat}),
          model::same_rates({o.bw_inter, o.lat_inter}),
          p.flops,
          p.flops,
          p.flops_bwd.value_or(p.flops)};
  }
  model::ModelSpec md{p.h, p.a,      p.kv,   p.d_ff > 0 ? p.d_ff : 4 * p.h, p.layers, p.experts,
                      p.k, p.swiglu, o.vocab};
  model::JobSpec job;
  job.s = p.s;
  job.global_tokens = o.global_tokens > 0 ? o.global_tokens : p.s * o.gpus;
  job.gpus = o.gpus;
  job.memory_bytes = o.memory_gb * 1e9;
  job.e = e;
  job.e_grad = e_grad;
  job.causal = p.causal;
  job.micro_batch = p.b;
  if (!o.zero1 && o.dp_shard != "optimizer")
    throw UsageError("--no-zero1 and --dp-shard " + o.dp_shard + ": give one");
  job.dp_shard = o.zero1 ? model::parse_dp_shard(o.dp_shard) : model::DpShard::none;
  job.recompute = model::parse_recompute(o.recompute);
  job.unfused_attention = !parse_attention_path(o.attention);
  job.ep_overlap = o.ep_overlap;
  if (o.vocab < 0) {
    char text[64];
    std::snprintf(text, sizeof text, "--vocab %g must be >= 0", o.vocab);
    throw UsageError(text);
  }
  job.max_pp = o.max_pp;
  job.schedules = schedules_of(o);
  job.chunks = o.chunks;
  if (std::fmod(job.global_tokens, job.s) != 0)
    throw UsageError("--global-tokens is not a whole number of --seq sequences");
  std::vector<std::array<MeshAxis, 4>> orders;
  for (const std::string& text : split_list(o.orders, '/'))
    orders.push_back(parse_mesh_order(text));
  const auto plan = model::plan_meshes(md, job, cl, orders);
  if (plan.empty())
    throw UsageError("no mesh of " + std::to_string(o.gpus) +
                     " GPUs divides this model and "
                     "batch (heads, K/V heads, --seq, the sequences per step)");
  if (!plan.front().fits) {
    const auto least = std::min_element(plan.begin(), plan.end(), [](const auto& a, const auto& b) {
      return a.memory_bytes < b.memory_bytes;
    });
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f GB", least->memory_bytes / 1e9);
    throw UsageError("no mesh fits in --memory-gb " + std::to_string(o.memory_gb) +
                     ": the smallest needs " + buf + " per GPU (" + least->name() + ")");
  }
  const int fits = static_cast<int>(
      std::count_if(plan.begin(), plan.end(), [](const auto& x) { return x.fits; }));
  std::printf(
      "Plan: %d GPUs (%d a node), %.0f GB each; s=%g, %g tokens a step; h=%g a=%g n_kv=%g "
      "d_ff=%g, %d layers%s; %s\n",
      o.gpus, cl.ranks_per_node, o.memory_gb, p.s, job.global_tokens, p.h, p.a, p.kv, md.d_ff,
      p.layers, p.experts > 0 ? (", " + std::to_string(p.experts) + " experts").c_str() : "",
      o.calibration.empty() ? "rates of the flags" : ("rates of " + o.calibration).c_str());
  std::printf(
      "  %zu meshes, %d fit; PP is modeled (the schedule's critical path), not run. Step time "
      "split into compute and each axis's exposed time (pp: the bubble and the hops; rc: "
      "recomputation)\n",
      plan.size(), fits);
  std::printf("%4s  %-52s %9s %7s %6s %6s %6s %6s %6s %6s %6s %8s %4s\n", "rank", "mesh", "step_s",
              "micro", "comp", "tp", "cp", "ep", "dp", "pp", "rc", "mem_GB", "fits");
  for (int i = 0; i < std::min<int>(o.top, static_cast<int>(plan.size())); ++i)
    print_row(i + 1, plan[static_cast<std::size_t>(i)]);
  if (!o.compare.empty()) {
    std::size_t first = plan.size();  // the best-ranked match, explained
    for (std::size_t i = 0; i < plan.size(); ++i) {
      if (!matches(plan[i], o.compare)) continue;
      if (first == plan.size()) std::printf("  -- %s:\n", o.compare.c_str()), first = i;
      print_row(static_cast<int>(i + 1), plan[i]);
    }
    if (first == plan.size())
      std::printf("  -- %s: not among the meshes (its degrees do not divide)\n", o.compare.c_str());
    else
      print_explanation(plan, first);
  }
  const model::PlanEntry& best = plan.front();
  std::printf("prediction: section=plan mesh=%s step_s=%.6g memory_bytes=%.6g block_step_s=%.6g\n",
              best.name().c_str(), best.step_s, best.memory_bytes, best.block.step);
  if (o.csv.empty()) return;
  std::FILE* f = std::fopen(o.csv.c_str(), "w");
  if (!f) throw UsageError("--csv " + o.csv + ": cannot be written");
  std::fprintf(f,
               "rank,tp,cp,cp_method,ep,pp,dp,order,micro_batches,step_s,compute_s,tp_s,cp_s,ep_s,"
               "dp_s,pp_s,memory_bytes,fits,block_step_s,block_compute_s,block_tp_s,block_cp_s,"
               "block_ep_s,block_dp_s,schedule,chunks,peak_chunks,recompute_s\n");
  for (std::size_t i = 0; i < plan.size(); ++i) {
    const auto& x = plan[i];
    std::fprintf(f,
                 "%zu,%d,%d,%s,%d,%d,%d,\"%s\",%g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%d,%.9g,"
                 "%.9g,%.9g,%.9g,%.9g,%.9g,%s,%d,%d,%.9g\n",
                 i + 1, x.T, x.C, x.cp_name().c_str(), x.E, x.PP, x.D,
                 mesh_order_name(x.order).c_str(), x.micro_batches, x.step_s, x.compute_s, x.tp_s,
                 x.cp_s, x.ep_s, x.dp_s, x.pp_s, x.memory_bytes, x.fits ? 1 : 0, x.block.step,
                 x.block.compute, x.block.tp.exposed, x.block.cp.exposed, x.block.ep.exposed,
                 x.block.dp.exposed, x.schedule_name().c_str(), x.chunks, x.peak_chunks,
                 x.recompute_s);
  }
  std::fclose(f);
}

}  // namespace suite::model_cli
