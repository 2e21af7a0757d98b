// cuDNN SDPA forward and backward behind AttentionEngine. The only translation unit that
// includes the cuDNN frontend (it takes minutes to compile); everything cuDNN-specific stays in
// this file.
//
// Layout: the suite's q [cq, heads, d] with row stride ld_q is SDPA's {b=1, heads, s=cq, d}
// with strides {cq*ld_q, d, ld_q, 1} (no transpose); K and V likewise with kv_heads (GQA).
// With generate_stats cuDNN returns Stats = max + ln(sum exp) of the scaled scores, fp32,
// dims {1, heads, cq, 1}: given packed strides {heads*cq, cq, 1, 1} that is exactly the
// suite's lse [heads, cq] in natural log, written in place with no conversion kernel.
//
// Backward (sdpa_backward): Q, K, V, O, dO in the same token-major views (O and dO with
// ld_o), Stats = the suite's FINAL lse as above (a packed BHSD tensor, which cuDNN before
// 9.26 requires of the Stats input), the same mask attributes as the forward. cuDNN forms
// D = rowsum(dO o) itself from O and dO (the engine's delta is not an input of the graph) and
// P = exp(scale q k^T - Stats): given the final O, dO and lse, a key block's dQ, dK, dV are
// its contributions to the full gradient, as the engine interface requires. They come out as
// fresh bf16 tensors (overwritten, not accumulated), dense token-major, into scratch that the
// engine then adds into the caller's fp32 accumulators (cuda::accumulate_rows, which leaves
// the padding between strided rows alone). So cuDNN's block gradients carry one bf16 rounding
// each before the fp32 sum; the suite's kernel accumulates in fp32 throughout.
#include "kernels/attention/attention_cudnn.hpp"

#include <cudnn.h>
#include <cudnn_frontend.h>
#include <dlfcn.h>

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>

#include "kernels/attention/attention_cuda.hpp"
#include "kernels/attention/cudnn_support.hpp"
#include "kernels/core/cuda_check.hpp"
#include "kernels/core/device_buffer.hpp"

namespace suite::kernels::cuda {
namespace {

namespace fe = cudnn_frontend;

constexpr std::int64_t kUidQ = 1, kUidK = 2, kUidV = 3, kUidO = 4, kUidStats = 5, kUidDO = 6,
                       kUidDQ = 7, kUidDK = 8, kUidDV = 9;

void check_cudnn(cudnnStatus_t st, const char* what) {
  if (st != CUDNN_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuDNN: ") + what + ": " + cudnnGetErrorString(st));
}

// Owns one cudnnHandle_t bound to the engine's stream.
class CudnnHandle {
 public:
  explicit CudnnHandle(cudaStream_t stream) {
    check_cudnn(cudnnCreate(&h_), "cudnnCreate");
    const cudnnStatus_t st = cudnnSetStream(h_, stream);
    if (st != CUDNN_STATUS_SUCCESS) {
      cudnnDestroy(h_);
      check_cudnn(st, "cudnnSetStream");
    }
  }
  ~CudnnHandle() { cudnnDestroy(h_); }
  CudnnHandle(const CudnnHandle&) = delete;
  CudnnHandle& operator=(const CudnnHandle&) = delete;
  cudnnHandle_t get() const { return h_; }

 private:
  cudnnHandle_t h_ = nullptr;
};

// Everything that changes the graph: one cached graph per distinct value.
using GraphKey = std::tuple<std::int64_t, std::int64_t, int, int, int, std::int64_t, std::int64_t,
                            std::int64_t, std::int64_t, int, int, float>;

GraphKey key_of(const AttentionParams& p, BlockMask mask, DType dtype) {
  return {p.cq,
          p.ck,
          p.heads,
          p.kv_heads,
          p.head_dim,
          p.ld_q,
          p.ld_k,
          p.ld_v,
          p.ld_o,
          static_cast<int>(mask),
          static_cast<int>(dtype),
          static_cast<float>(p.softmax_scale)};
}

struct CachedGraph {
  std::shared_ptr<fe::graph::Graph> graph;  // null when cuDNN had no engine for the block
  std::int64_t workspace = 0;
  std::string unsupported;  // why graph is null
};

// Throws with the frontend's message when `e` is bad.
void check_fe(fe::error_t e, const char* step) {
  if (e.is_bad()) throw std::runtime_error(std::string(step) + ": " + e.get_message());
}

using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

fe::graph::Graph& configure_bf16(fe::graph::Graph& g) {
  g.set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return g;
}

// The suite's [s, heads, d] rows with row stride ld as SDPA's {1, heads, s, d}.
fe::graph::Tensor_attributes& bshd(fe::graph::Tensor_attributes& t, std::int64_t uid, int heads,
                                   std::int64_t s, std::int64_t d, std::int64_t ld) {
  return t.set_uid(uid).set_dim({1, heads, s, d}).set_stride({s * ld, d, ld, 1});
}

TensorPtr input(fe::graph::Graph& g, const char* name, std::int64_t uid, int heads, std::int64_t s,
                std::int64_t d, std::int64_t ld) {
  fe::graph::Tensor_attributes t;
  t.set_name(name);
  return g.tensor(bshd(t, uid, heads, s, d, ld));
}

// lse / Stats [heads, cq] fp32 as SDPA's {1, heads, cq, 1}, packed.
fe::graph::Tensor_attributes& stats_view(fe::graph::Tensor_attributes& t,
                                         const AttentionParams& p) {
  return t.set_uid(kUidStats)
      .set_data_type(fe::DataType_t::FLOAT)
      .set_dim({1, p.heads, p.cq, 1})
      .set_stride({p.heads * p.cq, p.cq, 1, 1});
}

template <class SdpaAttributes>  // forward's or backward's
void set_mask(SdpaAttributes& o, BlockMask mask) {
  if (mask == BlockMask::causal_top_left) o.set_causal_mask(true);
  if (mask == BlockMask::causal_bottom_right) o.set_causal_mask_bottom_right(true);
}

// Validates and builds `g` (heuristics A, the first plan that builds); on failure the cached
// entry holds why, so the block and every later one of its shape fall back.
CachedGraph finish(cudnnHandle_t handle, std::shared_ptr<fe::graph::Graph> g) {
  CachedGraph out;
  try {
    check_fe(g->validate(), "validate");
    check_fe(g->build_operation_graph(handle), "build_operation_graph");
    check_fe(g->create_execution_plans({fe::HeurMode_t::A}), "create_execution_plans");
    check_fe(g->check_support(handle), "check_support");
    check_fe(g->build_plans(handle), "build_plans");
    check_fe(g->get_workspace_size(out.workspace), "get_workspace_size");
  } catch (const std::exception& e) {
    out.unsupported = std::string("cuDNN has no engine for this block: ") + e.what();
    return out;
  }
  out.graph = std::move(g);
  return out;
}

// A bf16 graph and the block's Q, K and V, the inputs of both SDPA directions.
struct QkvGraph {
  std::shared_ptr<fe::graph::Graph> g;
  TensorPtr q, k, v;
};

QkvGraph qkv_graph(const AttentionParams& p) {
  auto g = std::make_shared<fe::graph::Graph>();
  configure_bf16(*g);
  const std::int64_t d = p.head_dim;
  TensorPtr q = input(*g, "Q", kUidQ, p.heads, p.cq, d, p.ld_q);
  TensorPtr k = input(*g, "K", kUidK, p.kv_heads, p.ck, d, p.ld_k);
  TensorPtr v = input(*g, "V", kUidV, p.kv_heads, p.ck, d, p.ld_v);
  return {std::move(g), std::move(q), std::move(k), std::move(v)};
}

CachedGraph build_forward_graph(cudnnHandle_t handle, const AttentionParams& p, BlockMask mask) {
  auto [g, q, k, v] = qkv_graph(p);
  const std::int64_t d = p.head_dim;
  auto opts = fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(true).set_attn_scale(
      static_cast<float>(p.softmax_scale));
  set_mask(opts, mask);
  auto [o, stats] = g->sdpa(q, k, v, opts);
  bshd(o->set_output(true), kUidO, p.heads, p.cq, d, p.ld_o);
  stats_view(stats->set_output(true), p);
  return finish(handle, std::move(g));
}

// dQ [cq, heads, d], dK and dV [ck, kv_heads, d]: dense rows in the engine's bf16 scratch.
CachedGraph build_backward_graph(cudnnHandle_t handle, const AttentionParams& p, BlockMask mask) {
  auto [g, q, k, v] = qkv_graph(p);
  const std::int64_t d = p.head_dim;
  auto o = input(*g, "O", kUidO, p.heads, p.cq, d, p.ld_o);
  auto d_o = input(*g, "dO", kUidDO, p.heads, p.cq, d, p.ld_o);
  fe::graph::Tensor_attributes st;
  st.set_name("Stats");
  auto stats = g->tensor(stats_view(st, p));
  auto opts = fe::graph::SDPA_backward_attributes()
                  .set_name("sdpa_backward")
                  .set_attn_scale(static_cast<float>(p.softmax_scale));
  set_mask(opts, mask);
  auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, d_o, stats, opts);
  const std::int64_t q_row = p.heads * d, kv_row = p.kv_heads * d;
  bshd(dq->set_output(true).set_data_type(fe::DataType_t::BFLOAT16), kUidDQ, p.heads, p.cq, d,
       q_row);
  bshd(dk->set_output(true).set_data_type(fe::DataType_t::BFLOAT16), kUidDK, p.kv_heads, p.ck, d,
       kv_row);
  bshd(dv->set_output(true).set_data_type(fe::DataType_t::BFLOAT16), kUidDV, p.kv_heads, p.ck, d,
       kv_row);
  return finish(handle, std::move(g));
}

bool aligned16(const void* ptr) {
  return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0;
}

class CudnnEngine final : public AttentionEngine {
 public:
  CudnnEngine(cudaStream_t stream, DType dtype, std::unique_ptr<AttentionEngine> fallback)
      : stream_(stream),
        dtype_(dtype),
        handle_(stream),
        fallback_(std::move(fallback)),
        version_(cudnn_library_description()) {}

  std::string name() const override { return "cudnn"; }
  std::string library_version() const override { return version_; }
  std::size_t lse_elem_size() const override { return sizeof(float); }
  std::int64_t fallbacks() const override { return fallbacks_; }
  std::string fallback_reason() const override { return fallback_reason_; }

  void forward(const AttentionParams& p, BlockMask mask, const void* q, const void* k,
               const void* v, const std::int64_t* q_pos, const std::int64_t* k_pos, void* o,
               void* lse) override {
    validate(p, mask);
    if (p.cq == 0) return;
    std::optional<std::string> why = cudnn_unsupported_reason(p, mask, dtype_);
    if (!why && !(aligned16(q) && aligned16(k) && aligned16(v) && aligned16(o) && aligned16(lse)))
      why = kMisaligned;
    const CachedGraph* cached =
        graph_or_fallback(forward_cache_, p, mask, build_forward_graph, why);
    if (cached == nullptr) {
      fallback_->forward(p, mask, q, k, v, q_pos, k_pos, o, lse);
      return;
    }
    std::unordered_map<std::int64_t, void*> pack{{kUidQ, const_cast<void*>(q)},
                                                 {kUidK, const_cast<void*>(k)},
                                                 {kUidV, const_cast<void*>(v)},
                                                 {kUidO, o},
                                                 {kUidStats, lse}};
    check_fe(cached->graph->execute(handle_.get(), pack, workspace_.get()), "cudnn sdpa execute");
  }

  void merge(std::int64_t cq, int heads, int head_dim, const void* o_a, std::int64_t ld_a,
             const void* lse_a, const void* o_b, std::int64_t ld_b, const void* lse_b, void* o,
             std::int64_t ld_o, void* lse) override {
    fallback_->merge(cq, heads, head_dim, o_a, ld_a, lse_a, o_b, ld_b, lse_b, o, ld_o, lse);
  }
  DType grad_type() const override { return DType::fp32; }
  // delta feeds the suite's kernel (the fallback); cuDNN's graph forms its own from O and dO.
  void backward_delta(std::int64_t cq, int heads, int head_dim, const void* o, const void* d_o,
                      std::int64_t ld_o, void* delta) override {
    fallback_->backward_delta(cq, heads, head_dim, o, d_o, ld_o, delta);
  }
  void backward(const AttentionParams& p, BlockMask mask, const void* q, const void* k,
                const void* v, const void* o, const void* d_o, const void* lse, const void* delta,
                const std::int64_t* q_pos, const std::int64_t* k_pos, void* dq, void* dk,
                void* dv) override {
    validate(p, mask);
    if (p.cq == 0 || p.ck == 0) return;  // nothing to add
    std::optional<std::string> why = cudnn_backward_unsupported_reason(p, mask, dtype_);
    if (!why && !(aligned16(q) && aligned16(k) && aligned16(v) && aligned16(o) && aligned16(d_o) &&
                  aligned16(lse)))
      why = kMisaligned;
    const CachedGraph* cached =
        graph_or_fallback(backward_cache_, p, mask, build_backward_graph, why);
    if (cached == nullptr) {
      fallback_->backward(p, mask, q, k, v, o, d_o, lse, delta, q_pos, k_pos, dq, dk, dv);
      return;
    }
    // The block's dQ, dK, dV as cuDNN writes them: dense bf16 rows in scratch, then added into
    // the fp32 accumulators (the suite's layouts, strides p.ld_q / p.ld_k / p.ld_v).
    const std::int64_t q_row = static_cast<std::int64_t>(p.heads) * p.head_dim;
    const std::int64_t kv_row = static_cast<std::int64_t>(p.kv_heads) * p.head_dim;
    const std::size_t q_bytes = round_up(static_cast<std::size_t>(p.cq * q_row) * 2);
    const std::size_t kv_bytes = round_up(static_cast<std::size_t>(p.ck * kv_row) * 2);
    grow(scratch_, q_bytes + 2 * kv_bytes);
    auto* s_dq = scratch_.as<unsigned char>();
    unsigned char* s_dk = s_dq + q_bytes;
    unsigned char* s_dv = s_dk + kv_bytes;
    std::unordered_map<std::int64_t, void*> pack{{kUidQ, const_cast<void*>(q)},
                                                 {kUidK, const_cast<void*>(k)},
                                                 {kUidV, const_cast<void*>(v)},
                                                 {kUidO, const_cast<void*>(o)},
                                                 {kUidDO, const_cast<void*>(d_o)},
                                                 {kUidStats, const_cast<void*>(lse)},
                                                 {kUidDQ, s_dq},
                                                 {kUidDK, s_dk},
                                                 {kUidDV, s_dv}};
    check_fe(cached->graph->execute(handle_.get(), pack, workspace_.get()),
             "cudnn sdpa_backward execute");
    accumulate_rows(stream_, static_cast<float*>(dq), p.ld_q, DType::bf16, s_dq, q_row, p.cq,
                    q_row);
    accumulate_rows(stream_, static_cast<float*>(dk), p.ld_k, DType::bf16, s_dk, kv_row, p.ck,
                    kv_row);
    accumulate_rows(stream_, static_cast<float*>(dv), p.ld_v, DType::bf16, s_dv, kv_row, p.ck,
                    kv_row);
  }
  void accumulate(void* dst, DType dst_type, const void* src, std::int64_t n) override {
    cuda::accumulate(stream_, dst, dst_type, static_cast<const float*>(src), n);
  }

 private:
  using Cache = std::map<GraphKey, CachedGraph>;
  using Builder = CachedGraph (*)(cudnnHandle_t, const AttentionParams&, BlockMask);

  // The frontend declares 16-byte alignment on every tensor, the stats too, and the backend
  // does not check: a ring segment's lse can start mid-vector.
  static constexpr const char* kMisaligned = "a pointer not 16-byte aligned";

  static std::size_t round_up(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

  static void validate(const AttentionParams& p, BlockMask mask) {
    validate_attention(p);
    if (!mask_hint_consistent(p, mask))
      throw std::invalid_argument("cudnn attention: causal mask hint on a non-causal block");
  }

  // Replaces `buf` by one of at least `need` bytes when it is smaller.
  void grow(DeviceBuffer& buf, std::size_t need) {
    if (need <= buf.bytes()) return;
    // The old buffer may still be in use by queued work on the stream.
    SUITE_CUDA_CHECK(cudaStreamSynchronize(stream_));
    buf = DeviceBuffer(need);
  }

  void note_fallback(const std::string& why) {
    ++fallbacks_;
    if (fallback_reason_.empty()) fallback_reason_ = why;
  }

  // The block's graph, or nullptr (counted as a fallback) when `why` rules cuDNN out already
  // or cuDNN has no engine for the block.
  const CachedGraph* graph_or_fallback(Cache& cache, const AttentionParams& p, BlockMask mask,
                                       Builder build, std::optional<std::string> why) {
    if (!why) {
      const CachedGraph& cached = graph_for(cache, p, mask, build);
      if (cached.graph) return &cached;
      why = cached.unsupported;
    }
    note_fallback(*why);
    return nullptr;
  }

  // Builds (first use of a block shape) or finds the block's graph; grows the workspace, which
  // the forward and backward graphs share (one stream: never two graphs at once).
  const CachedGraph& graph_for(Cache& cache, const AttentionParams& p, BlockMask mask,
                               Builder build) {
    const GraphKey key = key_of(p, mask, dtype_);
    auto it = cache.find(key);
    if (it == cache.end()) {
      it = cache.emplace(key, build(handle_.get(), p, mask)).first;
      grow(workspace_, static_cast<std::size_t>(it->second.workspace));
    }
    return it->second;
  }

  cudaStream_t stream_;
  DType dtype_;
  CudnnHandle handle_;
  std::unique_ptr<AttentionEngine> fallback_;
  std::string version_;
  Cache forward_cache_, backward_cache_;
  DeviceBuffer workspace_{0};
  DeviceBuffer scratch_{0};  // the backward's bf16 dQ, dK, dV of one block
  std::int64_t fallbacks_ = 0;
  std::string fallback_reason_;
};

}  // namespace

std::string cudnn_library_description() {
  const auto runtime = static_cast<std::int64_t>(cudnnGetVersion());
  std::string where = "?";
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cudnnGetVersion), &info) != 0 && info.dli_fname != nullptr)
    where = info.dli_fname;
  return "cudnn " + cudnn_version_text(runtime) + " (" + where + "; built against " +
         cudnn_version_text(CUDNN_VERSION) + ", frontend " +
         std::to_string(CUDNN_FRONTEND_MAJOR_VERSION) + "." +
         std::to_string(CUDNN_FRONTEND_MINOR_VERSION) + "." +
         std::to_string(CUDNN_FRONTEND_PATCH_VERSION) + ")";
}

std::unique_ptr<AttentionEngine> make_cudnn_attention_engine(
    cudaStream_t stream, DType dtype, std::unique_ptr<AttentionEngine> fallback) {
  if (dtype != DType::bf16)
    throw std::invalid_argument("cudnn attention: storage " + std::string(dtype_name(dtype)) +
                                " unsupported (bf16)");
  if (!fallback) throw std::invalid_argument("cudnn attention: a fallback engine is required");
  return std::make_unique<CudnnEngine>(stream, dtype, std::move(fallback));
}

}  // namespace suite::kernels::cuda
