#include "bench/sp_tp/layer_cases.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "bench/sp_tp/layer_ops.hpp"
#include "bench/sp_tp/transformer_layer.hpp"
#include "common/errors.hpp"
#include "common/model.hpp"
#include "common/mpi_env.hpp"
#include "common/record_access.hpp"

namespace suite::sp_tp {
namespace {

// Allowed difference between the gathered SP output and the TP output. They differ only in
// the summation order of the all-reduce vs the reduce-scatter (the library picks the
// algorithm), so the bound is a few rounding units of the type, scaled by the values (~1).
double tolerance(DType t) {
  switch (t) {
    case DType::fp64:
      return 1e-10;
    case DType::fp32:
      return 1e-4;
    case DType::bf16:
      return 6e-2;
  }
  return 0;
}

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

  void step(PhaseTimer& phases) override { layer_->forward(phases); }

  // SP and TP on the same weights, inputs and dropout masks must give the same output.
  // The other variant needs as much device memory again; where any rank lacks it the check
  // is skipped on all ranks together (before any collective), not failed.
  CheckOutcome check() override {
    Variant other_v = variant_ == Variant::tp ? Variant::tp_sp : Variant::tp;
    std::unique_ptr<TransformerLayer> other;
    std::optional<std::string> no_memory;
    try {
      other = std::make_unique<TransformerLayer>(cfg_, other_v, ctx_.device, ctx_.comm, *ops_);
    } catch (const std::exception& e) {
      no_memory = e.what();
    }
    if (auto why = agree_on_error(no_memory))
      return {true, 0,
              "no memory for the " + std::string(variant_name(other_v)) + " reference: " + *why,
              true};
    PhaseTimer scratch(ctx_.device);
    scratch.begin_step();
    other->forward(scratch);
    scratch.end_step(false);
    std::vector<double> mine = layer_->gathered_output(), theirs = other->gathered_output();
    CheckOutcome out;
    for (std::size_t i = 0; i < mine.size(); ++i) {
      double err = std::fabs(mine[i] - theirs[i]);
      if (!(err <= out.max_abs_err)) out.max_abs_err = std::isnan(err) ? INFINITY : err;
    }
    out.passed = out.max_abs_err <= tolerance(cfg_.dtype);
    if (!out.passed)
      out.detail = "tp_sp output differs from tp output by " + std::to_string(out.max_abs_err) +
                   " (tolerance " + std::to_string(tolerance(cfg_.dtype)) + ")";
    bit_exact_ = out.max_abs_err == 0;
    checked_ = true;
    return out;
  }

  std::vector<SavedTensor> tensors() override {
    constexpr std::int64_t kMaxSaved = 1 << 20;  // elements per rank, as --help says
    const std::int64_t local_rows = variant_ == Variant::tp ? cfg_.rows() : cfg_.rows() / cfg_.t;
    if (local_rows * cfg_.h > kMaxSaved) return {};
    return {{"input", layer_->local_input()}, {"output", layer_->local_output()}};
  }

  void report(const Measurement& m, CaseRecord& rec) override {
    const double e = static_cast<double>(dtype_size(cfg_.dtype));
    const double measured = static_cast<double>(layer_->ledger_bytes());
    const double predicted = predicted_activation_bytes(cfg_, variant_);
    auto& a = rec.attrs;
    a.emplace_back("activation_bytes", measured);
    a.emplace_back("pred_activation_bytes", predicted);
    a.emplace_back("activation_rel_err", std::fabs(measured - predicted) / predicted);
    a.emplace_back("layer_comm_bytes_per_rank", m.bytes_sent_per_iter);
    a.emplace_back("pred_layer_comm_bytes_per_rank",
                   variant_ == Variant::tp
                       ? model::tp_layer_comm_bytes_per_rank(cfg_.s, cfg_.b, cfg_.h, cfg_.t, e)
                       : model::sp_layer_comm_bytes_per_rank(cfg_.s, cfg_.b, cfg_.h, cfg_.t, e));
    a.emplace_back("check_bit_exact", std::int64_t{checked_ ? (bit_exact_ ? 1 : 0) : -1});
    a.emplace_back("check_tolerance", tolerance(cfg_.dtype));
    // Which attention kernel produced the times (the unfused path is cuBLAS + softmax).
    const auto& engine = ops_->attention_engine();
    a.emplace_back("attn_kernel", cfg_.fused_attention ? engine.name() : std::string("unfused"));
    a.emplace_back("attn_library",
                   cfg_.fused_attention ? engine.library_version() : std::string("suite"));
    a.emplace_back("attn_fallbacks", engine.fallbacks());
    StringList names{"ledger_name", {}}, shapes{"ledger_shape", {}};
    IntTable bytes{"ledger_bytes", 1, 0, {}};
    for (const auto& l : layer_->ledger()) {
      names.values.push_back(l.name);
      std::string shape;
      for (auto d : l.shape)
        shape += (shape.empty() ? "" : "x") + std::to_string(d);
      shapes.values.push_back(shape);
      bytes.values.push_back(l.bytes);
    }
    bytes.cols = bytes.values.size();
    rec.string_lists.push_back(std::move(names));
    rec.string_lists.push_back(std::move(shapes));
    rec.int_tables.push_back(std::move(bytes));
  }

 private:
  BenchContext& ctx_;
  LayerConfig cfg_;
  Variant variant_;
  std::unique_ptr<LayerOps> ops_;
  std::unique_ptr<TransformerLayer> layer_;
  bool bit_exact_ = false, checked_ = false;
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

}  // namespace

double predicted_activation_bytes(const LayerConfig& cfg, Variant v) {
  model::Activation x{static_cast<double>(cfg.s),
                      static_cast<double>(cfg.b),
                      static_cast<double>(cfg.h),
                      static_cast<double>(cfg.heads),
                      cfg.t,
                      static_cast<double>(dtype_size(cfg.dtype)),
                      static_cast<double>(cfg.ffn()) / static_cast<double>(cfg.h)};
  if (v == Variant::tp)
    return cfg.fused_attention ? model::act_bytes_tp_flash(x) : model::act_bytes_tp(x);
  return cfg.fused_attention ? model::act_bytes_tp_sp_flash(x) : model::act_bytes_tp_sp(x);
}

std::vector<CaseSpec> layer_cases(BenchContext& ctx, const LayerSweep& sweep) {
  std::vector<CaseSpec> specs;
  for (bool fused : sweep.fused) {
    for (Variant v : sweep.variants) {
      LayerConfig cfg = sweep.base;
      cfg.t = ctx.comm.size();
      cfg.dtype = ctx.dtype;
      cfg.seed = ctx.opts.seed;
      cfg.fused_attention = fused;
      validate(cfg);
      check_attn_kernel(ctx, cfg);
      const std::int64_t per_call = cfg.rows() * cfg.h / (v == Variant::tp ? 1 : cfg.t);
      if (static_cast<std::size_t>(per_call) > ctx.comm.max_count())
        throw UsageError("layer: one collective of " + std::to_string(per_call) +
                         " elements is above this transport's limit of " +
                         std::to_string(ctx.comm.max_count()) +
                         "; use --transport nccl or a smaller s*b*h");
      CaseSpec spec;
      spec.name = "layer_" + std::string(variant_name(v)) + "_" +
                  std::string(dtype_name(cfg.dtype)) + "_s" + std::to_string(cfg.s) + "_b" +
                  std::to_string(cfg.b) + "_h" + std::to_string(cfg.h) + "_a" +
                  std::to_string(cfg.heads) + "_ff" + std::to_string(cfg.ffn()) +
                  (fused ? "_flash" : "_unfused") + (cfg.causal ? "_causal" : "");
      spec.params = {
          {"mode", std::string("layer")},
          {"variant", std::string(variant_name(v))},
          {"attention", std::string(fused ? "fused" : "unfused")},
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
      spec.make = [&ctx, cfg, v] { return std::make_unique<LayerCase>(ctx, cfg, v); };
      spec.console_counters = {"activation_bytes", "pred_activation_bytes",
                               "layer_comm_bytes_per_rank"};
      specs.push_back(std::move(spec));
    }
  }
  return specs;
}

void print_layer_table(const std::vector<CaseRecord>& records) {
  bool header = false;
  for (const auto& r : records) {
    if (param_text(r, "mode") != "layer") continue;
    if (!header) {
      std::printf(
          "\nTransformer layer forward, TP vs TP+SP (median step = max over ranks; bytes per "
          "rank)\n");
      std::printf("%-8s %-8s %-12s %10s %10s %10s %14s %14s %7s %14s %14s %6s\n", "variant", "attn",
                  "kernel", "step_us", "compute_us", "comm_us", "act_meas", "act_pred", "err%",
                  "comm_meas", "comm_pred", "check");
      header = true;
    }
    const double passed = attr_number(r, "check_passed");
    std::printf("%-8s %-8s %-12s %10.1f %10.1f %10.1f %14.0f %14.0f %7.3f %14.0f %14.0f %6s\n",
                param_text(r, "variant").c_str(), param_text(r, "attention").c_str(),
                param_text(r, "attn_kernel").c_str(), attr_number(r, "time_median_s") * 1e6,
                attr_number(r, "phase_compute_median_s") * 1e6,
                attr_number(r, "phase_comm_median_s") * 1e6, attr_number(r, "activation_bytes"),
                attr_number(r, "pred_activation_bytes"), 100 * attr_number(r, "activation_rel_err"),
                attr_number(r, "layer_comm_bytes_per_rank"),
                attr_number(r, "pred_layer_comm_bytes_per_rank"),
                passed == 1  ? (attr_number(r, "check_bit_exact") == 1 ? "exact" : "ok")
                : passed < 0 ? "off"
                             : "FAIL");
  }
  // The library behind each kernel once (it is long: the loaded file's path).
  std::vector<std::string> seen;
  for (const auto& r : records) {
    if (param_text(r, "mode") != "layer") continue;
    const std::string lib = param_text(r, "attn_library");
    if (lib.empty() || lib == "suite" || std::find(seen.begin(), seen.end(), lib) != seen.end())
      continue;
    seen.push_back(lib);
    std::printf("attention library: %s\n", lib.c_str());
  }
}

}  // namespace suite::sp_tp
