#include "bench/ulysses/ulysses_flags.hpp"

#include "bench/layouts/packed_documents.hpp"
#include "bench/ring_attention/sweep_flags.hpp"
#include "common/device/attention_select.hpp"
#include "common/harness/errors.hpp"
#include "common/harness/pass_list.hpp"
#include "common/harness/size_list.hpp"

namespace suite::ulysses {

void add_ulysses_flags(CLI::App& app, UlyssesFlags& f) {
  auto* seq = app.add_option("--seq", f.seq, "s: whole sequence length, list or range")
                  ->capture_default_str();
  app.add_option("--seq-per-rank", f.seq_per_rank,
                 "instead of --seq: tokens per rank, s = value x N_c (s and N_c grow together, "
                 "bytes per rank stay constant)")
      ->excludes(seq);
  app.add_option("--cp", f.cp,
                 "N_c: context-parallel group sizes (consecutive ranks, or as --order lays them "
                 "out; all groups run at once), "
                 "list; 0 = all ranks")
      ->capture_default_str();
  app.add_option("--ulysses-degree", f.degrees,
                 "u: Ulysses group sizes, list (must divide N_c); all = every degree the head "
                 "counts allow (1 = ring only, N_c = Ulysses only)")
      ->capture_default_str();
  ring::add_layout_flag(app, f.layouts);
  app.add_option("--ring-variant", f.ring_variants,
                 "how a hybrid's ring part moves K/V, list: ring (the blocks travel around) "
                 "and/or groupcast (each rank's rows only to the ranks whose queries see them, as "
                 "ring_attention --variant groupcast); ignored when u = N_c")
      ->capture_default_str();
  ring::add_docs_flag(app, f.docs);
  ring::add_balanced_chunk_flag(app, f.balanced_chunk);
  add_causal_flag(app, f.causal);
  ring::add_attention_shape_flags(app, f.shape);
  add_pass_flag(app, f.passes);
  app.add_option("--grad-dtype", f.grad_dtype, kGradDtypeHelp)->capture_default_str();
  app.add_flag("--kv-replicate", f.kv_replicate,
               "allow u > n_kv by replicating K/V heads (u a multiple of n_kv); the extra bytes "
               "are reported beside METHODS.md's figure");
  add_attn_kernel_flag(app, f.attn_kernel);
}

UlyssesSweep ulysses_sweep(const UlyssesFlags& f, DType dtype) {
  UlyssesSweep s;
  static_cast<ring::AttentionShape&>(s) = ring::resolved(f.shape);
  s.seq_per_rank = !f.seq_per_rank.empty();
  s.seq = parse_sweep(s.seq_per_rank ? f.seq_per_rank : f.seq);
  for (std::int64_t v : s.seq)  // --seq's own rule is checked per case, with N_c known
    if (s.seq_per_rank && v < 1)
      throw UsageError("--seq-per-rank " + std::to_string(v) + " must be >= 1");
  s.cp = parse_int_list("--cp", f.cp, 0);  // 0 = all ranks
  if (f.degrees != "all") s.degrees = parse_int_list("--ulysses-degree", f.degrees, 1);
  s.layouts = parse_list("--layout", f.layouts, ring::parse_layout_name);
  s.ring_variants = parse_list("--ring-variant", f.ring_variants,
                               named<ring::Variant>("--ring-variant", "value",
                                                    {{"ring", ring::Variant::ring},
                                                     {"groupcast", ring::Variant::groupcast}}));
  if (!f.docs.empty()) {
    s.docs = ring::parse_doc_spec(f.docs);
    s.docs->balanced_chunk = f.balanced_chunk;
  }
  s.causal = parse_list("--causal", f.causal, parse_causal);
  s.kv_replicate = f.kv_replicate;
  s.attn_kernel = f.attn_kernel;
  s.passes = parse_list("--pass", f.passes, parse_pass);
  s.grad_dtype = parse_grad_dtype_flag(f.grad_dtype, dtype);
  return s;
}

}  // namespace suite::ulysses
