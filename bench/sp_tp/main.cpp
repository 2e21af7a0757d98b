// sp_tp: Megatron sequence parallelism vs tensor parallelism (METHODS.md section 1).
#include <algorithm>
#include <sstream>

#include "bench/sp_tp/collectives.hpp"
#include "common/bench_main.hpp"
#include "common/errors.hpp"
#include "common/size_list.hpp"

namespace {

struct SpTpOptions {
  std::string mode = "collectives";
  std::string sizes = "1K:16M:x4";
  std::string ops = "allreduce,rs_ag";
  std::int64_t seq = 1024, batch = 1, hidden = 1024;
  bool activation_case = true;
};

std::vector<suite::sp_tp::CollectiveOp> parse_ops(const std::string& text) {
  std::vector<suite::sp_tp::CollectiveOp> ops;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item == "allreduce")
      ops.push_back(suite::sp_tp::CollectiveOp::all_reduce);
    else if (item == "rs_ag")
      ops.push_back(suite::sp_tp::CollectiveOp::rs_ag);
    else
      throw suite::UsageError("--ops: unknown op '" + item + "' (allreduce, rs_ag)");
  }
  return ops;
}

}  // namespace

int main(int argc, char** argv) {
  SpTpOptions o;
  suite::BenchDefinition def;
  def.name = "sp_tp";
  def.description =
      "Megatron sequence parallelism vs tensor parallelism over a TP group of all ranks.\n"
      "collectives mode: one all-reduce (TP) against reduce-scatter + all-gather (SP) of the same "
      "n bytes,\n"
      "for a sweep of sizes and for the activation size s*b*h; time, algbw/busbw, bytes per rank\n"
      "measured vs 2(t-1)/t*n, and an exact correctness check.";
  def.add_options = [&](CLI::App& app) {
    app.add_option("--mode", o.mode, "What to measure: collectives")
        ->check(CLI::IsMember({"collectives"}))
        ->capture_default_str();
    app.add_option("--sizes", o.sizes, "Message sizes in bytes (list or range), e.g. 1K:64M:x2")
        ->capture_default_str();
    app.add_option("--ops", o.ops, "Variants to time: allreduce (TP), rs_ag (SP), comma-separated")
        ->capture_default_str();
    app.add_option("--seq", o.seq, "s: sequence length of the activation-sized case")
        ->capture_default_str();
    app.add_option("--batch", o.batch, "b: micro-batch of the activation-sized case")
        ->capture_default_str();
    app.add_option("--hidden", o.hidden, "h: hidden size of the activation-sized case")
        ->capture_default_str();
    app.add_option("--activation-case", o.activation_case,
                   "1: add a case of n = s*b*h elements (one layer's all-reduce); 0: sweep only")
        ->capture_default_str();
  };
  def.make_cases = [&](suite::BenchContext& ctx) {
    auto ops = parse_ops(o.ops);
    std::vector<suite::sp_tp::CollectiveSize> sizes;
    for (auto n : suite::parse_sweep(o.sizes))
      sizes.push_back({n, "n" + suite::format_scaled_int(n)});
    if (o.activation_case) {
      if (o.seq <= 0 || o.batch <= 0 || o.hidden <= 0)
        throw suite::UsageError("--seq, --batch, --hidden must be >= 1");
      const std::int64_t n =
          o.seq * o.batch * o.hidden * static_cast<std::int64_t>(suite::dtype_size(ctx.dtype));
      sizes.push_back({n,
                       "act_s" + std::to_string(o.seq) + "_b" + std::to_string(o.batch) + "_h" +
                           std::to_string(o.hidden),
                       o.seq, o.batch, o.hidden});
    }
    return suite::sp_tp::collective_cases(ctx, ops, sizes);
  };
  def.summarize = [](const suite::BenchContext&, const std::vector<suite::CaseRecord>& records) {
    suite::sp_tp::print_collective_table(records);
  };
  return suite::run_benchmark(argc, argv, def);
}
