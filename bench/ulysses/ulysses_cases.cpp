#include "bench/ulysses/ulysses_cases.hpp"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "bench/ring_attention/attention_inputs.hpp"
#include "bench/ring_attention/doc_report.hpp"
#include "bench/ring_attention/global_order.hpp"
#include "bench/ring_attention/ring_pass_report.hpp"
#include "bench/ring_attention/ring_reference.hpp"
#include "bench/ulysses/ulysses_attention.hpp"
#include "bench/ulysses/ulysses_case_impl.hpp"
#include "common/device/attention_select.hpp"
#include "common/harness/errors.hpp"
#include "common/mesh/device_meshes.hpp"
#include "common/results/record_access.hpp"
#include "common/sim/sim.hpp"
#include "common/transport/mpi_env.hpp"

namespace suite::ulysses {
namespace {

constexpr std::int64_t kMaxSavedPerRank = 1 << 20;  // elements, as --help says

}  // namespace

void UlyssesCase::step(PhaseTimer& phases) {
  const std::int64_t u0 = groups_.ulysses->bytes().sent, r0 = groups_.ring->bytes().sent;
  method_->step(phases);
  const std::int64_t u1 = groups_.ulysses->bytes().sent, r1 = groups_.ring->bytes().sent;
  ulysses_bytes_ = u1 - u0;
  ring_bytes_ = r1 - r0;
  if (!cfg_.backward()) return;
  method_->backward(phases);
  bwd_ulysses_bytes_ = groups_.ulysses->bytes().sent - u1;
  bwd_ring_bytes_ = groups_.ring->bytes().sent - r1;
}

CheckOutcome UlyssesCase::check() {
  ring::RingConfig full;  // the whole problem, seen as N_c ranks of t tokens
  full.c = cfg_.tokens_per_rank();
  full.n_c = cfg_.n_c;
  full.causal = cfg_.causal;
  full.heads = cfg_.heads;
  full.kv_heads = cfg_.kv_heads;
  full.head_dim = cfg_.head_dim;
  full.batch = cfg_.batch;
  full.dtype = cfg_.dtype;
  full.grad_dtype = cfg_.grad_dtype;
  full.docs = cfg_.docs;  // the reference attends within each document
  auto cmp = ring::compare_with_full_attention(full, ctx_.opts.seed, token_rows(),
                                               method_->positions(), method_->output(), {});
  if (cmp.skipped) return {true, 0, cmp.why_skipped, true};
  const double tol = ring::reference_tolerance(cfg_.dtype);
  CheckOutcome out{cmp.max_err_o <= tol, cmp.max_err_o, ""};
  if (!out.passed)
    out.detail = "differs from full attention by " + std::to_string(cmp.max_err_o) +
                 " (tolerance " + std::to_string(tol) + ")";
  if (!cfg_.backward()) return out;
  grads_ = ring::compare_gradients_with_full_attention(full, ctx_.opts.seed, method_->positions(),
                                                       method_->dq(), method_->dkv());
  if (grads_.skipped) return {true, 0, grads_.why_skipped, true};
  const double gtol = ring::gradient_tolerance(cfg_.dtype, cfg_.grad_dtype);
  if (grads_.max_err() > gtol) {
    out.passed = false;
    out.detail += (out.detail.empty() ? "" : "; ") +
                  std::string("gradients differ from full attention's: dQ by ") +
                  std::to_string(grads_.max_err_dq) + ", dK by " +
                  std::to_string(grads_.max_err_dk) + ", dV by " +
                  std::to_string(grads_.max_err_dv) + " (tolerance " + std::to_string(gtol) + ")";
  }
  return out;
}

std::vector<ring::Segment> UlyssesCase::token_rows() const {
  const std::vector<std::int64_t>& pos = method_->positions();
  std::vector<ring::Segment> runs;
  for (std::size_t i = 0; i < pos.size(); ++i) {
    if (cfg_.docs && cfg_.docs->is_pad(pos[i])) continue;
    const auto row = static_cast<std::int64_t>(i);
    if (!runs.empty() && runs.back().local_offset + runs.back().count == row)
      ++runs.back().count;
    else
      runs.push_back({row, pos[i], 1, 1});
  }
  return runs;
}

std::vector<SavedTensor> UlyssesCase::tensors() {
  const std::int64_t t = cfg_.tokens_per_rank(), q_row = cfg_.batch * cfg_.heads * cfg_.head_dim;
  if (t * q_row > kMaxSavedPerRank) return {};
  const int me = ctx_.mpi.rank() % cfg_.n_c;
  auto input = [&](ring::InputTensor which, int heads) {
    return ring::stored_input_slice(ctx_.opts.seed, static_cast<int>(which), me, t, cfg_.batch,
                                    heads, cfg_.head_dim, cfg_.dtype);
  };
  auto in_order = [&](const std::vector<double>& rows, std::int64_t width) {
    return ring::slice_in_global_order(rows, method_->positions(), width, me, cfg_.n_c);
  };
  std::vector<SavedTensor> out = {{"q", input(ring::InputTensor::q, cfg_.heads)},
                                  {"k", input(ring::InputTensor::k, cfg_.kv_heads)},
                                  {"v", input(ring::InputTensor::v, cfg_.kv_heads)},
                                  {"o", in_order(method_->output(), q_row)}};
  if (!cfg_.backward()) return out;
  const std::int64_t kv_row = cfg_.batch * cfg_.kv_heads * cfg_.head_dim;
  const std::vector<double> dkv = method_->dkv();
  const auto half = static_cast<std::ptrdiff_t>(t * kv_row);
  out.push_back({"d_o", input(ring::InputTensor::d_o, cfg_.heads)});
  out.push_back({"dq", in_order(method_->dq(), q_row)});
  out.push_back({"dk", in_order({dkv.begin(), dkv.begin() + half}, kv_row)});
  out.push_back({"dv", in_order({dkv.begin() + half, dkv.end()}, kv_row)});
  return out;
}

namespace {

// Every degree that divides N_c and the head counts (with replication: any multiple of n_kv).
std::vector<int> allowed_degrees(int n_c, const UlyssesSweep& s) {
  std::vector<int> out;
  for (int u = 1; u <= n_c; ++u) {
    if (n_c % u || s.heads % u) continue;
    const bool kv_ok = s.kv_heads % u == 0 || (s.kv_replicate && u % s.kv_heads == 0);
    if (kv_ok) out.push_back(u);
  }
  return out;
}

// Why `--ulysses-degree all` leaves out the degrees u of N_c that the head counts rule out
// (printed, so a sweep never loses plain Ulysses silently).
void note_skipped_degrees(int n_c, const UlyssesSweep& s, const std::vector<int>& allowed) {
  for (int u = 2; u <= n_c; ++u) {
    if (n_c % u || std::find(allowed.begin(), allowed.end(), u) != allowed.end()) continue;
    std::string why =
        s.heads % u
            ? std::to_string(s.heads) + " query heads do not split " + std::to_string(u) + " ways"
            : std::to_string(s.kv_heads) + " K/V heads do not split " + std::to_string(u) +
                  " ways (GQA limit)" +
                  // Replication helps only where each K/V head can go to u / n_kv ranks.
                  (s.kv_replicate || u % s.kv_heads
                       ? ""
                       : "; --kv-replicate runs it with replicated K/V");
    std::fprintf(stderr, "note: --ulysses-degree all skips u = %d for N_c = %d: %s\n", u, n_c,
                 why.c_str());
  }
}

}  // namespace

std::vector<CaseSpec> ulysses_cases(BenchContext& ctx, const UlyssesSweep& sweep) {
  const int world = ctx.mpi.size(), rank = ctx.mpi.rank();
  const auto order = one_mesh_order(ctx.opts.order, "ulysses");
  make_attention_engine(ctx.device, ctx.dtype, sweep.attn_kernel);  // refuses what cannot run
  if (ctx.backend == Backend::cuda && sweep.grad_dtype == DType::fp64)
    for (Pass p : sweep.passes)
      if (p == Pass::fwd_bwd)
        throw UsageError(
            "--grad-dtype fp64: the cuda backend accumulates and sends gradient "
            "partial sums in fp32 or bf16");
  std::vector<UlyssesConfig> configs;
  for (int cp_flag : sweep.cp) {
    const int n_c = axis_mesh(MeshAxis::cp, cp_flag, world, "--cp").shape.cp;
    const std::vector<int> degrees =
        sweep.degrees.empty() ? allowed_degrees(n_c, sweep) : sweep.degrees;
    if (sweep.degrees.empty() && rank == 0) note_skipped_degrees(n_c, sweep, degrees);
    for (ring::Variant rv : sweep.ring_variants)
      ring::validate_variant_backend(rv, ctx.backend);
    for (int u : degrees)
      for (ring::Variant ring_variant : sweep.ring_variants)
        for (Pass pass : sweep.passes)
          for (std::int64_t seq : sweep.seq)
            for (bool causal : sweep.causal)
              for (ring::Layout layout : sweep.layouts) {
                UlyssesConfig cfg;
                cfg.s = sweep.seq_per_rank ? seq * n_c : seq;
                cfg.n_c = n_c;
                cfg.u = u;
                cfg.layout = n_c / u > 1 ? layout : ring::Layout::contiguous;
                cfg.ring_variant = n_c / u > 1 ? ring_variant : ring::Variant::ring;
                cfg.causal = causal;
                cfg.heads = sweep.heads;
                cfg.kv_heads = sweep.kv_heads;
                cfg.head_dim = sweep.head_dim;
                cfg.batch = sweep.batch;
                cfg.kv_replicate = sweep.kv_replicate;
                cfg.dtype = ctx.dtype;
                cfg.pass = pass;
                cfg.grad_dtype = sweep.grad_dtype;
                if (sweep.docs) attach_documents(cfg, *sweep.docs, ctx.opts.seed);
                validate(cfg);
                bool seen =
                    false;  // plain Ulysses has no ring layout: one case, not one per layout
                for (const auto& c : configs)
                  seen |= c.case_name() == cfg.case_name();
                if (seen) continue;
                const auto block = static_cast<std::size_t>(cfg.tokens_per_rank() * cfg.batch *
                                                            cfg.heads_per_rank() * cfg.head_dim);
                if (block > ctx.comm.max_count())
                  throw UsageError(
                      cfg.case_name() + ": an all-to-all block of " + std::to_string(block) +
                      " elements is above this transport's limit; use --transport nccl");
                const std::int64_t need =
                    ring::RingAttention::estimate_bytes(cfg.ring_config()) +
                    (sim::modeled()  // the all-to-all buffers are placeholders there
                         ? 0
                         : 6 * static_cast<std::int64_t>(block * cfg.u * dtype_size(cfg.dtype)));
                if (static_cast<double>(need) >
                    0.9 * static_cast<double>(ctx.device.memory_available()))
                  throw UsageError(
                      cfg.case_name() + " needs about " + std::to_string(need >> 20) +
                      " MiB per rank, more than is available; use a smaller --seq or --batch");
                configs.push_back(cfg);
              }
  }
  // Each N_c's CP mesh, its Ulysses and ring sub-groups per u made before the cases, once
  // (collective: every rank walks the same configurations in the same order).
  std::vector<CaseSpec> specs;
  for (const UlyssesConfig& cfg : configs) {
    DeviceMesh& mesh = ctx.meshes.get(axis_mesh(MeshAxis::cp, cfg.n_c, world, "--cp", order).shape);
    const Groups groups{&mesh.cp_ulysses(cfg.u), &mesh.cp_ring(cfg.u)};
    CaseSpec spec;
    spec.name = cfg.case_name();
    spec.params = {
        {"u", std::int64_t{cfg.u}},
        {"n_c", std::int64_t{cfg.n_c}},
        {"ring_degree", std::int64_t{cfg.ring_degree()}},
        {"method", std::string(cfg.u == cfg.n_c ? "ulysses"
                               : cfg.u == 1     ? "ring"
                                                : "hybrid")},
        {"layout", std::string(ring::layout_name(cfg.layout))},
        {"ring_variant", std::string(ring::variant_name(cfg.ring_variant))},
        {"causal", std::int64_t{cfg.causal ? 1 : 0}},
        {"dtype", std::string(dtype_name(cfg.dtype))},
        {"s", cfg.s},
        {"tokens_per_rank", cfg.tokens_per_rank()},
        {"heads", std::int64_t{cfg.heads}},
        {"kv_heads", std::int64_t{cfg.kv_heads}},
        {"kv_replicated", std::int64_t{cfg.replicating() ? 1 : 0}},
        {"head_dim", std::int64_t{cfg.head_dim}},
        {"batch", cfg.batch},
        {"attn_kernel_choice", std::string(kernels::attn_kernel_choice_name(sweep.attn_kernel))}};
    spec.make = [&ctx, groups, cfg, k = sweep.attn_kernel] {
      return std::make_unique<UlyssesCase>(ctx, groups, cfg, k);
    };
    if (cfg.docs) {
      spec.params.emplace_back("docs", cfg.docs_spec);
      spec.params.emplace_back("docs_count", cfg.docs->count());
      if (cfg.ring_degree() > 1 && cfg.layout == ring::Layout::balanced)
        spec.params.emplace_back(
            "balanced_chunk",
            ring::balanced_min_chunk(cfg.ring_config().c, sweep.docs->balanced_chunk));
    }
    spec.console_counters = {"bytes_sent_per_rank", "pred_bytes_sent_per_rank"};
    if (cfg.backward()) {
      spec.params.emplace_back("pass", std::string(pass_name(cfg.pass)));
      spec.params.emplace_back("grad_dtype", std::string(dtype_name(cfg.grad_dtype)));
    }
    specs.push_back(std::move(spec));
  }
  return specs;
}

void print_ulysses_table(const std::vector<CaseRecord>& records) {
  if (records.empty()) return;
  std::printf(
      "\nUlysses, hybrids and ring (median step = max over ranks; phases: medians; bytes per "
      "rank)\n");
  std::printf("%-42s %10s %9s %9s %10s %9s %9s %12s %12s %12s %12s %6s\n", "case", "step_us",
              "pack_us", "a2a_in", "attn_us", "a2a_out", "unpack", "a2a_bytes", "(pred)",
              "ring_bytes", "(pred)", "check");
  auto us = [](const CaseRecord& r, const char* n) {
    const double v = attr_number(r, n);
    return std::isnan(v) ? 0.0 : v * 1e6;
  };
  for (const auto& r : records) {
    const double passed = attr_number(r, "check_passed");
    std::printf("%-42s %10.1f %9.1f %9.1f %10.1f %9.1f %9.1f %12.0f %12.0f %12.0f %12.0f %6s\n",
                r.name.c_str(), us(r, "time_median_s"), us(r, "phase_pack_median_s"),
                us(r, "phase_a2a_q_median_s") + us(r, "phase_a2a_k_median_s") +
                    us(r, "phase_a2a_v_median_s"),
                us(r, "phase_attention_median_s"), us(r, "phase_a2a_out_median_s"),
                us(r, "phase_unpack_median_s"), attr_number(r, "ulysses_bytes_sent_per_rank"),
                attr_number(r, "pred_ulysses_bytes_sent_per_rank"),
                attr_number(r, "ring_bytes_sent_per_rank"),
                attr_number(r, "pred_ring_bytes_sent_per_rank"),
                passed == 1  ? "ok"
                : passed < 0 ? "off"
                             : "FAIL");
  }
  ring::print_documents_table(records);
}

}  // namespace suite::ulysses
