// ulysses: DeepSpeed-Ulysses all-to-all attention and Ulysses x ring hybrids (METHODS.md
// section 3), side by side with plain ring attention on the same inputs.
#include <CLI/CLI.hpp>

#include "bench/layouts/packed_documents.hpp"
#include "bench/ring_attention/sweep_flags.hpp"
#include "bench/ulysses/ulysses_cases.hpp"
#include "common/device/attention_select.hpp"
#include "common/harness/bench_main.hpp"
#include "common/harness/errors.hpp"
#include "common/harness/pass_list.hpp"
#include "common/harness/size_list.hpp"

namespace {

struct UlyssesOptions {
  std::string seq = "256,1K";
  std::string seq_per_rank;
  std::string cp = "0";
  std::string degrees = "all";
  std::string layouts = "zigzag";
  std::string ring_variants = "ring";
  std::string causal = "1";
  int heads = 8, kv_heads = 0, head_dim = 64;
  std::int64_t batch = 1;
  bool kv_replicate = false;
  std::string attn_kernel = "auto";
  std::string passes = "fwd";
  std::string grad_dtype = "auto";
  std::string docs;
  std::int64_t balanced_chunk = 0;
};

std::vector<int> parse_ints(const std::string& flag, const std::string& text, int min) {
  std::vector<int> out;
  for (auto v : suite::parse_sweep(text)) {
    if (v < min || v > (1 << 20))
      throw suite::UsageError(flag + ": " + std::to_string(v) + " is out of range (" +
                              std::to_string(min) + " to " + std::to_string(1 << 20) + ")");
    out.push_back(static_cast<int>(v));
  }
  return out;
}

suite::ulysses::UlyssesSweep make_sweep(const UlyssesOptions& o, suite::DType dtype) {
  suite::ulysses::UlyssesSweep s;
  s.seq_per_rank = !o.seq_per_rank.empty();
  s.seq = suite::parse_sweep(s.seq_per_rank ? o.seq_per_rank : o.seq);
  for (std::int64_t v : s.seq)  // --seq's own rule is checked per case, with N_c known
    if (s.seq_per_rank && v < 1)
      throw suite::UsageError("--seq-per-rank " + std::to_string(v) + " must be >= 1");
  s.cp = parse_ints("--cp", o.cp, 0);  // 0 = all ranks
  if (o.degrees != "all") s.degrees = parse_ints("--ulysses-degree", o.degrees, 1);
  s.layouts = suite::ring::parse_layouts("--layout", o.layouts);
  s.ring_variants.clear();
  for (const auto& v : suite::split_list(o.ring_variants)) {
    if (v == "ring")
      s.ring_variants.push_back(suite::ring::Variant::ring);
    else if (v == "groupcast")
      s.ring_variants.push_back(suite::ring::Variant::groupcast);
    else
      throw suite::UsageError("--ring-variant: unknown value '" + v + "' (ring, groupcast)");
  }
  if (s.ring_variants.empty()) throw suite::UsageError("--ring-variant names nothing");
  if (!o.docs.empty()) {
    s.docs = suite::ring::parse_doc_spec(o.docs);
    s.docs->balanced_chunk = o.balanced_chunk;
  }
  s.causal = suite::parse_causal_list("--causal", o.causal);
  s.heads = o.heads;
  s.kv_heads = o.kv_heads == 0 ? o.heads : o.kv_heads;
  s.head_dim = o.head_dim;
  s.batch = o.batch;
  s.kv_replicate = o.kv_replicate;
  s.attn_kernel = suite::ring::parse_attn_kernel_flag(o.attn_kernel);
  s.passes = suite::parse_pass_list("--pass", o.passes);
  s.grad_dtype = suite::parse_grad_dtype_flag(o.grad_dtype, dtype);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  UlyssesOptions o;
  suite::BenchDefinition def;
  def.name = "ulysses";
  def.description =
      "DeepSpeed-Ulysses: Q, K, V sharded along the sequence switch to head sharding by one\n"
      "all-to-all, attention runs over the whole sequence for a/u heads, and a second all-to-all\n"
      "brings the output back. Hybrids (--ulysses-degree u < N_c): Ulysses inside groups of u\n"
      "consecutive ranks, ring attention across the N_c/u groups; u = 1 is plain ring attention,\n"
      "so a sweep over u compares the three on the same inputs. Per case: time of packing, each\n"
      "all-to-all, attention (with the ring part) and unpacking; bytes per rank of each part\n"
      "against METHODS.md; a2a algbw/busbw; the output checked against full attention.";
  def.add_options = [&](CLI::App& app) {
    auto* seq = app.add_option("--seq", o.seq, "s: whole sequence length, list or range")
                    ->capture_default_str();
    app.add_option("--seq-per-rank", o.seq_per_rank,
                   "instead of --seq: tokens per rank, s = value x N_c (s and N_c grow together, "
                   "bytes per rank stay constant)")
        ->excludes(seq);
    app.add_option("--cp", o.cp,
                   "N_c: context-parallel group sizes (consecutive ranks; all groups run at once), "
                   "list; 0 = all ranks")
        ->capture_default_str();
    app.add_option("--ulysses-degree", o.degrees,
                   "u: Ulysses group sizes, list (must divide N_c); all = every degree the head "
                   "counts allow (1 = ring only, N_c = Ulysses only)")
        ->capture_default_str();
    suite::ring::add_layout_flag(app, o.layouts,
                                 "; of the ring across Ulysses groups, ignored "
                                 "when u = N_c");
    app.add_option(
           "--ring-variant", o.ring_variants,
           "how a hybrid's ring part moves K/V, list: ring (the blocks travel around) "
           "and/or groupcast (each rank's rows only to the ranks whose queries see them, as "
           "ring_attention --variant groupcast); ignored when u = N_c")
        ->capture_default_str();
    suite::ring::add_docs_flag(app, o.docs,
                               ". Plain Ulysses attends over the whole pack for its heads (equal "
                               "work on every rank); a hybrid's ring part lays the pack out by "
                               "--layout.");
    suite::ring::add_balanced_chunk_flag(app, o.balanced_chunk,
                                         " (c: the ring part's tokens per rank)");
    suite::add_causal_flag(app, o.causal);
    app.add_option("--heads", o.heads, "a: query heads (u must divide it)")->capture_default_str();
    suite::ring::add_kv_heads_flag(app, o.kv_heads);
    suite::ring::add_head_dim_flag(app, o.head_dim);
    app.add_option("--batch", o.batch, "b: sequences")->capture_default_str();
    suite::add_pass_flag(app, o.passes,
                         "; the backward: dO's all-to-all, attention backward (hybrids: the "
                         "ring's), dQ, dK, dV back");
    app.add_option("--grad-dtype", o.grad_dtype, suite::kGradDtypeHelp)->capture_default_str();
    app.add_flag("--kv-replicate", o.kv_replicate,
                 "allow u > n_kv by replicating K/V heads (u a multiple of n_kv); the extra bytes "
                 "are reported beside METHODS.md's figure");
    suite::add_attn_kernel_flag(app, o.attn_kernel);
  };
  def.make_cases = [&](suite::BenchContext& ctx) {
    return suite::ulysses::ulysses_cases(ctx, make_sweep(o, ctx.dtype));
  };
  def.summarize = [](const suite::BenchContext&, const std::vector<suite::CaseRecord>& records) {
    suite::ulysses::print_ulysses_table(records);
  };
  return suite::run_benchmark(argc, argv, def);
}
