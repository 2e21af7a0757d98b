#include "bench/sp_tp/layer_cases.hpp"

#include <cstdlib>
#include <memory>

#include "bench/sp_tp/layer_check.hpp"
#include "bench/sp_tp/layer_ops.hpp"
#include "bench/sp_tp/transformer_layer.hpp"
#include "common/device/attention_select.hpp"
#include "common/harness/errors.hpp"

namespace suite::sp_tp {
namespace {

constexpr std::int64_t kMaxSaved = 1 << 20;  // elements per rank and tensor, as --help says

class LayerCase final : public BenchCase {
 public:
  LayerCase(BenchContext& ctx, LayerConfig cfg, Variant v) : ctx_(ctx), cfg_(cfg), variant_(v) {}

  void setup() override {
    try {
      ops_ = make_layer_ops(ctx_.device, cfg_.dtype, cfg_.attn_kernel);
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());  // e.g. --attn-kernel cudnn where cuDNN cannot start
    }
    layer_ = std::make_unique<TransformerLayer>(cfg_, variant_, ctx_.device, ctx_.comm, *ops_);
  }

  // fwd: the forward's phases "compute" and "comm". fwd_bwd: the passes as phases "fwd" and
  // "bwd", each split into "<pass>_compute" and "<pass>_comm" (bwd_comm: the exposed part).
  void step(PhaseTimer& phases) override {
    if (!cfg_.backward()) return layer_->forward(phases);
    // The previous step's overlapped exchanges (complete: the harness synchronised since).
    record_exchanges();
    phases.time("fwd", [&] { layer_->forward(phases, "fwd_"); });
    phases.time("bwd", [&] { layer_->backward(phases, cfg_.bwd_overlap); });
    bwd_peak_ = layer_->memory().peak_bytes();
  }

  CheckOutcome check() override {
    record_exchanges();  // the last timed step's, before the check's own runs add theirs
    drained_ = true;
    check_ = check_layer(ctx_, *layer_, *ops_, cfg_.backward(), cfg_.bwd_overlap);
    layer_->take_exchanges();
    return check_.outcome;
  }

  void report(const Measurement& m, CaseRecord& rec) override {
    if (!drained_) record_exchanges();
    // The warm-up steps' transfers are not the timed ones'.
    const auto warm = static_cast<std::size_t>(std::max(0, ctx_.opts.warmup));
    exchanges_.erase(exchanges_.begin(), exchanges_.begin() + static_cast<std::ptrdiff_t>(std::min(
                                                                  warm, exchanges_.size())));
    report_layer({cfg_, variant_, *layer_, *ops_, check_, exchanges_, bwd_peak_,
                  ctx_.backend == Backend::cpu},
                 m, rec);
    if (ctx_.mpi.rank() == 0 && cfg_.tp_overlap.kind != TpOverlap::none) report_ring_overlap(rec);
  }

  // --tp-overlap ring (METHODS.md 1.1): h/t beside each op's GEMM width c, whose threshold is
  // h/t >= e F / (2 c W) for the rates F and W of the machine (model --section tp_overlap
  // prints it); the forward's exposed communication is the phase fwd_exposed_comm.
  void report_ring_overlap(CaseRecord& rec) const {
    const double h = static_cast<double>(cfg_.h), ffn = static_cast<double>(cfg_.ffn());
    rec.attrs.emplace_back("h_over_t", h / cfg_.t);
    rec.attrs.emplace_back("overlap_c_qkv", 3.0);  // the layer is multi-head: n_kv = a
    rec.attrs.emplace_back("overlap_c_out_proj", 1.0);
    rec.attrs.emplace_back("overlap_c_fc1", ffn / h);
    rec.attrs.emplace_back("overlap_c_fc2", ffn / h);
    if (ctx_.backend == Backend::cpu)
      rec.attrs.emplace_back(
          "tp_overlap_note",
          std::string("CPU backend: MPI moves data only inside its calls, polled here between "
                      "pieces of each block's GEMM. Ranks on one host exchange through shared "
                      "memory, where the cores that run the GEMMs also copy the blocks, so the "
                      "ring cannot hide its transfers there; over a network (e.g. "
                      "suite shaped-link) the kernel and NIC move them and part hides"));
  }

  // Input and output rows of this rank; every weight as the whole global tensor (the same on
  // every rank); with the backward also the output gradient fed in, the input gradient (rows
  // of this rank) and every weight gradient (whole).
  std::vector<SavedTensor> tensors() override {
    const std::int64_t local_rows = variant_ == Variant::tp ? cfg_.rows() : cfg_.rows() / cfg_.t;
    std::int64_t widest = local_rows * cfg_.h;
    for (const auto& s : layer_->slices())
      widest = std::max(widest, s.global_rows * s.global_cols);
    if (widest > kMaxSaved) return {};
    std::vector<SavedTensor> out = {{"input", layer_->local_input()},
                                    {"output", layer_->local_output()}};
    for (std::size_t i = 0; i < layer_->slices().size(); ++i)
      out.push_back({"weight_" + layer_->slices()[i].name, layer_->gathered_param(i, false)});
    if (!cfg_.backward()) return out;
    out.push_back({"d_output", layer_->local_d_output()});
    out.push_back({"grad_input", layer_->local_grad_input()});
    for (std::size_t i = 0; i < layer_->slices().size(); ++i)
      out.push_back({"grad_" + layer_->slices()[i].name, layer_->gathered_param(i, true)});
    return out;
  }

 private:
  void record_exchanges() {
    const auto log = layer_->take_exchanges();
    if (log.empty()) return;
    StepExchanges step;
    for (const auto& e : log) {
      step.seconds += e.seconds;
      step.total += 1;
      step.done_early += e.completed_in_progress ? 1 : 0;
    }
    exchanges_.push_back(step);
  }

  BenchContext& ctx_;
  LayerConfig cfg_;
  Variant variant_;
  std::unique_ptr<LayerOps> ops_;
  std::unique_ptr<TransformerLayer> layer_;
  LayerCheckResult check_;
  std::vector<StepExchanges> exchanges_;
  std::int64_t bwd_peak_ = 0;
  bool drained_ = false;
};

// --attn-kernel cudnn where it cannot work: refused before any case runs.
void check_attn_kernel(const BenchContext& ctx, const LayerConfig& cfg) {
  if (cfg.attn_kernel != kernels::AttnKernelChoice::cudnn) return;
  if (ctx.device.backend() != Backend::cuda)
    throw UsageError("--attn-kernel cudnn needs --backend cuda");
  if (cfg.dtype != DType::bf16)
    throw UsageError("--attn-kernel cudnn runs bf16 (--dtype bf16), not " +
                     std::string(dtype_name(cfg.dtype)));
#if !defined(SUITE_HAVE_CUDNN)
  throw UsageError("--attn-kernel cudnn: this build has no cuDNN attention");
#endif
}

std::string case_name(const LayerConfig& cfg, Variant v) {
  std::string name = "layer_" + std::string(variant_name(v)) + "_" +
                     std::string(dtype_name(cfg.dtype)) + "_s" + std::to_string(cfg.s) + "_b" +
                     std::to_string(cfg.b) + "_h" + std::to_string(cfg.h) + "_a" +
                     std::to_string(cfg.heads) + "_ff" + std::to_string(cfg.ffn()) +
                     (cfg.fused_attention ? "_flash" : "_unfused") + (cfg.causal ? "_causal" : "");
  if (v == Variant::tp_sp && cfg.tp_overlap.kind != TpOverlap::none)
    name += "_ov" + cfg.tp_overlap.tag();
  if (cfg.backward())
    name += v == Variant::tp_sp && !cfg.bwd_overlap ? "_fwd_bwd_nooverlap" : "_fwd_bwd";
  return name;
}

CaseSpec make_spec(BenchContext& ctx, const LayerConfig& cfg, Variant v) {
  CaseSpec spec;
  spec.name = case_name(cfg, v);
  spec.params = {{"mode", std::string("layer")},
                 {"variant", std::string(variant_name(v))},
                 {"attention", std::string(cfg.fused_attention ? "fused" : "unfused")},
                 {"dtype", std::string(dtype_name(cfg.dtype))},
                 {"s", cfg.s},
                 {"b", cfg.b},
                 {"h", cfg.h},
                 {"heads", cfg.heads},
                 {"d_ff", cfg.ffn()},
                 {"t", std::int64_t{cfg.t}},
                 {"dropout", static_cast<double>(cfg.dropout)},
                 {"causal", std::int64_t{cfg.causal ? 1 : 0}},
                 {"attn_choice", std::string(kernels::attn_kernel_choice_name(cfg.attn_kernel))}};
  spec.console_counters = {"activation_bytes", "pred_activation_bytes",
                           "layer_comm_bytes_per_rank"};
  if (v == Variant::tp_sp && cfg.tp_overlap.kind != TpOverlap::none)
    spec.params.emplace_back("tp_overlap", cfg.tp_overlap.name());
  // Forward cases keep the parameters they always had (compare pairs them with baselines).
  if (cfg.backward()) {
    spec.params.emplace_back("pass", std::string(pass_name(cfg.pass)));
    if (v == Variant::tp_sp)
      spec.params.emplace_back("bwd_overlap", std::int64_t{cfg.bwd_overlap ? 1 : 0});
    spec.console_counters = {"activation_bytes", "bwd_peak_bytes", "fwd_bwd_comm_bytes_per_rank"};
  }
  spec.make = [&ctx, cfg, v] { return std::make_unique<LayerCase>(ctx, cfg, v); };
  return spec;
}

}  // namespace

std::optional<std::string> backward_unavailable(BenchContext& ctx, const LayerConfig& cfg) {
  if (!cfg.backward() || !cfg.fused_attention) return std::nullopt;  // unfused: GEMMs + rows
  // Test hook: an attention engine without a backward, to prove the refusal path.
  if (std::getenv("SUITE_TEST_NO_ATTN_BACKWARD"))
    return "the attention engine has no backward (SUITE_TEST_NO_ATTN_BACKWARD)";
  try {
    auto engine = make_attention_engine(ctx.device, cfg.dtype, cfg.attn_kernel);
    (void)engine->grad_type();
  } catch (const std::exception& e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

std::vector<CaseSpec> layer_cases(BenchContext& ctx, const LayerSweep& sweep) {
  std::vector<CaseSpec> specs;
  for (bool causal : sweep.causal)
    for (bool fused : sweep.fused)
      for (Pass pass : sweep.passes)
        for (Variant v : sweep.variants)
          for (const TpOverlapMode& tp_overlap : sweep.tp_overlap)
            for (bool overlap : sweep.bwd_overlap) {
              // Overlap concerns TP+SP's backward only: one case otherwise.
              if ((pass == Pass::fwd || v == Variant::tp) && overlap != sweep.bwd_overlap.front())
                continue;
              // So does the forward's (TP has no collective beside a GEMM to cut): one TP case.
              if (v == Variant::tp && tp_overlap != sweep.tp_overlap.front()) continue;
              // Under ring or chunks the backward's collectives have their own schedule:
              // --bwd-overlap moot.
              if (tp_overlap.kind != TpOverlap::none && overlap != sweep.bwd_overlap.front())
                continue;
              LayerConfig cfg = sweep.base;
              cfg.t = ctx.comm.size();
              cfg.dtype = ctx.dtype;
              cfg.seed = ctx.opts.seed;
              cfg.fused_attention = fused;
              cfg.causal = causal;
              cfg.pass = pass;
              cfg.bwd_overlap = overlap;
              cfg.tp_overlap = v == Variant::tp ? TpOverlapMode{} : tp_overlap;
              validate(cfg);
              check_attn_kernel(ctx, cfg);
              if (auto why = backward_unavailable(ctx, cfg))
                throw UsageError("--pass fwd_bwd: the " + std::string(fused ? "fused" : "unfused") +
                                 " attention path cannot run its backward here: " + *why);
              const std::int64_t per_call = cfg.rows() * cfg.h / (v == Variant::tp ? 1 : cfg.t);
              if (static_cast<std::size_t>(per_call) > ctx.comm.max_count())
                throw UsageError("layer: one collective of " + std::to_string(per_call) +
                                 " elements is above this transport's limit of " +
                                 std::to_string(ctx.comm.max_count()) +
                                 "; use --transport nccl or a smaller s*b*h");
              specs.push_back(make_spec(ctx, cfg, v));
            }
  return specs;
}

}  // namespace suite::sp_tp
