#include "bench/sp_tp/layer_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/formulas/model.hpp"
#include "common/harness/stats.hpp"
#include "common/results/record_access.hpp"

namespace suite::sp_tp {
namespace {

void add_ledger(const TransformerLayer& layer, CaseRecord& rec) {
  StringList names{"ledger_name", {}}, shapes{"ledger_shape", {}};
  IntTable bytes{"ledger_bytes", 1, 0, {}};
  for (const auto& l : layer.ledger_entries()) {
    names.values.push_back(l.name);
    std::string shape;
    for (auto d : l.shape) {
      if (!shape.empty()) shape += 'x';
      shape += std::to_string(d);
    }
    shapes.values.push_back(shape);
    bytes.values.push_back(l.bytes);
  }
  bytes.cols = bytes.values.size();
  rec.string_lists.push_back(std::move(names));
  rec.string_lists.push_back(std::move(shapes));
  rec.int_tables.push_back(std::move(bytes));
}

// One pass's collectives: calls of each kind and bytes per rank, beside the formulas.
void add_pass_comm(const LayerRun& run, const char* pass, const PassComm& c, bool backward,
                   CaseRecord& rec) {
  const LayerConfig& cfg = run.cfg;
  const bool sp = run.variant == Variant::tp_sp;
  const double e = static_cast<double>(dtype_size(cfg.dtype));
  const double n = static_cast<double>(cfg.rows() * cfg.h) * e;
  const model::LayerCollectives pred =
      sp ? model::sp_layer_collectives(backward) : model::tp_layer_collectives(backward);
  auto& a = rec.attrs;
  const std::string p = pass;
  a.emplace_back(p + "_all_reduce_calls", std::int64_t{c.count(Coll::all_reduce)});
  a.emplace_back("pred_" + p + "_all_reduce_calls", std::int64_t{pred.all_reduce});
  a.emplace_back(p + "_reduce_scatter_calls", std::int64_t{c.count(Coll::reduce_scatter)});
  a.emplace_back("pred_" + p + "_reduce_scatter_calls", std::int64_t{pred.reduce_scatter});
  a.emplace_back(p + "_all_gather_calls", std::int64_t{c.count(Coll::all_gather)});
  a.emplace_back("pred_" + p + "_all_gather_calls", std::int64_t{pred.all_gather});
  a.emplace_back(p + "_comm_bytes_per_rank", static_cast<double>(c.activation_bytes()));
  a.emplace_back("pred_" + p + "_comm_bytes_per_rank",
                 model::layer_collectives_bytes_per_rank(pred, n, cfg.t));
  if (!backward) return;
  a.emplace_back("bwd_ln_grad_all_reduce_calls", std::int64_t{c.count(Coll::ln_grad_all_reduce)});
  a.emplace_back("pred_bwd_ln_grad_all_reduce_calls", std::int64_t{sp ? 1 : 0});
  a.emplace_back("bwd_ln_grad_bytes_per_rank",
                 static_cast<double>(c.sent(Coll::ln_grad_all_reduce)));
  a.emplace_back(
      "pred_bwd_ln_grad_bytes_per_rank",
      sp ? model::sp_layernorm_grad_bytes_per_rank(static_cast<double>(cfg.h), cfg.t, e) : 0.0);
}

double phase(const Measurement& m, const std::string& name) {
  for (const auto& [n, v] : m.phase_median_s)
    if (n == name) return v;
  return NAN;
}

void add_backward(const LayerRun& run, const Measurement& m, CaseRecord& rec) {
  const LayerConfig& cfg = run.cfg;
  const bool sp = run.variant == Variant::tp_sp;
  const double e = static_cast<double>(dtype_size(cfg.dtype));
  const auto s = static_cast<double>(cfg.s), b = static_cast<double>(cfg.b),
             h = static_cast<double>(cfg.h);
  const PassComm &f = run.layer.pass_comm(kFwd), &bw = run.layer.pass_comm(kBwd);
  add_pass_comm(run, "bwd", bw, true, rec);
  auto& a = rec.attrs;
  const double both = sp ? model::sp_layer_comm_bytes_fwd_bwd(s, b, h, cfg.t, e)
                         : model::tp_layer_comm_bytes_fwd_bwd(s, b, h, cfg.t, e);
  const double ln = sp ? model::sp_layernorm_grad_bytes_per_rank(h, cfg.t, e) : 0.0;
  a.emplace_back("fwd_bwd_comm_bytes_per_rank",
                 static_cast<double>(f.activation_bytes() + bw.activation_bytes()));
  a.emplace_back("pred_fwd_bwd_comm_bytes_per_rank", both);
  a.emplace_back("step_comm_bytes_per_rank", m.bytes_sent_per_iter);
  a.emplace_back("pred_step_comm_bytes_per_rank", both + ln);
  // Memory: the ledger, and the peak the layer's allocator saw during the backward.
  const double ledger = static_cast<double>(run.layer.ledger_bytes());
  a.emplace_back("bwd_peak_bytes", static_cast<double>(run.bwd_peak_bytes));
  a.emplace_back("bwd_working_set_bytes", static_cast<double>(run.bwd_peak_bytes) - ledger);
  a.emplace_back("bwd_peak_over_ledger", static_cast<double>(run.bwd_peak_bytes) / ledger);
  std::int64_t weight_grads = 0;
  for (std::size_t i = 0; i < run.layer.slices().size(); ++i)
    weight_grads += run.layer.slices()[i].elems() * static_cast<std::int64_t>(e);
  a.emplace_back("weight_grad_bytes", static_cast<double>(weight_grads));
  // Times: the passes' phases are the harness's phase_* figures; their ratio and the
  // overlapped all-gathers' transfer time.
  a.emplace_back("bwd_over_fwd_time", phase(m, "bwd") / phase(m, "fwd"));
  model::Activation x{
      s, b, h, static_cast<double>(cfg.heads), cfg.t, e, static_cast<double>(cfg.ffn()) / h};
  a.emplace_back("model_bwd_over_fwd_flops", model::layer_bwd_flops_per_rank(x, cfg.causal) /
                                                 model::layer_flops_per_rank(x, cfg.causal));
  std::vector<double> seconds;
  int total = 0, early = 0;
  for (const auto& x : run.exchanges) {
    seconds.push_back(x.seconds);
    total += x.total;
    early += x.done_early;
  }
  a.emplace_back("bwd_ln_gather_transfer_median_s",
                 seconds.empty() ? NAN : percentile(seconds, 0.5));
  // Seen only where the host polls the transport; NaN where a GPU stream overlaps.
  a.emplace_back("bwd_ln_gather_done_during_compute_fraction",
                 run.host_polled && total > 0 ? static_cast<double>(early) / total : NAN);
  // Checks.
  const LayerCheckResult& c = run.check;
  a.emplace_back("check_grad_bit_exact",
                 std::int64_t{c.grads_checked ? (c.grads_bit_exact ? 1 : 0) : -1});
  a.emplace_back("check_grad_max_err", c.grads_checked ? c.grad_max_err : NAN);
  for (const auto& [name, err] : c.grad_err)
    a.emplace_back("check_grad_err_" + name, err);
  a.emplace_back("check_fd_rel_err", c.fd_rel_err);
  a.emplace_back("check_fd_derivative", c.fd_derivative);
  a.emplace_back("check_fd_analytic", c.fd_analytic);
  a.emplace_back("check_fd_tolerance", kFdTolerance);
  if (!c.fd_note.empty()) a.emplace_back("check_fd_note", c.fd_note);
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

void report_layer(const LayerRun& run, const Measurement& m, CaseRecord& rec) {
  const LayerConfig& cfg = run.cfg;
  const double e = static_cast<double>(dtype_size(cfg.dtype));
  const double measured = static_cast<double>(run.layer.ledger_bytes());
  const double predicted = predicted_activation_bytes(cfg, run.variant);
  auto& a = rec.attrs;
  a.emplace_back("activation_bytes", measured);
  a.emplace_back("pred_activation_bytes", predicted);
  a.emplace_back("activation_rel_err", std::fabs(measured - predicted) / predicted);
  const auto s = static_cast<double>(cfg.s), b = static_cast<double>(cfg.b),
             h = static_cast<double>(cfg.h);
  // The forward's bytes: the whole step's for a forward case, the forward pass's otherwise.
  a.emplace_back("layer_comm_bytes_per_rank",
                 cfg.backward() ? static_cast<double>(run.layer.pass_comm(kFwd).activation_bytes())
                                : m.bytes_sent_per_iter);
  a.emplace_back("pred_layer_comm_bytes_per_rank",
                 run.variant == Variant::tp
                     ? model::tp_layer_comm_bytes_per_rank(s, b, h, cfg.t, e)
                     : model::sp_layer_comm_bytes_per_rank(s, b, h, cfg.t, e));
  a.emplace_back("check_bit_exact",
                 std::int64_t{run.check.checked ? (run.check.output_bit_exact ? 1 : 0) : -1});
  a.emplace_back("check_tolerance", layer_tolerance(cfg.dtype));
  // Which attention kernel produced the times (the unfused path is GEMMs + softmax).
  const auto& engine = run.ops.attention_engine();
  a.emplace_back("attn_kernel", cfg.fused_attention ? engine.name() : std::string("unfused"));
  a.emplace_back("attn_library",
                 cfg.fused_attention ? engine.library_version() : std::string("suite"));
  a.emplace_back("attn_fallbacks", engine.fallbacks());
  add_ledger(run.layer, rec);
  add_pass_comm(run, "fwd", run.layer.pass_comm(kFwd), false, rec);
  if (cfg.backward()) add_backward(run, m, rec);
}

void print_layer_table(const std::vector<CaseRecord>& records) {
  auto verdict = [](const CaseRecord& r, const char* exact) {
    const double passed = attr_number(r, "check_passed");
    return passed == 1  ? (attr_number(r, exact) == 1 ? "exact" : "ok")
           : passed < 0 ? "off"
                        : "FAIL";
  };
  bool fwd_header = false, step_header = false;
  for (const auto& r : records) {
    if (param_text(r, "mode") != "layer" || param_text(r, "pass") == "fwd_bwd") continue;
    if (!fwd_header) {
      std::printf(
          "\nTransformer layer forward, TP vs TP+SP (median step = max over ranks; bytes per "
          "rank)\n");
      std::printf("%-8s %-8s %-12s %-9s %10s %10s %10s %14s %14s %7s %14s %14s %6s\n", "variant",
                  "attn", "kernel", "overlap", "step_us", "compute_us", "comm_us", "act_meas",
                  "act_pred", "err%", "comm_meas", "comm_pred", "check");
      fwd_header = true;
    }
    const std::string overlap = param_text(r, "tp_overlap");
    std::printf("%-8s %-8s %-12s %-9s %10.1f %10.1f %10.1f %14.0f %14.0f %7.3f %14.0f %14.0f %6s\n",
                param_text(r, "variant").c_str(), param_text(r, "attention").c_str(),
                param_text(r, "attn_kernel").c_str(), overlap.empty() ? "none" : overlap.c_str(),
                attr_number(r, "time_median_s") * 1e6,
                attr_number(r, "phase_compute_median_s") * 1e6,
                attr_number(r, "phase_comm_median_s") * 1e6, attr_number(r, "activation_bytes"),
                attr_number(r, "pred_activation_bytes"), 100 * attr_number(r, "activation_rel_err"),
                attr_number(r, "layer_comm_bytes_per_rank"),
                attr_number(r, "pred_layer_comm_bytes_per_rank"), verdict(r, "check_bit_exact"));
  }
  for (const auto& r : records) {
    if (param_text(r, "mode") != "layer" || param_text(r, "pass") != "fwd_bwd") continue;
    if (!step_header) {
      std::printf(
          "\nTransformer layer training step (fwd + bwd), TP vs TP+SP (medians, max over ranks; "
          "exposed = bwd comm not hidden; bytes per rank, both passes)\n");
      std::printf("%-8s %-8s %-8s %10s %10s %10s %10s %10s %6s %14s %14s %12s %12s %9s %6s\n",
                  "variant", "attn", "ovl", "step_us", "fwd_us", "bwd_us", "bwd_comp", "exposed",
                  "AR/RS/AG", "comm_meas", "comm_pred", "ledger", "bwd_peak", "fd_err", "grads");
      step_header = true;
    }
    char calls[32];
    std::snprintf(
        calls, sizeof calls, "%.0f/%.0f/%.0f",
        attr_number(r, "fwd_all_reduce_calls") + attr_number(r, "bwd_all_reduce_calls"),
        attr_number(r, "fwd_reduce_scatter_calls") + attr_number(r, "bwd_reduce_scatter_calls"),
        attr_number(r, "fwd_all_gather_calls") + attr_number(r, "bwd_all_gather_calls"));
    const double ovl = attr_number(r, "bwd_overlap");
    const std::string tp_overlap = param_text(r, "tp_overlap");
    const std::string ovl_text = !tp_overlap.empty() ? tp_overlap
                                 : std::isnan(ovl)   ? "-"
                                                     : (ovl == 1 ? "on" : "off");
    std::printf(
        "%-8s %-8s %-8s %10.1f %10.1f %10.1f %10.1f %10.1f %6s %14.0f %14.0f %12.0f %12.0f %9.1e "
        "%6s\n",
        param_text(r, "variant").c_str(), param_text(r, "attention").c_str(), ovl_text.c_str(),
        attr_number(r, "time_median_s") * 1e6, attr_number(r, "phase_fwd_median_s") * 1e6,
        attr_number(r, "phase_bwd_median_s") * 1e6,
        attr_number(r, "phase_bwd_compute_median_s") * 1e6,
        attr_number(r, "phase_bwd_comm_median_s") * 1e6, calls,
        attr_number(r, "fwd_bwd_comm_bytes_per_rank"),
        attr_number(r, "pred_fwd_bwd_comm_bytes_per_rank"), attr_number(r, "activation_bytes"),
        attr_number(r, "bwd_peak_bytes"), attr_number(r, "check_fd_rel_err"),
        verdict(r, "check_grad_bit_exact"));
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
