#include "bench/ring_attention/ring_cases.hpp"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "bench/ring_attention/doc_report.hpp"
#include "bench/ring_attention/ring_attention.hpp"
#include "bench/ring_attention/ring_case.hpp"
#include "common/device/attention_select.hpp"
#include "common/harness/errors.hpp"
#include "common/results/record_access.hpp"

namespace suite::ring {

std::vector<CaseSpec> ring_cases(BenchContext& ctx, const RingSweep& sweep) {
  // The context-parallel group is ctx.comm: the job, or its group of --cp consecutive ranks.
  const int world = ctx.mpi.size(), cp = ctx.comm.size();
  // Refuses what cannot run: the kernel choice, and partial sums the backend cannot hold.
  auto engine = make_attention_engine(ctx.device, ctx.dtype, sweep.attn_kernel);
  if (ctx.backend == Backend::cuda && sweep.grad_dtype == DType::fp64)
    for (Pass p : sweep.passes)
      if (p == Pass::fwd_bwd)
        throw UsageError(
            "--grad-dtype fp64: the cuda backend accumulates and sends the dK/dV "
            "partial sums in fp32 or bf16");
  for (Variant v : sweep.variants)
    validate_variant_backend(v, ctx.backend);
  std::vector<RingConfig> configs;
  for (Variant variant : sweep.variants)
    for (Layout layout : sweep.layouts)
      for (bool causal : sweep.causal)
        for (std::int64_t c : sweep.blocks)
          for (Pass pass : sweep.passes) {
            RingConfig cfg;
            cfg.c = c;
            cfg.n_c = cp;
            cfg.layout = layout;
            cfg.variant = variant;
            cfg.causal = causal;
            cfg.heads = sweep.heads;
            cfg.kv_heads = sweep.kv_heads;
            cfg.head_dim = sweep.head_dim;
            cfg.batch = sweep.batch;
            cfg.dtype = ctx.dtype;
            cfg.poll_progress = sweep.poll_progress;
            // Only the ring makes one call per pair of runs; modeled compute calls no kernel.
            cfg.block_calls =
                sweep.block_calls && sweep.docs && variant == Variant::ring && !sim::modeled();
            cfg.pass = pass;
            cfg.grad_dtype = sweep.grad_dtype;
            validate_layout(cfg.layout, cfg.c, cfg.n_c);
            if (sweep.docs) attach_documents(cfg, *sweep.docs, ctx.opts.seed);
            validate(cfg);
            const std::int64_t need = RingAttention::estimate_bytes(cfg);
            const std::size_t have = ctx.device.memory_available();
            if (static_cast<double>(need) > 0.9 * static_cast<double>(have))
              throw UsageError(cfg.case_name() + " needs about " + std::to_string(need >> 20) +
                               " MiB per rank but only " + std::to_string(have >> 20) +
                               " MiB are available; use a smaller --block, --batch or fewer heads");
            if (static_cast<std::size_t>(cfg.kv_block_elems()) > ctx.comm.max_count())
              throw UsageError(cfg.case_name() + ": a K/V block of " +
                               std::to_string(cfg.kv_block_elems()) +
                               " elements is above this transport's limit of " +
                               std::to_string(ctx.comm.max_count()) + "; use --transport nccl");
            configs.push_back(cfg);
          }
  std::vector<CaseSpec> specs;
  for (const RingConfig& cfg : configs) {
    CaseSpec spec;
    spec.name = cfg.case_name();
    spec.params = {
        {"variant", std::string(variant_name(cfg.variant))},
        {"layout", std::string(layout_name(cfg.layout))},
        {"causal", std::int64_t{cfg.causal ? 1 : 0}},
        {"dtype", std::string(dtype_name(cfg.dtype))},
        {"c", cfg.c},
        {"s", cfg.s()},
        {"n_c", std::int64_t{cfg.n_c}},
        {"cp_groups", std::int64_t{world / cfg.n_c}},
        {"heads", std::int64_t{cfg.heads}},
        {"kv_heads", std::int64_t{cfg.kv_heads}},
        {"head_dim", std::int64_t{cfg.head_dim}},
        {"batch", cfg.batch},
        {"attn_kernel_choice", std::string(kernels::attn_kernel_choice_name(sweep.attn_kernel))}};
    spec.make = [&ctx, cfg, choice = sweep.attn_kernel] {
      return make_ring_case(ctx, cfg, choice);
    };
    if (cfg.docs) {
      spec.params.emplace_back("docs", cfg.docs_spec);
      spec.params.emplace_back("docs_count", cfg.docs->count());
      if (cfg.variant == Variant::ring && !sim::modeled())
        spec.params.emplace_back("varlen_calls", std::string(cfg.block_calls ? "block" : "pair"));
      if (cfg.layout == Layout::balanced)
        spec.params.emplace_back("balanced_chunk",
                                 balanced_min_chunk(cfg.c, sweep.docs->balanced_chunk));
    }
    spec.console_counters = {"c_star_tokens", "overlap_efficiency"};
    if (cfg.backward()) {
      spec.params.emplace_back("pass", std::string(pass_name(cfg.pass)));
      spec.params.emplace_back("grad_dtype", std::string(dtype_name(cfg.grad_dtype)));
      spec.console_counters.push_back("bwd_c_star_tokens");
    }
    specs.push_back(std::move(spec));
  }
  return specs;
}

namespace {

const char* check_word(const CaseRecord& r) {
  const double passed = attr_number(r, "check_passed");
  return passed == 1 ? "ok" : passed < 0 ? "off" : "FAIL";
}

// Why each case reaches its efficiency against the ideal: the factors of ring_efficiency.hpp
// (cases whose ideal was skipped have none and are left out).
void print_efficiency_factors(const std::vector<CaseRecord>& records) {
  bool any = false, any_step = false;
  for (const auto& r : records) {
    any = any || std::isfinite(attr_number(r, "eff_balance"));
    any_step = any_step || std::isfinite(attr_number(r, "bwd_eff_balance"));
  }
  if (!any) return;
  std::printf(
      "\nWhy eff_ideal: eff_fwd = balance (mean / busiest rank's visible pairs, counted) x "
      "pair_rate (the busiest\nrank's pairs per second in the compute-only step over the "
      "ideal's, measured) x exchange (compute-only\nstep / step, measured)%s\n",
      any_step ? "; eff_bwd likewise for the backward (its balance is the forward's)" : "");
  std::printf("%-52s %8s %8s %9s %8s", "case", "eff_fwd", "balance", "pair_rate", "exchange");
  if (any_step) std::printf(" %8s %9s %9s", "eff_bwd", "bwd_rate", "bwd_xchg");
  std::printf("\n");
  for (const auto& r : records) {
    if (!std::isfinite(attr_number(r, "eff_balance"))) continue;
    std::printf("%-52s %8.2f %8.2f %9.2f %8.2f", r.name.c_str(),
                attr_number(r, "efficiency_vs_ideal_fwd"), attr_number(r, "eff_balance"),
                attr_number(r, "eff_pair_rate"), attr_number(r, "eff_exchange"));
    if (any_step)
      std::printf(" %8.2f %9.2f %9.2f", attr_number(r, "efficiency_vs_ideal_bwd"),
                  attr_number(r, "bwd_eff_pair_rate"), attr_number(r, "bwd_eff_exchange"));
    std::printf("\n");
  }
}

// The group-cast's traffic: bytes each rank sent and received in a forward (the busiest rank's,
// counted by the transport) beside the exact figures from the layout, against the ring's, and
// which schedule ran.
void print_group_cast_table(const std::vector<CaseRecord>& records) {
  bool any = false;
  for (const auto& r : records)
    any = any || param_text(r, "variant") == "groupcast";
  if (!any) return;
  std::printf(
      "\nGroup-cast: bytes the busiest rank sent and received in a forward (counted by the "
      "transport) beside the exact\nfigures from the layout (pred), against the ring's; sources: "
      "the most ranks one rank received from; memory: the\nbusiest rank's buffers (pred)\n");
  std::printf("%-62s %12s %12s %12s %12s %8s %7s %12s %12s  %s\n", "case", "sent", "(pred)",
              "received", "(pred)", "x ring", "sources", "memory", "(pred)", "schedule");
  for (const auto& r : records) {
    if (param_text(r, "variant") != "groupcast") continue;
    const double sent = attr_number(r, "bytes_sent_per_rank_per_layer");
    std::printf("%-62s %12.0f %12.0f %12.0f %12.0f %8.4f %7.0f %12.0f %12.0f  %s\n", r.name.c_str(),
                sent, attr_number(r, "pred_bytes_sent_per_rank_per_layer"),
                attr_number(r, "bytes_recv_per_rank_per_layer"),
                attr_number(r, "pred_bytes_recv_per_rank_per_layer"),
                sent / attr_number(r, "ring_bytes_sent_per_rank_per_layer"),
                attr_number(r, "groupcast_sources_max"), attr_number(r, "memory_method_bytes"),
                attr_number(r, "pred_memory_bytes"), param_text(r, "groupcast_schedule").c_str());
  }
}

}  // namespace

void print_ring_table(const std::vector<CaseRecord>& records, bool shared_memory_cpu) {
  if (records.empty()) return;
  std::printf(
      "\nRing attention, forward (median = max over ranks; F, W measured in this run; c* = the "
      "overlap bound; eff_ideal = (one rank's full attention / N_c) / forward)\n");
  std::printf("%-52s %10s %10s %10s %6s %9s %8s %9s %7s %9s %7s %9s %6s\n", "case", "fwd_us",
              "comp_us", "xfer_us", "eff", "F_GF/s", "W_GB/s", "c*", "c/c*", "lockstep", "(pred)",
              "eff_ideal", "check");
  for (const auto& r : records) {
    const bool step = param_text(r, "pass") == "fwd_bwd";
    std::printf(
        "%-52s %10.1f %10.1f %10.1f %6.2f %9.2f %8.2f %9.1f %7.1f %9.3f %7.3f %9.2f %6s\n",
        r.name.c_str(), attr_number(r, step ? "time_overlapped_median_s" : "time_median_s") * 1e6,
        attr_number(r, "time_compute_only_median_s") * 1e6,
        attr_number(r, "time_transfer_only_median_s") * 1e6, attr_number(r, "overlap_efficiency"),
        attr_number(r, "measured_F_flops") / 1e9, attr_number(r, "measured_W_Bps") / 1e9,
        attr_number(r, "c_star_tokens"), attr_number(r, "c_over_c_star"),
        attr_number(r, "lockstep_blocks"), attr_number(r, "pred_lockstep_blocks"),
        attr_number(r, "efficiency_vs_ideal_fwd"), check_word(r));
  }
  if (shared_memory_cpu)
    std::printf(
        "note: CPU ranks on one host exchange through shared memory: the copy is done by the "
        "cores that compute,\n      so the transfer has nothing to hide behind (eff here is "
        "noise, not overlap). Overlap is real on a link: a shaped one\n      "
        "(suite shaped-link, --link "
        "shaped-1g), a simulated one (suite simulate) or a GPU's.\n");
  print_efficiency_factors(records);
  print_documents_table(records);
  print_group_cast_table(records);
  bool any_step = false;
  for (const auto& r : records)
    any_step = any_step || param_text(r, "pass") == "fwd_bwd";
  if (!any_step) return;
  std::printf(
      "\nRing attention, training step (--pass fwd_bwd): the backward's times, F_b, W_b, "
      "c*_bwd; eff_ideal = (one rank's full attention / N_c) / step\n");
  std::printf("%-52s %10s %10s %10s %10s %9s %8s %9s %9s %9s %6s\n", "case", "step_us", "bwd_us",
              "comp_us", "xfer_us", "Fb_GF/s", "Wb_GB/s", "c*_bwd", "c*b/c*", "eff_ideal", "check");
  for (const auto& r : records) {
    if (param_text(r, "pass") != "fwd_bwd") continue;
    std::printf(
        "%-52s %10.1f %10.1f %10.1f %10.1f %9.2f %8.2f %9.1f %9.2f %9.2f %6s\n", r.name.c_str(),
        attr_number(r, "time_median_s") * 1e6, attr_number(r, "bwd_time_overlapped_median_s") * 1e6,
        attr_number(r, "bwd_time_compute_only_median_s") * 1e6,
        attr_number(r, "bwd_time_transfer_only_median_s") * 1e6,
        attr_number(r, "bwd_measured_F_flops") / 1e9, attr_number(r, "bwd_measured_W_Bps") / 1e9,
        attr_number(r, "bwd_c_star_tokens"), attr_number(r, "bwd_c_star_over_c_star"),
        attr_number(r, "efficiency_vs_ideal_fwd_bwd"), check_word(r));
  }
}

}  // namespace suite::ring
