#include "bench/ring_attention/ring_flags.hpp"

#include "bench/layouts/packed_documents.hpp"
#include "bench/ring_attention/sweep_flags.hpp"
#include "common/device/attention_select.hpp"
#include "common/harness/errors.hpp"
#include "common/harness/pass_list.hpp"
#include "common/harness/shared_flags.hpp"
#include "common/harness/size_list.hpp"

namespace suite::ring {

void add_attention_shape_flags(CLI::App& app, AttentionShape& shape) {
  add_heads_flag(app, shape.heads);
  add_kv_heads_flag(app, shape.kv_heads);
  add_head_dim_flag(app, shape.head_dim);
  add_batch_flag(app, shape.batch);
}

AttentionShape resolved(AttentionShape shape) {
  if (shape.kv_heads == 0) shape.kv_heads = shape.heads;
  return shape;
}

void add_ring_flags(CLI::App& app, RingFlags& f) {
  app.add_option("--block", f.blocks,
                 "c: tokens per rank, list or range (e.g. 256:16K:x2); s = c * N_c")
      ->capture_default_str();
  add_layout_flag(app, f.layouts);
  app.add_option("--variant", f.variants,
                 "ring (K/V travel, overlapped), allgather (gather all K/V once, exposed, "
                 "then one local attention, as Llama 3) and/or groupcast (each rank's K/V rows "
                 "sent only to the ranks whose queries see them, the next sources' arriving "
                 "while this one's are used; dK/dV partial sums sent home the same way; with "
                 "--layout balanced the documents are laid out for it; falls back to the "
                 "ring's schedule, and says so, where it would save the busiest rank no byte)")
      ->capture_default_str();
  add_causal_flag(app, f.causal);
  add_docs_flag(app, f.docs);
  app.add_option("--varlen-calls", f.varlen_calls,
                 "with --docs, ring variant: pair (one attention call per query run and key "
                 "run that share a document, each result merged) or block (one call per range "
                 "of locally adjacent query runs against the keys of the ring block it may see, "
                 "over document-tagged positions: the kernel splits at document boundaries, as "
                 "a varlen call with cu_seqlens does; one merge per range and round; doc_zigzag's "
                 "padding splits ranges). On cuda, block runs the suite's kernel, not cuDNN; "
                 "modeled compute calls no kernel and ignores it")
      ->check(CLI::IsMember({"pair", "block"}))
      ->capture_default_str();
  add_balanced_chunk_flag(app, f.balanced_chunk);
  add_attention_shape_flags(app, f.shape);
  app.add_option("--cp", f.cp,
                 "N_c: context-parallel group size (consecutive ranks, or as --order lays them "
                 "out; all groups run at once); "
                 "0 = all ranks")
      ->capture_default_str();
  add_attn_kernel_flag(app, f.attn_kernel);
  add_pass_flag(app, f.passes);
  app.add_option("--grad-dtype", f.grad_dtype, kGradDtypeHelp)->capture_default_str();
  app.add_option("--cpu-progress", f.cpu_progress,
                 "CPU backend: poll (MPI_Testall between attention tiles, so the transfer moves "
                 "during compute) or none (MPI progresses only when waiting: no overlap). The "
                 "SMPI build defaults to none: SMPI moves transfers in simulated time by itself, "
                 "and a poll would only cut the compute bursts it measures")
      ->check(CLI::IsMember({"poll", "none"}))
      ->capture_default_str();
}

RingSweep ring_sweep(const RingFlags& f, DType dtype) {
  RingSweep s;
  static_cast<AttentionShape&>(s) = resolved(f.shape);
  s.blocks = parse_sweep(f.blocks);
  s.layouts = parse_list("--layout", f.layouts, parse_layout_name);
  s.variants = parse_list("--variant", f.variants,
                          named<Variant>("--variant", "value",
                                         {{"ring", Variant::ring},
                                          {"allgather", Variant::allgather},
                                          {"groupcast", Variant::groupcast}}));
  s.causal = parse_list("--causal", f.causal, parse_causal);
  s.attn_kernel = f.attn_kernel;
  s.poll_progress = f.cpu_progress == "poll";
  s.passes = parse_list("--pass", f.passes, parse_pass);
  s.grad_dtype = parse_grad_dtype_flag(f.grad_dtype, dtype);
  if (!f.docs.empty()) {
    s.docs = parse_doc_spec(f.docs);
    s.docs->balanced_chunk = f.balanced_chunk;
  }
  s.block_calls = f.varlen_calls == "block";
  return s;
}

}  // namespace suite::ring
