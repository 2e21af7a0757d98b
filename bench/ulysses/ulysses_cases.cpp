#include "bench/ulysses/ulysses_cases.hpp"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include "bench/ring_attention/attention_inputs.hpp"
#include "bench/ring_attention/doc_report.hpp"
#include "bench/ring_attention/global_order.hpp"
#include "bench/ring_attention/group_cast.hpp"
#include "bench/ring_attention/ring_efficiency.hpp"
#include "bench/ring_attention/ring_ideal.hpp"
#include "bench/ring_attention/ring_pass_report.hpp"
#include "bench/ring_attention/ring_reference.hpp"
#include "bench/ulysses/ulysses_attention.hpp"
#include "common/device/attention_select.hpp"
#include "common/harness/errors.hpp"
#include "common/transport/group_comm.hpp"
#include "common/formulas/model.hpp"
#include "common/transport/mpi_env.hpp"
#include "common/transport/rank_gather.hpp"
#include "common/results/record_access.hpp"
#include "common/sim/sim.hpp"

namespace suite::ulysses {
namespace {

constexpr std::int64_t kMaxSavedPerRank = 1 << 20;  // elements, as --help says

// The communicators one (N_c, u) needs: the Ulysses group and the ring across groups.
struct Groups {
  std::shared_ptr<Comm> ulysses, ring;
};

// Median of a phase (max over ranks per step), NaN when the step has no such phase.
double phase_median(const Measurement& m, const std::string& name) {
  for (const auto& [n, v] : m.phase_median_s)
    if (n == name) return v;
  return NAN;
}

class UlyssesCase final : public BenchCase {
 public:
  UlyssesCase(BenchContext& ctx, Groups groups, UlyssesConfig cfg, kernels::AttnKernelChoice k)
      : ctx_(ctx), groups_(std::move(groups)), cfg_(cfg), choice_(k) {}

  void setup() override {
    engine_ = make_attention_engine(ctx_.device, cfg_.dtype, choice_);
    method_ = std::make_unique<UlyssesAttention>(cfg_, ctx_.device, *groups_.ulysses, *groups_.ring,
                                                 *engine_, ctx_.opts.seed);
  }

  void step(PhaseTimer& phases) override {
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

  CheckOutcome check() override {
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

  // The runs of this rank's rows that hold tokens (doc_zigzag's padding slots hold none).
  std::vector<ring::Segment> token_rows() const {
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

  void report(const Measurement& m, CaseRecord& rec) override {
    const double e = static_cast<double>(dtype_size(cfg_.dtype));
    const double t = static_cast<double>(cfg_.tokens_per_rank()),
                 b = static_cast<double>(cfg_.batch);
    const double u = cfg_.u, d = cfg_.head_dim;
    const double h = static_cast<double>(cfg_.heads) * d,
                 g = static_cast<double>(cfg_.heads) / cfg_.kv_heads;
    // Each all-to-all keeps one of u blocks: Q and O carry a/u heads per block, K and V the
    // K/V heads a rank attends with (n_kv/u, or one replicated head).
    const double q_block = t * b * cfg_.heads_per_rank() * d * e;
    const double kv_block = t * b * cfg_.kv_heads_per_rank() * d * e;
    const double pred_uly = (u - 1) * (2 * q_block + 2 * kv_block);
    double pred_ring = (cfg_.ring_degree() - 1) * 2.0 * static_cast<double>(cfg_.group_tokens()) *
                       b * cfg_.kv_heads_per_rank() * d * e;
    auto& a = rec.attrs;
    const ring::RingAttention& part = method_->ring_part();
    if (cfg_.ring_variant == ring::Variant::groupcast) {
      a.emplace_back("groupcast_schedule", part.group_cast_active()
                                               ? std::string("groupcast")
                                               : "ring: " + part.group_cast_fallback());
      if (part.group_cast_active()) pred_ring = group_cast_bytes(false, e, 0);
    }
    a.emplace_back(
        "ulysses_bytes_sent_per_rank",
        static_cast<double>(all_reduce_max(std::vector<std::int64_t>{ulysses_bytes_})[0]));
    a.emplace_back("pred_ulysses_bytes_sent_per_rank", pred_uly);
    // METHODS.md's form (no replication): 4 (u-1)/u * 2 (u t) h / u for MHA, K and V / g.
    a.emplace_back("pred_ulysses_bytes_no_replication",
                   model::ulysses_bytes_per_layer(u * t, h, cfg_.u, g, e) * b);
    a.emplace_back("ring_bytes_sent_per_rank",
                   static_cast<double>(all_reduce_max(std::vector<std::int64_t>{ring_bytes_})[0]));
    a.emplace_back("pred_ring_bytes_sent_per_rank", pred_ring);
    a.emplace_back("bytes_sent_per_rank",
                   static_cast<double>(
                       all_reduce_max(std::vector<std::int64_t>{ulysses_bytes_ + ring_bytes_})[0]));
    a.emplace_back("pred_bytes_sent_per_rank", pred_uly + pred_ring);
    // nccl-tests conventions: algbw = bytes per rank incl. its own block / time; busbw x (u-1)/u.
    const double f = model::busbw_factor_rs_ag_a2a(cfg_.u);
    for (const auto& [name, block] : {std::pair<const char*, double>{"q", q_block},
                                      {"k", kv_block},
                                      {"v", kv_block},
                                      {"out", q_block}}) {
      const double algbw = u * block / phase_median(m, std::string("a2a_") + name) / 1e9;
      a.emplace_back(std::string("a2a_") + name + "_algbw_GBps", algbw);
      a.emplace_back(std::string("a2a_") + name + "_busbw_GBps", algbw * f);
    }
    a.emplace_back("attn_kernel", engine_->name());
    a.emplace_back("attn_library", engine_->library_version());
    a.emplace_back("check_tolerance", ring::reference_tolerance(cfg_.dtype));
    if (cfg_.backward()) report_backward(m, rec, q_block / e, kv_block / e);
    // Packed documents: the ring part's balance (plain Ulysses: every rank attends over the
    // whole pack for its heads, equal work by construction).
    const ring::WorkTotals totals =
        ring::report_documents(cfg_.ring_config(), method_->ring_part(), method_->positions(), rec);
    if (cfg_.docs) report_against_ideal(m, totals, rec);
    const int ranks = ctx_.mpi.size(), rank = ctx_.mpi.rank();
    rec.int_tables.push_back({"ulysses_bytes_sent", 1, static_cast<std::size_t>(ranks),
                              gather_int(ulysses_bytes_, ranks, rank)});
    rec.int_tables.push_back({"ring_bytes_sent", 1, static_cast<std::size_t>(ranks),
                              gather_int(ring_bytes_, ranks, rank)});
  }

  // Packed documents: the ring part's visible pairs per rank and round (plain Ulysses: one
  // round, the whole pack for this rank's heads), and the case's pass against the ideal, one
  // rank's attention of the whole pack for the a / u heads of a ring over its N_c / u ranks
  // (ring_attention's ideal for the ring part's config), with its factors: balance (counted),
  // pair rate (the attention phases' pairs per second over the ideal's; the ring part's
  // transfers run inside those phases, so what they expose lands here) and exchange (the
  // attention phases over the pass: what the all-to-alls, packing and casts add). Names as
  // ring_attention's, `step_eff_*` for the factors of a --pass fwd_bwd step.
  // `totals`: the ring part's, as report_documents counted them.
  void report_against_ideal(const Measurement& m, const ring::WorkTotals& totals, CaseRecord& rec) {
    const ring::RingConfig rc = cfg_.ring_config();
    const std::vector<std::int64_t> work = method_->ring_part().work_pairs();
    const int ranks = ctx_.mpi.size(), rank = ctx_.mpi.rank();
    rec.int_tables.push_back({"round_work_pairs", work.size(), static_cast<std::size_t>(ranks),
                              gather_int_columns(work, ranks, rank)});
    const double mean = static_cast<double>(totals.sum) / ranks;
    const double most = static_cast<double>(totals.most);
    double t_attention = phase_median(m, "attention");
    if (cfg_.backward()) t_attention += phase_median(m, "bwd_attention");
    const double flops_per_pair = (cfg_.backward() ? 14.0 : 4.0) * rc.head_dim * rc.heads;
    const double flops_per_s = flops_per_pair * most / t_attention;
    const ring::IdealTimes ideal = ring::measure_ideal(rc, ctx_.device, *engine_, flops_per_s,
                                                       cfg_.backward(), ring::kIdealIterations);
    auto& a = rec.attrs;
    if (ideal.skipped) {
      a.emplace_back("ideal_note", "skipped: " + ideal.why_skipped);
      return;
    }
    const double ideal_s = ideal.fwd_s + ideal.bwd_s, t = m.step.median;
    a.emplace_back("ideal_time_fwd_s", ideal.fwd_s);
    if (cfg_.backward()) a.emplace_back("ideal_time_bwd_s", ideal.bwd_s);
    a.emplace_back(cfg_.backward() ? "efficiency_vs_ideal_fwd_bwd" : "efficiency_vs_ideal_fwd",
                   ideal_s / rc.n_c / t);
    const ring::EfficiencyFactors f =
        ring::efficiency_factors(mean, most, rc.n_c, ideal_s, t_attention, t);
    const std::string prefix = cfg_.backward() ? "step_" : "";
    a.emplace_back(prefix + "eff_balance", f.balance);
    a.emplace_back(prefix + "eff_pair_rate", f.pair_rate);
    a.emplace_back(prefix + "eff_exchange", f.exchange);
  }

  // The group-cast ring part's bytes from the layout (rank 0 counts every rank's rows, as
  // model --section varlen does; NaN elsewhere: only rank 0 writes its record): the busiest
  // rank's in a forward (its rows, e bytes an element), or in a backward (its rows again and
  // the partial sums of the rows it received, e_g bytes an element).
  double group_cast_bytes(bool backward, double e, double e_g) const {
    if (ctx_.mpi.rank() != 0) return NAN;
    const ring::GroupCastTraffic t = ring::group_cast_traffic(cfg_.ring_config());
    const double row = 2.0 * static_cast<double>(cfg_.ring_config().kv_row());
    double most = 0;
    for (int r = 0; r < t.n_c; ++r)
      most = std::max(most, static_cast<double>(t.sent(r)) * row * e +
                                (backward ? static_cast<double>(t.received(r)) * row * e_g : 0.0));
    return most;
  }

  // The Ulysses group and the ring across groups, where they are not the job's communicator
  // (the harness counts that one), each once.
  ByteCounts own_comm_bytes() const override {
    ByteCounts total;
    for (const Comm* c : {groups_.ulysses.get(), groups_.ring.get()}) {
      if (c == &ctx_.comm || (c == groups_.ring.get() && c == groups_.ulysses.get())) continue;
      total.sent += c->bytes().sent;
      total.recv += c->bytes().recv;
    }
    return total;
  }

  // The backward: dO's all-to-all carries what Q's did, dQ, dK and dV what the output, K and V
  // did (in the types they travel in); the hybrid's ring moves K/V and the dK/dV partial sums.
  void report_backward(const Measurement& m, CaseRecord& rec, double q_elems, double kv_elems) {
    const double u = cfg_.u, e = static_cast<double>(dtype_size(cfg_.dtype));
    const double e_kv = static_cast<double>(dtype_size(method_->dkv_a2a_type()));
    const double pred_uly = (u - 1) * (2 * q_elems * e + 2 * kv_elems * e_kv);
    const ring::RingConfig rc = cfg_.ring_config();
    const model::Ring shape{static_cast<double>(rc.heads) * rc.head_dim,
                            static_cast<double>(rc.c),
                            rc.n_c,
                            static_cast<double>(rc.group()),
                            e,
                            rc.causal};
    const double e_g = static_cast<double>(dtype_size(cfg_.grad_dtype));
    double pred_ring =
        model::ring_bwd_bytes_per_layer(shape, e_g) * static_cast<double>(cfg_.batch);
    if (method_->ring_part().group_cast_active()) pred_ring = group_cast_bytes(true, e, e_g);
    auto max_bytes = [](std::int64_t v) {
      return static_cast<double>(all_reduce_max(std::vector<std::int64_t>{v})[0]);
    };
    auto& a = rec.attrs;
    a.emplace_back("grad_dtype", std::string(dtype_name(cfg_.grad_dtype)));
    a.emplace_back("bwd_dkv_a2a_dtype", std::string(dtype_name(method_->dkv_a2a_type())));
    a.emplace_back("bwd_ulysses_bytes_sent_per_rank", max_bytes(bwd_ulysses_bytes_));
    a.emplace_back("pred_bwd_ulysses_bytes_sent_per_rank", pred_uly);
    a.emplace_back("bwd_ring_bytes_sent_per_rank", max_bytes(bwd_ring_bytes_));
    a.emplace_back("pred_bwd_ring_bytes_sent_per_rank", pred_ring);
    a.emplace_back("bwd_bytes_sent_per_rank", max_bytes(bwd_ulysses_bytes_ + bwd_ring_bytes_));
    a.emplace_back("pred_bwd_bytes_sent_per_rank", pred_uly + pred_ring);
    a.emplace_back("grad_check_tolerance", ring::gradient_tolerance(cfg_.dtype, cfg_.grad_dtype));
    if (!grads_.skipped) {
      a.emplace_back("check_err_dq", grads_.max_err_dq);
      a.emplace_back("check_err_dk", grads_.max_err_dk);
      a.emplace_back("check_err_dv", grads_.max_err_dv);
    }
    const double f = model::busbw_factor_rs_ag_a2a(cfg_.u);
    for (const auto& [name, bytes] : {std::pair<const char*, double>{"do", q_elems * e},
                                      {"dq", q_elems * e},
                                      {"dk", kv_elems * e_kv},
                                      {"dv", kv_elems * e_kv}}) {
      const double t = phase_median(m, std::string("bwd_a2a_") + name);
      const double algbw = u * bytes / t / 1e9;
      a.emplace_back(std::string("bwd_a2a_") + name + "_algbw_GBps", algbw);
      a.emplace_back(std::string("bwd_a2a_") + name + "_busbw_GBps", algbw * f);
    }
    const int ranks = ctx_.mpi.size(), rank = ctx_.mpi.rank();
    rec.int_tables.push_back({"bwd_ulysses_bytes_sent", 1, static_cast<std::size_t>(ranks),
                              gather_int(bwd_ulysses_bytes_, ranks, rank)});
    rec.int_tables.push_back({"bwd_ring_bytes_sent", 1, static_cast<std::size_t>(ranks),
                              gather_int(bwd_ring_bytes_, ranks, rank)});
  }

  // Q, K, V and O of this rank's share of its group's sequence, in global token order (with
  // the backward: dO, dQ, dK and dV too).
  std::vector<SavedTensor> tensors() override {
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

 private:
  BenchContext& ctx_;
  Groups groups_;
  UlyssesConfig cfg_;
  kernels::AttnKernelChoice choice_;
  std::unique_ptr<kernels::AttentionEngine> engine_;
  std::unique_ptr<UlyssesAttention> method_;
  std::int64_t ulysses_bytes_ = 0, ring_bytes_ = 0;
  std::int64_t bwd_ulysses_bytes_ = 0, bwd_ring_bytes_ = 0;
  ring::GradientComparison grads_;
};

std::shared_ptr<Comm> borrow(Comm& c) {
  return std::shared_ptr<Comm>(&c, [](Comm*) {});
}

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
  make_attention_engine(ctx.device, ctx.dtype, sweep.attn_kernel);  // refuses what cannot run
  if (ctx.backend == Backend::cuda && sweep.grad_dtype == DType::fp64)
    for (Pass p : sweep.passes)
      if (p == Pass::fwd_bwd)
        throw UsageError(
            "--grad-dtype fp64: the cuda backend accumulates and sends gradient "
            "partial sums in fp32 or bf16");
  std::vector<UlyssesConfig> configs;
  for (int cp_flag : sweep.cp) {
    const int n_c = resolve_group_size(cp_flag, world, "--cp");
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
  // Communicators per (N_c, u), created once and shared by the cases (collective: every rank
  // walks the same configurations in the same order).
  std::map<std::pair<int, int>, Groups> groups;
  std::map<int, std::shared_ptr<Comm>> by_size;
  std::vector<CaseSpec> specs;
  for (const UlyssesConfig& cfg : configs) {
    auto key = std::make_pair(cfg.n_c, cfg.u);
    if (!groups.count(key)) {
      Groups g;
      if (!by_size.count(cfg.u))
        by_size[cfg.u] =
            cfg.u == world ? borrow(ctx.comm) : std::shared_ptr<Comm>(make_group_comm(ctx, cfg.u));
      g.ulysses = by_size[cfg.u];
      // The ring joins the members with the same index in every Ulysses group of this N_c group.
      g.ring = cfg.u == 1 && cfg.n_c == world ? borrow(ctx.comm)
                                              : std::shared_ptr<Comm>(make_split_comm(
                                                    ctx, (rank / cfg.n_c) * cfg.u + rank % cfg.u));
      groups[key] = g;
    }
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
    spec.make = [&ctx, g = groups[key], cfg, k = sweep.attn_kernel] {
      return std::make_unique<UlyssesCase>(ctx, g, cfg, k);
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
