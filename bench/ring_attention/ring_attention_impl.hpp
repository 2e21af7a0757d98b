// RingAttention's state and the pieces its forward (ring_attention.cpp, each variant's schedule
// in ring_schedule.cpp, allgather_schedule.cpp and group_cast_schedule.cpp) and backward
// (ring_backward.cpp) share: buffers, per-round timer records, and the block addressing.
// Private to bench/ring_attention.
#pragma once

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench/ring_attention/group_cast.hpp"
#include "bench/ring_attention/ring_attention.hpp"
#include "common/device/typed_host.hpp"

namespace suite::ring {

using kernels::AttentionParams;
using kernels::BlockMask;

inline std::int64_t pos_bytes(std::int64_t n) {
  return n * static_cast<std::int64_t>(sizeof(std::int64_t));
}

struct RingAttention::Impl {
  Impl(const RingConfig& c, Device& d, Comm& cm, kernels::AttentionEngine& en)
      : cfg(c),
        dev(d),
        comm(cm),
        engine(en),
        rank(cm.rank()),
        n(cm.size()),
        e(c.elem()),
        lse_e(en.lse_elem_size()) {}

  RingConfig cfg;
  Device& dev;
  Comm& comm;
  kernels::AttentionEngine& engine;
  int rank, n;
  std::size_t e, lse_e;

  Buffer q, o, o_part, lse_run, lse_part;
  Buffer slot[2];       // ring: from round 1 on, the block in use and the one arriving
  Buffer kv_local;      // this rank's own K/V: used and sent in round 0, kept for backward
  Buffer gathered;      // all-gather: [n_c][K | V] as the collective delivers it
  Buffer k_all, v_all;  // all-gather: K and V of all s tokens, laid out for one attention
  Buffer q_pos;
  // Backward (cfg.backward() only). dq and part in the engine's gradient type; travel in
  // cfg.grad_dtype: the dK/dV partial sums arriving this round and the ones leaving.
  Buffer d_o, delta, dq, part, travel[2];
  Buffer dkv_all, dkv_packed;  // all-gather: dK/dV of all s tokens; packed per owner
  int own_dkv = 0;             // which travel buffer holds this rank's final dK/dV
  DType grad_t = DType::fp32;  // engine.grad_type()
  std::vector<Buffer> k_pos;   // per source rank (none under modeled compute)
  Buffer all_pos;              // all-gather: positions of k_all / v_all rows
  // All-gather variant only, per rank: the layout's runs of positions (it lays every block
  // out). The ring keeps of the other ranks' runs only those its plan entries pair with (under
  // modeled compute one per source): with thousands of document chunks per rank, every rank
  // holding every rank's runs grows as N_c^2 in one simulated process.
  std::vector<std::vector<Segment>> segs;
  // This rank's runs attention is computed on. Under block calls (RingConfig::block_calls) the
  // runs locally adjacent are one range, several documents' runs: only local_offset and count
  // describe it then (q_pos has its positions).
  std::vector<Segment> qsegs;
  std::size_t query_runs = 0;  // the layout's runs (the block census counts pairs of them)
  // One (query segment, key run) pair of the schedule with a visible pair, fixed for the run by
  // the layout and the documents: its mask and its exact visible pairs (modeled compute injects
  // their FLOPs from it). A pair that shares no document or that the causal mask hides has no
  // entry: it is skipped (the block still travels on).
  struct PairPlan {
    std::size_t qi;
    Segment ks;  // the key run, within the source's block (its positions)
    BlockMask mask;
    std::int64_t pairs = 0;
    // Where ks's first key sits in the buffer holding the source's K/V: ks.local_offset in a
    // block (own, or the ring's), its row among the received rows under the group-cast.
    std::int64_t kv_row = 0;
  };
  // [src]: the pairs to compute, by query segment then key run. Sparse: with thousands of
  // document chunks per rank only the pairs that can share a document are ever looked at.
  // Under modeled compute a round is one injection of all its pairs' FLOPs anyway, so each
  // source keeps one entry: the first pair's query segment, key run and mask with all the
  // round's pairs (only the count matters there; the census keeps the pair kinds).
  std::vector<std::vector<PairPlan>> plans;
  // [src]: what the pairs of the source's block are: visible pairs, (query segment, key run)
  // pairs computed whole or masked, and key runs.
  struct SourceCensus {
    std::int64_t pairs = 0, whole = 0, masked = 0, key_runs = 0;
  };
  std::vector<SourceCensus> census;
  // All-gather variant, per query segment: the gathered key rows it attends, [first,
  // first + count), their mask and visible pairs.
  struct GatheredKeys {
    std::int64_t first = 0, count = 0;
    BlockMask mask = BlockMask::full;
    std::int64_t pairs = 0;
  };
  std::vector<GatheredKeys> gathered_plan;
  std::vector<char> written;  // per (batch, query segment): running result holds a partial

  // The group-cast variant (group_cast_schedule.cpp). Each source's rows that this rank's
  // queries see arrive as one message, [K rows | V rows], in the ring's order of sources, into
  // two slots in turn: a batch of consecutive sources fills a slot (at most c rows, one of the
  // ring's blocks), and while one slot's sources are computed the next batch arrives in the
  // other. This rank's rows go to each rank that needs them as one packed message too. The
  // backward sends each source's dK/dV partial sums home the same way; the owner adds what
  // arrives into its own block's.
  struct GroupCast {
    bool on = false;  // false: the ring's schedule (fallback_note says why)
    std::string fallback_note;
    struct Peer {
      int rank = 0;
      int round = 0;  // the ring round whose source (or target) it is
      RowRanges rows;
      std::int64_t count = 0;  // rows
      std::int64_t at = 0;     // first row of its [K | V] in its slot (or staging buffer)
      int batch = 0;           // sources: the batch (slot b % 2) it arrives in
    };
    std::vector<Peer> sources, targets;             // by ring round
    std::vector<std::vector<std::size_t>> batches;  // indices into sources
    std::int64_t slot_rows = 0;    // a slot's rows, K and V (2 x the largest batch)
    std::int64_t staged_rows = 0;  // the targets' rows, K and V
    // Bytes of its buffers: the forward's (slots, staging) and the backward's beyond them; the
    // same as the allocator counted them while init_group_cast made them.
    std::int64_t forward_bytes = 0, backward_bytes = 0;
    std::int64_t forward_allocated = 0, backward_allocated = 0;
    Buffer staging, slot[2];
    // Backward: this batch's contributions (engine type), leaving as partial sums (grad_dtype),
    // the partial sums arriving for this rank's rows, and this rank's block's total.
    Buffer part, travel[2], arriving, home;
    std::vector<MPI_Request> sends, receives[2], partial_sends[2], partial_receives;
  };
  GroupCast gc;
  // Group-cast, per source: the rows its plan entries read (plan_schedule), merged into the
  // sources' rows by plan_group_cast.
  std::vector<RowRanges> gc_reads;
  // One recorded step's per-round timers, resolved only by collect_times(), so no host
  // synchronisation sits inside a timed step. Reused after each collection. The backward's
  // accumulation of a round's dK/dV into the received partial sums happens after the round's
  // wait: its own timer, counted as compute.
  enum class Clock { compute, wait, accumulate };
  struct StepRecord {
    std::vector<std::unique_ptr<IntervalTimer>> timers[3];
    std::vector<char> ran[3];
    std::size_t first_exchange = 0, exchanges = 0;
    int rounds = 0;
    bool backward = false;
  };
  std::vector<StepRecord> records;
  std::size_t recorded = 0;          // records in use since the last collection
  std::size_t exchanges_logged = 0;  // exchanges in the transport's log since it was cleared

  // Starts a step: clears the transport's log when nothing waits to be collected, and returns
  // the step's record (nullptr when not recording).
  StepRecord* begin_step(bool record, int rounds, bool backward) {
    if (recorded == 0) {
      comm.clear_exchange_log();
      exchanges_logged = 0;
    }
    if (!record) return nullptr;
    if (recorded == records.size()) records.emplace_back();
    StepRecord& r = records[recorded++];
    for (int c = 0; c < 3; ++c) {
      while (static_cast<int>(r.timers[c].size()) < rounds)
        r.timers[c].push_back(dev.make_timer());
      r.ran[c].assign(static_cast<std::size_t>(rounds), 0);
    }
    r.first_exchange = exchanges_logged;
    r.exchanges = 0;
    r.rounds = rounds;
    r.backward = backward;
    return &r;
  }
  static void start(StepRecord* rec, Clock c, int k) {
    if (rec) rec->timers[static_cast<int>(c)][static_cast<std::size_t>(k)]->start();
  }
  static void stop(StepRecord* rec, Clock c, int k) {
    if (!rec) return;
    rec->timers[static_cast<int>(c)][static_cast<std::size_t>(k)]->stop();
    rec->ran[static_cast<int>(c)][static_cast<std::size_t>(k)] = 1;
  }
  void end_step(StepRecord* rec) const {
    if (rec) rec->exchanges = exchanges_logged - rec->first_exchange;
  }

  std::byte* at(const Buffer& b, std::int64_t elems, std::size_t elem_size) const {
    return b.as<std::byte>() + elems * static_cast<std::int64_t>(elem_size);
  }
  std::int64_t block_bytes() const { return cfg.kv_block_elems() * static_cast<std::int64_t>(e); }
  const std::vector<Segment>& my_segs() const { return qsegs; }
  // Positions of key segment ks of rank src's block; nullptr where modeled compute keeps none
  // (it counts structured masks from their shape and refuses a `positions` mask without them).
  const std::int64_t* key_positions(int src, const Segment& ks) const {
    return k_pos.empty()
               ? nullptr
               : k_pos[static_cast<std::size_t>(src)].as<std::int64_t>() + ks.local_offset;
  }

  AttentionParams params(std::int64_t cq, std::int64_t ck, std::int64_t ld_kv,
                         std::int64_t pairs) const {
    AttentionParams p =
        kernels::make_attention_params(cq, ck, cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.causal);
    p.ld_q = p.ld_o = cfg.q_row();
    p.ld_k = p.ld_v = ld_kv;
    p.known_visible_pairs = pairs;
    return p;
  }
  const std::vector<PairPlan>& plan(int src) const { return plans[static_cast<std::size_t>(src)]; }
  // Rank src's runs attention is computed on: the layout's, or without a causal mask or
  // documents (every pair visible) the whole block, one call per block whatever the layout.
  std::vector<Segment> compute_runs(int src) const {
    if (cfg.causal || cfg.docs) return token_segments(cfg, src);
    return {{0, 0, 1, cfg.c}};
  }
  // Fills plans, census and gathered_plan (the constructor, once the segments are known).
  void plan_schedule();
  // Block calls: qsegs becomes the ranges of locally adjacent runs, and each source's plan one
  // entry per range, over the keys from its first to its last planned key run (a padding slot
  // between them is visible to no query: kernels::kNoDocument).
  void merge_into_block_calls();

  // ---- forward, shared by the variants (ring_attention.cpp) ----
  // Attention of (batch bi, query segment qi) against ck keys at k / v (row stride ld_kv),
  // written into the running result or merged into it.
  void attend(std::int64_t bi, std::size_t qi, const std::byte* k, const std::byte* v,
              std::int64_t ld_kv, std::int64_t ck, const std::int64_t* kpos, BlockMask mask,
              std::int64_t pairs);
  // This rank's queries against the keys of rank `src` held in `block` (plan entries' kv_row),
  // V starting v_rows rows after K (a block's c; a group-cast message's row count).
  void ring_round(int src, const Buffer& block, std::int64_t v_rows);

  // ---- the ring's forward schedule (ring_schedule.cpp) ----
  void ring_forward(Mode mode, StepRecord* rec);

  // ---- the all-gather's forward schedule (allgather_schedule.cpp) ----
  void allgather_forward(Mode mode, StepRecord* rec);
  // All-gather variant: gather every K/V block and lay K and V out for one attention.
  void gather_all();
  // All-gather variant: one attention per query segment over the keys it needs.
  void attend_gathered();
  // The keys the all-gather variant attends for query segment qs and the mask they need:
  // a causal contiguous range sees a prefix of the sequence, with documents only from its
  // first document's start.
  GatheredKeys gathered_keys(const Segment& qs) const;
  // Gathered key positions from row `first` (nullptr where modeled compute keeps none).
  const std::int64_t* gathered_key_positions(std::int64_t first) const {
    return all_pos.data() == nullptr ? nullptr : all_pos.as<std::int64_t>() + first;
  }

  // ---- backward (ring_backward.cpp) ----
  // Allocates the backward's buffers and draws dO (the caller may overwrite it); returns the
  // bytes of the method's own backward buffers and of its scratch.
  std::pair<std::int64_t, std::int64_t> init_backward(std::uint64_t seed, bool generate_d_o,
                                                      const std::vector<std::int64_t>& positions);
  // delta = rowsum(dO o) of every query segment, and dQ zeroed: the backward's first step.
  void begin_backward();
  // The gradient contributions of this rank's queries against the block of rank `src` held
  // in `block`: dQ accumulates, the block's dK/dV contributions go into `part` (zeroed here).
  void backward_round(int src, const Buffer& block, const Buffer& dkv_part);
  // The same without zeroing, at the plan's kv_row with V (and dV) v_rows rows after K: adds
  // into `dkv` laid out as `block`.
  void backward_pairs(int src, const Buffer& block, std::int64_t v_rows, const Buffer& dkv);

  // ---- group-cast (group_cast_schedule.cpp) ----
  // After plan_schedule: the rows each source sends this rank (from the plan's key runs, cut
  // to what their query runs see), the rows each target needs of this rank (asked of every
  // rank once), the batches, and whether the group-cast saves the busiest rank any byte over
  // the ring (else gc.on stays false: the ring's schedule runs). Collective over the group.
  void plan_group_cast();
  // Allocates the group-cast's buffers (with the backward's too) and counts their bytes.
  void init_group_cast(bool backward);
  // A step's start: completes the previous step's sends, packs and sends this rank's rows
  // (and, for the backward, posts the receives of their partial sums), posts the first two
  // batches' receives.
  void start_group_cast(bool backward);
  void post_group_cast_batch(std::size_t b);
  void wait_group_cast_batch(std::size_t b, StepRecord* rec);
  void finish_group_cast_sends();
  // Lets the messages in flight move (the CPU backend's poll between attention tiles).
  void poll_group_cast();
  void group_cast_forward(Mode mode, StepRecord* rec);
  void group_cast_backward(Mode mode, StepRecord* rec);
  // dst += src, n elements, both of cfg.grad_dtype (the arriving partial sums).
  void add_partial_sums(std::byte* dst, const std::byte* src, std::int64_t n);
  // All-gather variant: dK/dV of all s tokens, then packed per owner in cfg.grad_dtype.
  void backward_gathered_compute();
};

}  // namespace suite::ring
