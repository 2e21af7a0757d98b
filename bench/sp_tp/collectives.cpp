#include "bench/sp_tp/collectives.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "common/device/device_io.hpp"
#include "common/formulas/model.hpp"
#include "common/harness/errors.hpp"
#include "common/results/record_access.hpp"
#include "common/transport/exact_pattern.hpp"

namespace suite::sp_tp {
namespace {

constexpr std::size_t kMaxSavedElements = 1 << 20;

const char* op_name(CollectiveOp op) {
  return op == CollectiveOp::all_reduce ? "allreduce" : "rs_ag";
}

class CollectiveCase final : public BenchCase {
 public:
  CollectiveCase(BenchContext& ctx, CollectiveOp op, CollectiveSize size)
      : ctx_(ctx), op_(op), size_(std::move(size)), pattern_(ctx.comm.size()) {}

  void setup() override {
    const std::size_t e = dtype_size(ctx_.dtype), t = ctx_.comm.size();
    count_ = static_cast<std::size_t>(size_.n_bytes) / e;
    send_ = ctx_.device.alloc(count_ * e);
    recv_ = ctx_.device.alloc(count_ * e);
    if (op_ == CollectiveOp::rs_ag) shard_ = ctx_.device.alloc(count_ / t * e);
    const int rank = ctx_.comm.rank();
    upload_values(ctx_.device, send_.data(), count_, ctx_.dtype,
                  [&](std::size_t i) { return pattern_.value(rank, i); });
  }

  void step(PhaseTimer& phases) override {
    Comm& c = ctx_.comm;
    if (op_ == CollectiveOp::all_reduce) {
      c.all_reduce(send_.data(), recv_.data(), count_, ctx_.dtype);
      return;
    }
    const std::size_t shard = count_ / c.size();
    phases.time("reduce_scatter",
                [&] { c.reduce_scatter(send_.data(), shard_.data(), shard, ctx_.dtype); });
    phases.time("all_gather",
                [&] { c.all_gather(shard_.data(), recv_.data(), shard, ctx_.dtype); });
  }

  CheckOutcome check() override {
    CheckOutcome out;
    scan_values(ctx_.device, recv_.data(), count_, ctx_.dtype, [&](std::size_t i, double got) {
      const double err = std::fabs(got - pattern_.sum(i));
      if (!(err <= out.max_abs_err)) out.max_abs_err = std::isnan(err) ? INFINITY : err;
      if (err != 0 && out.passed) {
        out.passed = false;
        out.detail = "element " + std::to_string(i) + " is " + std::to_string(got) + ", expected " +
                     std::to_string(pattern_.sum(i)) + " (" + rank_label() + ")";
      }
    });
    return out;
  }

  void report(const Measurement& m, CaseRecord& rec) override {
    Attributes& attrs = rec.attrs;
    const int t = ctx_.comm.size();
    const double n = static_cast<double>(size_.n_bytes);
    const double algbw = m.step.median > 0 ? n / m.step.median / 1e9 : 0;
    attrs.emplace_back("bytes_sent_per_rank", m.bytes_sent_per_iter);
    attrs.emplace_back("pred_bytes_sent_per_rank", model::all_reduce_bytes_per_rank(n, t));
    attrs.emplace_back("bytes_recv_per_rank", m.bytes_recv_per_iter);
    attrs.emplace_back("pred_bytes_recv_per_rank", model::all_reduce_bytes_per_rank(n, t));
    attrs.emplace_back("algbw_GBps", algbw);
    // RS + AG together are an all-reduce, so both variants use the all-reduce bus factor.
    attrs.emplace_back("busbw_GBps", algbw * model::busbw_factor_all_reduce(t));
    // Each half on its own, as nccl-tests counts it: algbw = n / time (n = the full buffer, the
    // reduce-scatter's input and the all-gather's output), busbw = algbw (t - 1) / t.
    for (const auto& [phase, median] : m.phase_median_s) {
      if (median <= 0) continue;
      const double phase_algbw = n / median / 1e9;
      attrs.emplace_back(phase + "_algbw_GBps", phase_algbw);
      attrs.emplace_back(phase + "_busbw_GBps", phase_algbw * model::busbw_factor_rs_ag_a2a(t));
    }
    if (size_.s > 0) {
      // A layer's forward has two of these (after attention and after the MLP).
      attrs.emplace_back("layer_bytes_sent_per_rank", 2 * m.bytes_sent_per_iter);
      const double e = static_cast<double>(dtype_size(ctx_.dtype));
      attrs.emplace_back(
          "pred_layer_bytes_sent_per_rank",
          op_ == CollectiveOp::all_reduce
              ? model::tp_layer_comm_bytes_per_rank(size_.s, size_.b, size_.h, t, e)
              : model::sp_layer_comm_bytes_per_rank(size_.s, size_.b, size_.h, t, e));
    }
  }

  std::vector<SavedTensor> tensors() override {
    if (count_ > kMaxSavedElements) return {};
    SavedTensor in{"input", std::vector<double>(count_)},
        out{"output", std::vector<double>(count_)};
    scan_values(ctx_.device, send_.data(), count_, ctx_.dtype,
                [&](std::size_t i, double v) { in.values[i] = v; });
    scan_values(ctx_.device, recv_.data(), count_, ctx_.dtype,
                [&](std::size_t i, double v) { out.values[i] = v; });
    return {in, out};
  }

 private:
  BenchContext& ctx_;
  CollectiveOp op_;
  CollectiveSize size_;
  std::size_t count_ = 0;
  ExactSumPattern pattern_;
  Buffer send_, recv_, shard_;
};

}  // namespace

std::vector<CaseSpec> collective_cases(BenchContext& ctx, const std::vector<CollectiveOp>& ops,
                                       const std::vector<CollectiveSize>& sizes) {
  const std::int64_t e = static_cast<std::int64_t>(dtype_size(ctx.dtype));
  const std::int64_t t = ctx.comm.size();
  std::vector<CaseSpec> specs;
  for (const auto& size : sizes) {
    if (size.n_bytes <= 0 || size.n_bytes % (t * e) != 0)
      throw UsageError("message size " + std::to_string(size.n_bytes) + " B (" + size.label +
                       ") is not a positive multiple of t x element size = " + std::to_string(t) +
                       " x " + std::to_string(e) + " B; every rank needs an equal whole shard");
    for (auto op : ops) {
      const std::int64_t per_call = size.n_bytes / e / (op == CollectiveOp::all_reduce ? 1 : t);
      if (static_cast<std::size_t>(per_call) > ctx.comm.max_count())
        throw UsageError(
            "message size " + std::to_string(size.n_bytes) + " B (" + size.label + ") needs " +
            std::to_string(per_call) + " elements in one call, above this transport's limit of " +
            std::to_string(ctx.comm.max_count()) + "; use --transport nccl or smaller sizes");
      CaseSpec spec;
      spec.name =
          std::string(op_name(op)) + "_" + std::string(dtype_name(ctx.dtype)) + "_" + size.label;
      spec.params = {{"mode", std::string("collectives")},
                     {"op", std::string(op_name(op))},
                     {"dtype", std::string(dtype_name(ctx.dtype))},
                     {"n_bytes", size.n_bytes},
                     {"t", t}};
      if (size.s > 0) {
        spec.params.emplace_back("s", size.s);
        spec.params.emplace_back("b", size.b);
        spec.params.emplace_back("h", size.h);
      }
      spec.make = [&ctx, op, size] { return std::make_unique<CollectiveCase>(ctx, op, size); };
      spec.console_counters = {"busbw_GBps", "bytes_sent_per_rank", "pred_bytes_sent_per_rank"};
      specs.push_back(std::move(spec));
    }
  }
  return specs;
}

void print_collective_table(const std::vector<CaseRecord>& records) {
  // Pair the two variants of each size by the case name after the op prefix.
  std::map<std::string, const CaseRecord*> ar, rsag;
  std::vector<std::string> order;
  for (const auto& r : records) {
    if (param_text(r, "mode") != "collectives") continue;
    const std::string op = param_text(r, "op");
    const bool is_ar = op == "allreduce";
    std::string key = r.name.substr(op.size() + 1);  // names are <op>_<dtype>_<size>
    if (!ar.count(key) && !rsag.count(key)) order.push_back(key);
    (is_ar ? ar : rsag)[key] = &r;
  }
  if (order.empty()) return;
  std::printf(
      "\nSP vs TP collectives (step time = max over ranks, median; bytes per rank per call)\n");
  std::printf("%-28s %12s %12s %8s %10s %10s %14s %14s %6s\n", "size", "allreduce_us", "rs+ag_us",
              "ratio", "AR_busbw", "RSAG_busbw", "bytes_meas", "bytes_pred", "check");
  for (const auto& key : order) {
    const CaseRecord* a = ar.count(key) ? ar[key] : nullptr;
    const CaseRecord* b = rsag.count(key) ? rsag[key] : nullptr;
    const CaseRecord* any = a ? a : b;
    double ta = a ? attr_number(*a, "time_median_s") * 1e6 : NAN,
           tb = b ? attr_number(*b, "time_median_s") * 1e6 : NAN;
    auto worst = [](const CaseRecord* c, double acc) {
      return c ? std::min(acc, attr_number(*c, "check_passed")) : acc;
    };
    const double checked = worst(b, worst(a, 1));  // 1 ok, 0 failed, -1 not checked
    std::printf("%-28s %12.1f %12.1f %8.3f %10.3f %10.3f %14.0f %14.0f %6s\n", key.c_str(), ta, tb,
                tb / ta, a ? attr_number(*a, "busbw_GBps") : NAN,
                b ? attr_number(*b, "busbw_GBps") : NAN, attr_number(*any, "bytes_sent_per_rank"),
                attr_number(*any, "pred_bytes_sent_per_rank"),
                checked == 1   ? "ok"
                : checked == 0 ? "FAIL"
                               : "off");
  }
}

}  // namespace suite::sp_tp
