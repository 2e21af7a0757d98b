#include "bench/sp_tp/layer_backward.hpp"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace suite::sp_tp {
namespace {

class Backward {
 public:
  Backward(const BackwardSetup& s, const Ledger& ledger, const LayerWeights& w, const void* d_out,
           const LayerGrads& g, PhaseTimer& ph)
      : s_(s), w_(w), g_(g), ph_(ph), d_out_(d_out), scratch_(s.scratch) {
    const int t = s.t;
    h_ = s.cfg.h;
    hl_ = h_ / t;
    fl_ = s.cfg.ffn() / t;
    al_ = s.cfg.heads / t;
    kvl_ = s.cfg.kv() / t;
    kv_cols_ = kvl_ * s.cfg.head_dim();
    cols_ = s.cfg.qkv_cols(t);
    R_ = s.cfg.rows();
    L_ = s.local_rows;
    e_ = dtype_size(s.cfg.dtype);
    sp_ = s.variant == Variant::tp_sp;
    // Every saved tensor the backward reads, looked up before any work or collective: a
    // missing one fails here, on every rank alike.
    // A part keeps what its own backward needs (layer_parts.hpp).
    std::vector<std::string> needed = {"ln1_input",     "ln1_output", "attn_output",
                                       "dropout1_mask", "ln2_input",  "dropout2_mask"};
    if (!s.attention) {
      needed.push_back("qkv");
      if (s.cfg.fused_attention)
        needed.push_back("attn_lse");
      else
        needed.insert(needed.end(), {"attn_softmax", "attn_dropout_mask", "attn_dropout_output"});
    }
    if (!s.ffn) needed.insert(needed.end(), {"ln2_output", "fc1_output", "gelu_output"});
    for (const auto& name : needed)
      saved_[name] = ledger.get(name).data();
  }

  void run() {
    const float p = s_.cfg.dropout;
    if (const std::size_t bytes = s_.ops.layernorm_workspace_bytes(L_))
      ln_ws_ = acquire("layernorm_workspace", {static_cast<std::int64_t>(bytes)}, 1);
    if (sp_)
      ln_partial_ = acquire("grad_layernorm_partial", {4, h_});
    else if (s_.t > 1)
      ln_block_ = acquire("grad_layernorm_block", {2, h_});
    // MLP block: out = dropout2(fc2(gelu(fc1(ln2(h1))))) + h1, or dropout2(part(ln2(h1))) + h1.
    void* g2 = acquire(s_.ffn ? "grad_ffn_output" : "grad_fc2_reduced", {L_, h_});
    compute([&] { s_.ops.dropout_backward(L_ * h_, p, mask("dropout2_mask"), d_out_, g2); });
    void* d_ln2 = s_.ffn ? ffn_backward(g2) : mlp_backward(g2);
    ready(s_.ffn ? "ffn" : "w_fc1");
    void* d_h1 = acquire("grad_ln2_input", {L_, h_});
    layernorm(saved("ln2_input"), w_.ln2_gamma, d_ln2, d_h1, 2);
    compute([&] { s_.ops.residual_add(L_ * h_, d_h1, d_out_, d_h1); });  // + the residual path
    release(s_.ffn ? "grad_ffn_input" : "grad_fc1_input_reduced");

    // Attention block: h1 = dropout1(proj(attention(qkv(ln1(x))))) + x.
    void* g1 = acquire("grad_proj_reduced", {L_, h_});
    compute([&] { s_.ops.dropout_backward(L_ * h_, p, mask("dropout1_mask"), d_h1, g1); });
    void* d_ctx = acquire("grad_attn_output", {R_, hl_});
    const void* g1_full = full_rows_into("out_proj", g1, "grad_proj_output",
                                         [&](std::int64_t r0, std::int64_t rows, const void* dy) {
                                           gemm(false, true, rows, hl_, h_, dy, h_, w_.w_out, h_,
                                                at(d_ctx, r0 * hl_), hl_);
                                         });
    s_.comm.gemm(ph_, [&] {
      gemm(true, false, hl_, h_, R_, saved("attn_output"), hl_, g1_full, h_, g_.w_out, h_);
    });
    s_.comm.set_op("");
    ready("w_out");
    release_rows("grad_proj_output");
    release("grad_proj_reduced");
    void* d_qkv = acquire("grad_qkv", {R_, cols_});
    if (s_.attention)
      s_.attention->backward(d_ctx, d_qkv, ph_);
    else
      compute([&] {
        if (s_.cfg.fused_attention)
          attention_fused(d_ctx, d_qkv);
        else
          attention_unfused(d_ctx, d_qkv);
      });
    release("grad_attn_output");
    void* d_ln1 = column_parallel(d_qkv, cols_, w_.w_qkv, "ln1_output", g_.w_qkv, "qkv");
    ready("w_qkv");
    release("grad_qkv");
    layernorm(saved("ln1_input"), w_.ln1_gamma, d_ln1, g_.input, 0);
    compute([&] { s_.ops.residual_add(L_ * h_, g_.input, d_h1, g_.input); });
    release("grad_qkv_input_reduced");
    release("grad_ln2_input");
    if (sp_) {  // partial sums over this rank's tokens: one all-reduce for both LayerNorms
      s_.comm.all_reduce(ph_, ln_partial_, g_.ln, static_cast<std::size_t>(4 * h_), s_.cfg.dtype,
                         Coll::ln_grad_all_reduce);
      release("grad_layernorm_partial");
    }
    if (ln_ws_) release("layernorm_workspace");
    if (ln_block_) release("grad_layernorm_block");
    ready("layernorm");
  }

 private:
  // The part's backward in place of the MLP's: the LayerNorm output's gradient on this rank's
  // rows.
  void* ffn_backward(void* g2) {
    void* d_ln2 = acquire("grad_ffn_input", {L_, h_});
    s_.ffn->backward(g2, d_ln2, ph_);
    release("grad_ffn_output");
    return d_ln2;
  }

  // fc2, GeLU and fc1 backward with their collectives: the LayerNorm output's gradient on this
  // rank's rows ("grad_fc1_input_reduced").
  void* mlp_backward(void* g2) {
    void* d_fc1 = acquire("grad_fc1_output", {R_, fl_});
    // dgelu = dY W_fc2^T, row block by row block (ring: each as its block of dY arrives).
    const void* g2_full = full_rows_into(
        "fc2", g2, "grad_fc2_output", [&](std::int64_t r0, std::int64_t rows, const void* dy) {
          gemm(false, true, rows, fl_, h_, dy, h_, w_.w_fc2, h_, at(d_fc1, r0 * fl_), fl_);
        });
    s_.comm.gemm(ph_, [&] {
      gemm(true, false, fl_, h_, R_, saved("gelu_output"), fl_, g2_full, h_, g_.w_fc2, h_);
    });
    s_.comm.set_op("");
    ready("w_fc2");
    compute([&] { s_.ops.gelu_backward(R_ * fl_, saved("fc1_output"), d_fc1, d_fc1); });
    release_rows("grad_fc2_output");
    release("grad_fc2_reduced");
    void* d_ln2 = column_parallel(d_fc1, fl_, w_.w_fc1, "ln2_output", g_.w_fc1, "fc1");
    release("grad_fc1_output");
    return d_ln2;
  }

  void ready(const char* name) const {
    if (s_.grad_ready && *s_.grad_ready) (*s_.grad_ready)(name);
  }
  template <class F>
  void compute(F&& f) {
    ph_.time("bwd_compute", f);
  }
  void* acquire(const std::string& name, std::vector<std::int64_t> shape, std::size_t elem = 0) {
    return scratch_.acquire(name, std::move(shape), elem ? elem : e_);
  }
  void release(const std::string& name) { scratch_.release(name); }
  const void* saved(const char* name) const { return saved_.at(name); }
  const std::uint8_t* mask(const char* name) const {
    return static_cast<const std::uint8_t*>(saved(name));
  }
  static void* off(const void* p, std::int64_t bytes) {
    return static_cast<std::byte*>(const_cast<void*>(p)) + bytes;
  }
  void* at(const void* p, std::int64_t elems) const {
    return off(p, elems * static_cast<std::int64_t>(e_));
  }
  void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, const void* a,
            std::int64_t lda, const void* b, std::int64_t ldb, void* c, std::int64_t ldc,
            double alpha = 1.0) {
    s_.ops.gemm_ex(ta, tb, m, n, k, alpha, a, lda, b, ldb, 0.0, c, ldc);
  }

  // g_bar's backward: the gradient of the row-parallel output for all s*b rows (tp: it is).
  const void* full_rows(const void* local, const std::string& name) {
    if (!sp_) return local;
    void* full = acquire(name, {R_, h_});
    s_.comm.all_gather(ph_, local, full, static_cast<std::size_t>(L_ * h_), s_.cfg.dtype);
    return full;
  }
  // g_bar's backward followed by the GEMM over its rows: rows(r0, count, dY rows) runs over all
  // s*b rows. Blocking: the all-gather (tp_sp), then the GEMM at once. --tp-overlap ring or
  // chunks:K: LayerComm::all_gather_matmul, the GEMM on rows as they arrive (METHODS.md 1.1).
  // The op (bwd_out_proj, bwd_fc2) stays current for the caller's weight-gradient GEMM.
  const void* full_rows_into(
      const char* op, const void* local, const std::string& name,
      const std::function<void(std::int64_t r0, std::int64_t count, const void* dy)>& rows) {
    s_.comm.set_op(std::string("bwd_") + op);
    if (!overlapped()) {
      const void* full = full_rows(local, name);
      s_.comm.gemm(ph_, [&] { rows(0, R_, full); });
      return full;
    }
    void* full = acquire(name, {R_, h_});
    s_.comm.all_gather_matmul(ph_, local, full, L_, h_, s_.cfg.dtype, s_.cfg.tp_overlap,
                              "bwd_exposed_comm", [&](int j, std::int64_t r0, std::int64_t count) {
                                const std::int64_t row = j * L_ + r0;
                                rows(row, count, at(full, row * h_));
                              });
    return full;
  }
  // --tp-overlap ring or chunks:K: the backward's collectives beside their GEMMs.
  bool overlapped() const { return sp_ && s_.cfg.tp_overlap.kind != TpOverlap::none; }
  void release_rows(const std::string& name) {
    if (sp_) release(name);
  }

  // A column-parallel matmul Y = ln Wc (ln [R, h], Wc [h, n]) from dY [R, n]: the weight
  // gradient ln^T dY (tp_sp: ln all-gathered from its shards, overlapped with the input-gradient
  // GEMM), and the input gradient dY Wc^T reduced over the group (tp: all-reduce; tp_sp:
  // reduce-scatter to this rank's rows). Returns the reduced input gradient [L, h].
  void* column_parallel(const void* dY, std::int64_t n, const void* Wc, const char* ln_name,
                        void* dW, const std::string& tag) {
    void* partial = acquire("grad_" + tag + "_input_partial", {R_, h_});
    s_.comm.set_op("bwd_" + tag);
    if (overlapped()) {
      void* reduced = column_parallel_ring(dY, n, Wc, ln_name, dW, tag, partial);
      s_.comm.set_op("");
      return reduced;
    }
    const int chunks = gemm_row_chunks(s_.t);
    auto input_grad = [&](int i, const std::function<void()>& progress) {
      const auto [r0, r1] = chunk_rows(R_, chunks, i);
      if (r1 > r0)
        gemm(false, true, r1 - r0, h_, n, at(dY, r0 * n), n, Wc, n, at(partial, r0 * h_), h_);
      progress();
    };
    const void* ln = saved(ln_name);
    if (sp_) {
      void* gathered = acquire(std::string(ln_name) + "_gathered", {R_, h_});
      s_.comm.all_gather_with(ph_, ln, gathered, static_cast<std::size_t>(L_ * h_), s_.cfg.dtype,
                              s_.overlap, chunks, "bwd_ln_gather_exposed", input_grad);
      ln = gathered;
    } else {
      const std::function<void()> none = [] {};
      for (int i = 0; i < chunks; ++i)
        s_.comm.gemm(ph_, [&] { input_grad(i, none); });
    }
    s_.comm.gemm(ph_, [&] { gemm(true, false, h_, n, R_, ln, h_, dY, n, dW, n); });
    if (sp_) release(std::string(ln_name) + "_gathered");
    void* reduced = acquire("grad_" + tag + "_input_reduced", {L_, h_});
    if (sp_)
      s_.comm.reduce_scatter(ph_, partial, reduced, static_cast<std::size_t>(L_ * h_),
                             s_.cfg.dtype);
    else
      s_.comm.all_reduce(ph_, partial, reduced, static_cast<std::size_t>(R_ * h_), s_.cfg.dtype);
    s_.comm.set_op("");
    release("grad_" + tag + "_input_partial");
    return reduced;
  }

  // --tp-overlap ring: the LayerNorm output's all-gather feeds the weight gradient block by
  // block (dW = sum over blocks of ln_j^T dY_j), and the input gradient's reduce-scatter is made
  // of the per-block products dY_j Wc^T, each made while the previous block's sum travels.
  // chunks:K: the same by pieces of every block's rows.
  void* column_parallel_ring(const void* dY, std::int64_t n, const void* Wc, const char* ln_name,
                             void* dW, const std::string& tag, void* partial) {
    void* gathered = acquire(std::string(ln_name) + "_gathered", {R_, h_});
    bool first = true;
    auto weight_grad = [&](std::int64_t row, std::int64_t count) {  // dW += ln_rows^T dY_rows
      s_.ops.gemm_ex(true, false, h_, n, count, 1.0, at(gathered, row * h_), h_, at(dY, row * n), n,
                     first ? 0.0 : 1.0, dW, n);
      first = false;
    };
    s_.comm.all_gather_matmul(
        ph_, saved(ln_name), gathered, L_, h_, s_.cfg.dtype, s_.cfg.tp_overlap, "bwd_exposed_comm",
        [&](int j, std::int64_t r0, std::int64_t count) { weight_grad(j * L_ + r0, count); });
    release(std::string(ln_name) + "_gathered");
    void* reduced = acquire("grad_" + tag + "_input_reduced", {L_, h_});
    void* incoming = acquire("grad_" + tag + "_input_incoming", {L_, h_});
    s_.comm.matmul_reduce_scatter(
        ph_, partial, incoming, reduced, L_, h_, s_.cfg.dtype, s_.cfg.tp_overlap,
        "bwd_exposed_comm",
        [&](int j, std::int64_t r0, std::int64_t count, void* out) {
          gemm(false, true, count, h_, n, at(dY, (j * L_ + r0) * n), n, Wc, n, out, h_);  // dY Wc^T
        },
        [&](const void* a, const void* b, void* out, std::int64_t elems) {
          s_.ops.residual_add(elems, a, b, out);
        });
    release("grad_" + tag + "_input_incoming");
    release("grad_" + tag + "_input_partial");
    return reduced;
  }

  // LayerNorm backward on this rank's rows: dx, and the weight / bias gradients into rows
  // `slot`, `slot` + 1 of the [4, h] LayerNorm gradients (tp_sp: of this rank's partial sums,
  // all-reduced at the end; tp: summed over t row blocks in rank order, as tp_sp's ranks hold
  // them, so two ranks agree to the bit).
  void layernorm(const void* x, const void* gamma, const void* dy, void* dx, int slot) {
    void* ws = ln_ws_;
    const std::int64_t h = h_;
    if (sp_) {
      compute([&] {
        s_.ops.layernorm_backward(L_, h, x, gamma, dy, dx, at(ln_partial_, slot * h),
                                  at(ln_partial_, (slot + 1) * h), ws);
      });
      return;
    }
    void* dg = at(g_.ln, slot * h);
    void* db = at(g_.ln, (slot + 1) * h);
    void* block = ln_block_;
    compute([&] {
      for (int r = 0; r < s_.t; ++r) {
        const auto [r0, r1] = chunk_rows(L_, s_.t, r);
        void* bg = r == 0 ? dg : block;
        void* bb = r == 0 ? db : at(block, h);
        s_.ops.layernorm_backward(r1 - r0, h, at(x, r0 * h), gamma, at(dy, r0 * h), at(dx, r0 * h),
                                  bg, bb, ws);
        if (r == 0) continue;
        s_.ops.residual_add(h, dg, bg, dg);
        s_.ops.residual_add(h, db, bb, db);
      }
    });
  }

  kernels::AttentionParams attention_params() const {
    kernels::AttentionParams p = kernels::make_attention_params(
        s_.cfg.s, s_.cfg.s, static_cast<int>(al_), static_cast<int>(kvl_),
        static_cast<int>(s_.cfg.head_dim()), s_.cfg.causal);
    p.ld_q = p.ld_k = p.ld_v = s_.cfg.b * cols_;
    p.ld_o = s_.cfg.b * hl_;
    return p;
  }

  // FlashAttention-2 backward from Q, K, V, O and lse (the engine), per batch element.
  void attention_fused(const void* d_ctx, void* d_qkv) {
    kernels::AttentionEngine& eng = s_.ops.attention_engine();
    const std::int64_t b = s_.cfg.b, s = s_.cfg.s, d = s_.cfg.head_dim();
    const auto lse_e = static_cast<std::int64_t>(s_.ops.lse_elem_size());
    const kernels::AttentionParams p = attention_params();
    const auto mask =
        s_.cfg.causal ? kernels::BlockMask::causal_top_left : kernels::BlockMask::full;
    void* delta = acquire("attn_delta", {b, al_, s}, static_cast<std::size_t>(lse_e));
    const void* ctx = saved("attn_output");
    const void* lse = saved("attn_lse");
    const void* qkv = saved("qkv");
    for (std::int64_t bi = 0; bi < b; ++bi)
      eng.backward_delta(s, static_cast<int>(al_), static_cast<int>(d), at(ctx, bi * hl_),
                         at(d_ctx, bi * hl_), p.ld_o, off(delta, bi * al_ * s * lse_e));
    // Gradients accumulate in the engine's grad_type (fp32 on CUDA), then land in d_qkv.
    const DType gt = eng.grad_type();
    const bool direct = gt == s_.cfg.dtype;
    const auto ge = static_cast<std::int64_t>(dtype_size(gt));
    void* acc = direct ? d_qkv : acquire("grad_qkv_accumulator", {R_, cols_}, dtype_size(gt));
    s_.device.fill_zero(acc, static_cast<std::size_t>(R_ * cols_ * ge));
    for (std::int64_t bi = 0; bi < b; ++bi) {
      const std::int64_t q0 = bi * cols_, k0 = q0 + hl_, v0 = k0 + kv_cols_;
      eng.backward(p, mask, at(qkv, q0), at(qkv, k0), at(qkv, v0), at(ctx, bi * hl_),
                   at(d_ctx, bi * hl_), off(lse, bi * al_ * s * lse_e),
                   off(delta, bi * al_ * s * lse_e), w_.positions, w_.positions, off(acc, q0 * ge),
                   off(acc, k0 * ge), off(acc, v0 * ge));
    }
    if (!direct) {
      s_.device.fill_zero(d_qkv, static_cast<std::size_t>(R_ * cols_) * e_);
      eng.accumulate(d_qkv, s_.cfg.dtype, acc, R_ * cols_);
      release("grad_qkv_accumulator");
    }
    release("attn_delta");
  }

  // From the stored softmax P, its dropout mask and output Pd, per batch element and head:
  // dV = Pd^T dO; dPd = dO V^T; dS = softmax_dropout_backward(dPd); dQ = scale dS K;
  // dK = scale dS^T Q. Multi-head only (validate refuses GQA here).
  void attention_unfused(const void* d_ctx, void* d_qkv) {
    const std::int64_t b = s_.cfg.b, s = s_.cfg.s, d = s_.cfg.head_dim();
    const kernels::AttentionParams p = attention_params();
    const std::int64_t ld = p.ld_q, ld_o = p.ld_o;
    void* scores = acquire("attn_grad_scores", {s, s});
    const void* qkv = saved("qkv");
    for (std::int64_t bi = 0; bi < b; ++bi)
      for (std::int64_t hh = 0; hh < al_; ++hh) {
        const std::int64_t plane = (bi * al_ + hh) * s * s, q = bi * 3 * hl_ + hh * d;
        const void* dO = at(d_ctx, bi * hl_ + hh * d);
        gemm(true, false, s, d, s, at(saved("attn_dropout_output"), plane), s, dO, ld_o,
             at(d_qkv, q + 2 * hl_), ld);
        gemm(false, true, s, s, d, dO, ld_o, at(qkv, q + 2 * hl_), ld, scores, s);
        s_.ops.softmax_dropout_backward(s, s, s_.cfg.dropout, at(saved("attn_softmax"), plane),
                                        mask("attn_dropout_mask") + plane, scores);
        gemm(false, false, s, d, s, scores, s, at(qkv, q + hl_), ld, at(d_qkv, q), ld,
             p.softmax_scale);
        gemm(true, false, s, d, s, scores, s, at(qkv, q), ld, at(d_qkv, q + hl_), ld,
             p.softmax_scale);
      }
    release("attn_grad_scores");
  }

  const BackwardSetup& s_;
  const LayerWeights& w_;
  const LayerGrads& g_;
  PhaseTimer& ph_;
  const void* d_out_;
  Scratch scratch_;
  std::map<std::string, const void*> saved_;
  std::int64_t h_, hl_, fl_, al_, kvl_, kv_cols_, cols_, R_, L_;
  std::size_t e_;
  bool sp_;
  void *ln_partial_ = nullptr, *ln_block_ = nullptr, *ln_ws_ = nullptr;
};

}  // namespace

void layer_backward(const BackwardSetup& setup, const Ledger& ledger, const LayerWeights& w,
                    const void* d_out, const LayerGrads& grads, PhaseTimer& phases) {
  Backward(setup, ledger, w, d_out, grads, phases).run();
}

}  // namespace suite::sp_tp
