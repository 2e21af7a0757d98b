// ring_attention: context parallelism by ring attention (METHODS.md section 2).
#include <CLI/CLI.hpp>

#include "bench/ring_attention/ring_cases.hpp"
#include "bench/ring_attention/sweep_flags.hpp"
#include "common/device/attention_select.hpp"
#include "common/harness/bench_main.hpp"
#include "common/harness/errors.hpp"
#include "common/transport/group_comm.hpp"
#include "common/harness/pass_list.hpp"
#include "common/sim/sim.hpp"
#include "common/harness/size_list.hpp"

namespace {

struct RingOptions {
  std::string blocks = "128:512:x2";
  std::string layouts = "contiguous,zigzag";
  std::string variants = "ring";
  std::string causal = "1";
  int heads = 8, kv_heads = 0, head_dim = 64;
  std::int64_t batch = 1;
  int cp = 0;
  std::string attn_kernel = "auto";
  std::string cpu_progress = suite::sim::kSmpiBuild ? "none" : "poll";
  std::string passes = "fwd";
  std::string grad_dtype = "auto";
  std::string docs;
  std::string varlen_calls = "pair";
  std::int64_t balanced_chunk = 0;
};

suite::ring::RingSweep make_sweep(const RingOptions& o, suite::DType dtype) {
  using namespace suite::ring;
  RingSweep s;
  s.blocks = suite::parse_sweep(o.blocks);
  s.layouts = parse_layouts("--layout", o.layouts);
  for (const auto& v : suite::split_list(o.variants)) {
    if (v == "ring")
      s.variants.push_back(Variant::ring);
    else if (v == "allgather")
      s.variants.push_back(Variant::allgather);
    else if (v == "groupcast")
      s.variants.push_back(Variant::groupcast);
    else
      throw suite::UsageError("--variant: unknown value '" + v + "' (ring, allgather, groupcast)");
  }
  if (s.variants.empty()) throw suite::UsageError("--variant names nothing");
  s.causal = suite::parse_causal_list("--causal", o.causal);
  s.heads = o.heads;
  s.kv_heads = o.kv_heads == 0 ? o.heads : o.kv_heads;
  s.head_dim = o.head_dim;
  s.batch = o.batch;
  s.attn_kernel = parse_attn_kernel_flag(o.attn_kernel);
  s.poll_progress = o.cpu_progress == "poll";
  s.passes = suite::parse_pass_list("--pass", o.passes);
  s.grad_dtype = suite::parse_grad_dtype_flag(o.grad_dtype, dtype);
  if (!o.docs.empty()) {
    s.docs = parse_doc_spec(o.docs);
    s.docs->balanced_chunk = o.balanced_chunk;
  }
  s.block_calls = o.varlen_calls == "block";
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  RingOptions o;
  suite::BenchDefinition def;
  def.name = "ring_attention";
  def.description =
      "Ring attention (context parallelism): each rank holds c tokens of Q, K, V; K/V blocks "
      "travel\n"
      "around the ring (double-buffered, overlapped with attention), partial results merge "
      "exactly\n"
      "by log-sum-exp. Each case runs overlapped, compute only and transfer only, so F (attention\n"
      "FLOP/s) and W (ring bytes/s) are measured in the same run, and reports c* = F/(gW) (x2 "
      "causal\n"
      "balanced, x e/2) beside the block size, per-rank per-round work / compute / transfer / "
      "idle,\n"
      "bytes per rank against (N_c-1) 4ch/g, memory against six blocks, and checks the output\n"
      "against full attention over the whole sequence.";
  def.add_options = [&](CLI::App& app) {
    app.add_option("--block", o.blocks,
                   "c: tokens per rank, list or range (e.g. 256:16K:x2); s = c * N_c")
        ->capture_default_str();
    suite::ring::add_layout_flag(app, o.layouts);
    app.add_option("--variant", o.variants,
                   "ring (K/V travel, overlapped), allgather (gather all K/V once, exposed, "
                   "then one local attention, as Llama 3) and/or groupcast (each rank's K/V rows "
                   "sent only to the ranks whose queries see them, the next sources' arriving "
                   "while this one's are used; dK/dV partial sums sent home the same way; with "
                   "--layout balanced the documents are laid out for it; falls back to the "
                   "ring's schedule, and says so, where it would save the busiest rank no byte)")
        ->capture_default_str();
    suite::add_causal_flag(app, o.causal);
    suite::ring::add_docs_flag(app, o.docs);
    app.add_option(
           "--varlen-calls", o.varlen_calls,
           "with --docs, ring variant: pair (one attention call per query run and key "
           "run that share a document, each result merged) or block (one call per range "
           "of locally adjacent query runs against the keys of the ring block it may see, "
           "over document-tagged positions: the kernel splits at document boundaries, as "
           "a varlen call with cu_seqlens does; one merge per range and round; doc_zigzag's "
           "padding splits ranges). On cuda, block runs the suite's kernel, not cuDNN; "
           "modeled compute calls no kernel and ignores it")
        ->check(CLI::IsMember({"pair", "block"}))
        ->capture_default_str();
    suite::ring::add_balanced_chunk_flag(app, o.balanced_chunk);
    app.add_option("--heads", o.heads, "a: query heads")->capture_default_str();
    suite::ring::add_kv_heads_flag(app, o.kv_heads);
    suite::ring::add_head_dim_flag(app, o.head_dim);
    app.add_option("--batch", o.batch, "b: sequences per rank")->capture_default_str();
    app.add_option("--cp", o.cp,
                   "N_c: context-parallel group size (consecutive ranks; all groups run at once); "
                   "0 = all ranks")
        ->capture_default_str();
    suite::add_attn_kernel_flag(app, o.attn_kernel);
    suite::add_pass_flag(app, o.passes);
    app.add_option("--grad-dtype", o.grad_dtype, suite::kGradDtypeHelp)->capture_default_str();
    app.add_option("--cpu-progress", o.cpu_progress,
                   "CPU backend: poll (MPI_Testall between attention tiles, so the transfer moves "
                   "during compute) or none (MPI progresses only when waiting: no overlap). The "
                   "SMPI build defaults to none: SMPI moves transfers in simulated time by itself, "
                   "and a poll would only cut the compute bursts it measures")
        ->check(CLI::IsMember({"poll", "none"}))
        ->capture_default_str();
  };
  def.group_size = [&](int world) { return suite::resolve_group_size(o.cp, world, "--cp"); };
  def.make_cases = [&](suite::BenchContext& ctx) {
    return suite::ring::ring_cases(ctx, make_sweep(o, ctx.dtype));
  };
  def.summarize = [](const suite::BenchContext& ctx,
                     const std::vector<suite::CaseRecord>& records) {
    // A real link (shaped_link.py, emulated_cluster.py): the transfers are not shared memory's.
    const bool shaped =
        ctx.opts.link.rfind("shaped", 0) == 0 || ctx.opts.link.rfind("emulated", 0) == 0;
    suite::ring::print_ring_table(
        records, ctx.backend == suite::Backend::cpu && !suite::sim::kSmpiBuild && !shaped);
  };
  return suite::run_benchmark(argc, argv, def);
}
