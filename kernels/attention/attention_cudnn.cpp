// cuDNN SDPA forward behind AttentionEngine. The only translation unit that includes the cuDNN
// frontend (it takes minutes to compile); everything cuDNN-specific stays in this file.
//
// Layout: the suite's q [cq, heads, d] with row stride ld_q is SDPA's {b=1, heads, s=cq, d}
// with strides {cq*ld_q, d, ld_q, 1} (no transpose); K and V likewise with kv_heads (GQA).
// With generate_stats cuDNN returns Stats = max + ln(sum exp) of the scaled scores, fp32,
// dims {1, heads, cq, 1}: given packed strides {heads*cq, cq, 1, 1} that is exactly the
// suite's lse [heads, cq] in natural log, written in place with no conversion kernel.
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

#include "kernels/attention/cudnn_support.hpp"
#include "kernels/core/cuda_check.hpp"
#include "kernels/core/device_buffer.hpp"

namespace suite::kernels::cuda {
namespace {

namespace fe = cudnn_frontend;

constexpr std::int64_t kUidQ = 1, kUidK = 2, kUidV = 3, kUidO = 4, kUidStats = 5;

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

CachedGraph build_graph(cudnnHandle_t handle, const AttentionParams& p, BlockMask mask) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const std::int64_t d = p.head_dim;
  auto tensor = [&](const char* name, std::int64_t uid, int heads, std::int64_t s,
                    std::int64_t ld) {
    return g->tensor(fe::graph::Tensor_attributes()
                         .set_name(name)
                         .set_uid(uid)
                         .set_dim({1, heads, s, d})
                         .set_stride({s * ld, d, ld, 1}));
  };
  auto q = tensor("Q", kUidQ, p.heads, p.cq, p.ld_q);
  auto k = tensor("K", kUidK, p.kv_heads, p.ck, p.ld_k);
  auto v = tensor("V", kUidV, p.kv_heads, p.ck, p.ld_v);
  auto opts = fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(true).set_attn_scale(
      static_cast<float>(p.softmax_scale));
  if (mask == BlockMask::causal_top_left) opts.set_causal_mask(true);
  if (mask == BlockMask::causal_bottom_right) opts.set_causal_mask_bottom_right(true);
  auto [o, stats] = g->sdpa(q, k, v, opts);
  o->set_output(true)
      .set_uid(kUidO)
      .set_dim({1, p.heads, p.cq, d})
      .set_stride({p.cq * p.ld_o, d, p.ld_o, 1});
  stats->set_output(true)
      .set_uid(kUidStats)
      .set_data_type(fe::DataType_t::FLOAT)
      .set_dim({1, p.heads, p.cq, 1})
      .set_stride({p.heads * p.cq, p.cq, 1, 1});

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
    validate_attention(p);
    if (!mask_hint_consistent(p, mask))
      throw std::invalid_argument("cudnn attention: causal mask hint on a non-causal block");
    if (p.cq == 0) return;
    std::optional<std::string> why = cudnn_unsupported_reason(p, mask, dtype_);
    // The frontend declares 16-byte alignment on every tensor, the stats too, and the backend
    // does not check: a ring segment's lse can start mid-vector.
    if (!why && !(aligned16(q) && aligned16(k) && aligned16(v) && aligned16(o) && aligned16(lse)))
      why = "a pointer not 16-byte aligned";
    const CachedGraph* cached = nullptr;
    if (!why) {
      cached = &graph_for(p, mask);
      if (!cached->graph) why = cached->unsupported;
    }
    if (why) {
      ++fallbacks_;
      if (fallback_reason_.empty()) fallback_reason_ = *why;
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
  DType grad_type() const override { return fallback_->grad_type(); }
  void backward_delta(std::int64_t cq, int heads, int head_dim, const void* o, const void* d_o,
                      std::int64_t ld_o, void* delta) override {
    fallback_->backward_delta(cq, heads, head_dim, o, d_o, ld_o, delta);
  }
  void backward(const AttentionParams& p, BlockMask mask, const void* q, const void* k,
                const void* v, const void* o, const void* d_o, const void* lse, const void* delta,
                const std::int64_t* q_pos, const std::int64_t* k_pos, void* dq, void* dk,
                void* dv) override {
    fallback_->backward(p, mask, q, k, v, o, d_o, lse, delta, q_pos, k_pos, dq, dk, dv);
  }
  void accumulate(void* dst, DType dst_type, const void* src, std::int64_t n) override {
    fallback_->accumulate(dst, dst_type, src, n);
  }

 private:
  // Builds (first use of a block shape) or finds the block's graph; grows the workspace.
  const CachedGraph& graph_for(const AttentionParams& p, BlockMask mask) {
    const GraphKey key = key_of(p, mask, dtype_);
    auto it = cache_.find(key);
    if (it == cache_.end()) {
      it = cache_.emplace(key, build_graph(handle_.get(), p, mask)).first;
      const auto need = static_cast<std::size_t>(it->second.workspace);
      if (need > workspace_.bytes()) {
        // The old workspace may still be in use by queued work on the stream.
        SUITE_CUDA_CHECK(cudaStreamSynchronize(stream_));
        workspace_ = DeviceBuffer(need);
      }
    }
    return it->second;
  }

  cudaStream_t stream_;
  DType dtype_;
  CudnnHandle handle_;
  std::unique_ptr<AttentionEngine> fallback_;
  std::string version_;
  std::map<GraphKey, CachedGraph> cache_;
  DeviceBuffer workspace_{0};
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
