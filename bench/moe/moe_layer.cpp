#include "bench/moe/moe_layer.hpp"

#include <algorithm>
#include <cstring>

#include "common/errors.hpp"
#include "common/typed_host.hpp"

namespace suite::moe {
namespace {

namespace km = kernels::moe;

template <class T>
std::size_t bytes_of(const std::vector<T>& v) {
  return v.size() * sizeof(T);
}

}  // namespace

// Grows a device buffer to at least `bytes` (never to zero bytes, so pointers stay valid for
// zero-length transfers). Sizes repeat from step to step, so growth happens in warm-up.
void MoeLayer::ensure(Buffer& b, std::size_t bytes) {
  bytes = std::max<std::size_t>(bytes, 64);
  if (b.bytes() < bytes) b = device_.alloc(bytes);
}

MoeLayer::MoeLayer(const MoeConfig& cfg, Device& device, Comm& group, MoeOps& ops,
                   std::int64_t first_token)
    : cfg_(cfg),
      device_(device),
      comm_(group),
      ops_(ops),
      rank_(group.rank()),
      ranks_(group.size()),
      e_(dtype_size(cfg.dtype)) {
  SUITE_CHECK(ranks_ == cfg.n_e, "the group's size must be the case's N_e");
  const std::int64_t T = cfg.tokens, h = cfg.h, E = cfg.experts;
  capacity_ = km::expert_capacity(cfg.capacity_factor, cfg.k, T * cfg.n_e, cfg.experts);
  x_ = device.alloc(static_cast<std::size_t>(T * h) * e_);
  upload_values(x_, init_block(cfg, Tensor::input, 0, first_token, T, h));
  w_router_ = device.alloc(static_cast<std::size_t>(h * E) * e_);
  upload_values(w_router_, init_block(cfg, Tensor::router, 0, 0, h, E));
  const std::vector<float> bias = skew_logit_bias(cfg);
  logit_bias_ = device.alloc(bytes_of(bias));
  upload(logit_bias_, bias.data(), bytes_of(bias));
  set_select_bias(std::vector<float>(static_cast<std::size_t>(E), 0.0f));
  for (int j = 0; j < cfg.experts_per_rank(); ++j) {
    const int expert = rank_ * cfg.experts_per_rank() + j;
    w1_.push_back(device.alloc(static_cast<std::size_t>(h * cfg.w1_cols()) * e_));
    upload_values(w1_.back(), init_block(cfg, Tensor::w1, expert, 0, h, cfg.w1_cols()));
    w2_.push_back(device.alloc(static_cast<std::size_t>(cfg.d_ff * h) * e_));
    upload_values(w2_.back(), init_block(cfg, Tensor::w2, expert, 0, cfg.d_ff, h));
  }
  logits_ = device.alloc(static_cast<std::size_t>(T * E) * e_);
  chosen_dev_ = device.alloc(static_cast<std::size_t>(T * cfg.k) * sizeof(std::int32_t));
  gates_dev_ = device.alloc(static_cast<std::size_t>(T * cfg.k) * sizeof(float));
  prob_sum_dev_ = device.alloc(static_cast<std::size_t>(E) * sizeof(float));
  out_ = device.alloc(static_cast<std::size_t>(T * h) * e_);
  counts_send_ = device.alloc(static_cast<std::size_t>(E) * sizeof(double));
  counts_recv_ = device.alloc(static_cast<std::size_t>(E) * sizeof(double));
  chosen_.resize(static_cast<std::size_t>(T * cfg.k));
  gates_.resize(chosen_.size());
  keep_.assign(chosen_.size(), 1);
  prob_sum_.assign(static_cast<std::size_t>(E), 0.0f);
  if (!cfg.backward()) return;
  dy_ = device.alloc(static_cast<std::size_t>(T * h) * e_);
  upload_values(dy_, init_block(cfg, Tensor::grad_output, 0, first_token, T, h));
  dx_ = device.alloc(static_cast<std::size_t>(T * h) * e_);
  dw_router_ = device.alloc(static_cast<std::size_t>(h * E) * e_);
  dlogits_ = device.alloc(static_cast<std::size_t>(T * E) * e_);
  gate_grad_dev_ = device.alloc(static_cast<std::size_t>(T * cfg.k) * sizeof(float));
  prob_grad_dev_ = device.alloc(static_cast<std::size_t>(E) * sizeof(float));
  routed_send_ = device.alloc(static_cast<std::size_t>(E) * sizeof(double));
  routed_recv_ = device.alloc(static_cast<std::size_t>(E * ranks_) * sizeof(double));
  for (std::size_t j = 0; j < w1_.size(); ++j) {
    dw1_.push_back(device.alloc(w1_[j].bytes()));
    dw2_.push_back(device.alloc(w2_[j].bytes()));
  }
}

void MoeLayer::set_select_bias(const std::vector<float>& bias) {
  SUITE_CHECK(bias.size() == static_cast<std::size_t>(cfg_.experts), "one bias per expert");
  ensure(select_bias_, bytes_of(bias));
  upload(select_bias_, bias.data(), bytes_of(bias));
}

void MoeLayer::route() {
  const std::int64_t T = cfg_.tokens, E = cfg_.experts;
  const int k = cfg_.k;
  ops_.router_logits(T, E, cfg_.h, x_.data(), w_router_.data(), logits_.data());
  std::vector<float> zeros(static_cast<std::size_t>(E), 0.0f);
  upload(prob_sum_dev_, zeros.data(), bytes_of(zeros));
  ops_.router(T, cfg_.experts, k, logits_.data(), logit_bias_.as<float>(), select_bias_.as<float>(),
              chosen_dev_.as<std::int32_t>(), gates_dev_.as<float>(), prob_sum_dev_.as<float>());
  device_.copy_to_host(chosen_.data(), chosen_dev_.data(), bytes_of(chosen_));
  device_.copy_to_host(gates_.data(), gates_dev_.data(), bytes_of(gates_));
  device_.copy_to_host(prob_sum_.data(), prob_sum_dev_.data(), bytes_of(prob_sum_));

  measured_ = {};
  if (capacity_ >= 0) {
    // Every rank needs the group's (expert, gate) pairs to apply the same drop rule.
    const std::int64_t copies = T * k;
    std::vector<double> meta(static_cast<std::size_t>(2 * copies));
    for (std::int64_t c = 0; c < copies; ++c) {
      meta[static_cast<std::size_t>(2 * c)] = chosen_[static_cast<std::size_t>(c)];
      meta[static_cast<std::size_t>(2 * c + 1)] = gates_[static_cast<std::size_t>(c)];
    }
    const std::int64_t before = comm_.bytes().sent;
    std::vector<double> all = group_gather(meta);
    measured_.control += comm_.bytes().sent - before;
    ++fwd_calls_.all_gather;
    const std::int64_t total = copies * ranks_;
    std::vector<std::int32_t> all_chosen(static_cast<std::size_t>(total));
    std::vector<float> all_gates(static_cast<std::size_t>(total));
    for (std::int64_t c = 0; c < total; ++c) {
      all_chosen[static_cast<std::size_t>(c)] =
          static_cast<std::int32_t>(all[static_cast<std::size_t>(2 * c)]);
      all_gates[static_cast<std::size_t>(c)] =
          static_cast<float>(all[static_cast<std::size_t>(2 * c + 1)]);
    }
    std::vector<std::uint8_t> all_keep(static_cast<std::size_t>(total));
    km::capacity_keep(total, all_chosen.data(), all_gates.data(), cfg_.experts, capacity_,
                      all_keep.data());
    std::copy_n(all_keep.begin() + rank_ * copies, copies, keep_.begin());
  }
  plan_ = km::plan_dispatch(T, k, cfg_.experts, ranks_, chosen_.data(), keep_.data());
  ensure(send_src_, bytes_of(plan_.send_src));
  upload(send_src_, plan_.send_src.data(), bytes_of(plan_.send_src));
  ensure(slot_pos_, bytes_of(plan_.slot_pos));
  upload(slot_pos_, plan_.slot_pos.data(), bytes_of(plan_.slot_pos));
}

void MoeLayer::permute_in() {
  const std::int64_t rows = static_cast<std::int64_t>(plan_.send_src.size());
  ensure(send_, static_cast<std::size_t>(rows * cfg_.h) * e_);
  ops_.gather_rows(rows, cfg_.h, send_src_.as<std::int64_t>(), x_.data(), send_.data());
}

void MoeLayer::dispatch() {
  const int per_rank = cfg_.experts_per_rank();
  const std::int64_t h = cfg_.h;
  // Counts first: block (destination, local expert) -> how many rows follow.
  std::vector<double> counts(plan_.send_counts.begin(), plan_.send_counts.end());
  upload(counts_send_, counts.data(), bytes_of(counts));
  std::int64_t before = comm_.bytes().sent;
  comm_.all_to_all(counts_send_.data(), counts_recv_.data(), static_cast<std::size_t>(per_rank),
                   DType::fp64);
  measured_.control += comm_.bytes().sent - before;
  ++fwd_calls_.all_to_all;
  device_.copy_to_host(counts.data(), counts_recv_.data(), bytes_of(counts));
  recv_counts_.assign(counts.begin(), counts.end());

  send_elems_.assign(static_cast<std::size_t>(ranks_), 0);
  recv_elems_.assign(static_cast<std::size_t>(ranks_), 0);
  send_displs_.assign(static_cast<std::size_t>(ranks_), 0);
  recv_displs_.assign(static_cast<std::size_t>(ranks_), 0);
  std::size_t send_off = 0, recv_off = 0;
  for (int r = 0; r < ranks_; ++r) {
    std::int64_t s = 0, g = 0;
    for (int j = 0; j < per_rank; ++j) {
      s += plan_.send_counts[static_cast<std::size_t>(r * per_rank + j)];
      g += recv_counts_[static_cast<std::size_t>(r * per_rank + j)];
    }
    send_elems_[r] = static_cast<std::size_t>(s * h);
    recv_elems_[r] = static_cast<std::size_t>(g * h);
    send_displs_[r] = send_off;
    recv_displs_[r] = recv_off;
    send_off += send_elems_[r];
    recv_off += recv_elems_[r];
  }
  recv_rows_ = static_cast<std::int64_t>(recv_off) / h;
  ensure(recv_, recv_off * e_);
  measured_.dispatch = all_to_all_v_bytes(send_.data(), send_elems_, send_displs_, recv_.data(),
                                          recv_elems_, recv_displs_);
  ++fwd_calls_.all_to_all_v;
}

std::int64_t MoeLayer::all_to_all_v_bytes(const void* send,
                                          const std::vector<std::size_t>& send_elems,
                                          const std::vector<std::size_t>& send_displs, void* recv,
                                          const std::vector<std::size_t>& recv_elems,
                                          const std::vector<std::size_t>& recv_displs) {
  const std::size_t sent = send_displs.back() + send_elems.back(),
                    got = recv_displs.back() + recv_elems.back();
  if (sent > comm_.max_count() || got > comm_.max_count())
    throw std::runtime_error("moe: one all-to-all-v of " + std::to_string(std::max(sent, got)) +
                             " elements is above this transport's limit");
  const std::int64_t before = comm_.bytes().sent;
  comm_.all_to_all_v(send, send_elems, send_displs, recv, recv_elems, recv_displs, cfg_.dtype);
  return comm_.bytes().sent - before;
}

void MoeLayer::regroup() {
  regroup_ = km::plan_regroup(ranks_, cfg_.experts_per_rank(), recv_counts_.data());
  ensure(regroup_gather_, bytes_of(regroup_.gather));
  upload(regroup_gather_, regroup_.gather.data(), bytes_of(regroup_.gather));
  ensure(regroup_scatter_, bytes_of(regroup_.scatter));
  upload(regroup_scatter_, regroup_.scatter.data(), bytes_of(regroup_.scatter));
  ensure(expert_in_, static_cast<std::size_t>(recv_rows_ * cfg_.h) * e_);
  ops_.gather_rows(recv_rows_, cfg_.h, regroup_gather_.as<std::int64_t>(), recv_.data(),
                   expert_in_.data());
}

void MoeLayer::experts() {
  const std::int64_t h = cfg_.h, d_ff = cfg_.d_ff, w1c = cfg_.w1_cols();
  ensure(hidden_, static_cast<std::size_t>(recv_rows_ * w1c) * e_);
  ensure(act_, static_cast<std::size_t>(recv_rows_ * d_ff) * e_);
  ensure(expert_out_, static_cast<std::size_t>(recv_rows_ * h) * e_);
  std::int64_t offset = 0;
  // One GEMM per local expert over all of its rows (never per token).
  for (std::size_t j = 0; j < w1_.size(); ++j) {
    const std::int64_t n = regroup_.expert_rows[j];
    if (n > 0)
      ops_.gemm(n, w1c, h, row(expert_in_, offset, h), w1_[j].data(), row(hidden_, offset, w1c));
    offset += n;
  }
  if (cfg_.mlp == Mlp::swiglu)
    ops_.silu_mul(recv_rows_, d_ff, hidden_.data(), act_.data());
  else
    ops_.gelu(recv_rows_ * d_ff, hidden_.data(), act_.data());
  offset = 0;
  for (std::size_t j = 0; j < w2_.size(); ++j) {
    const std::int64_t n = regroup_.expert_rows[j];
    if (n > 0)
      ops_.gemm(n, h, d_ff, row(act_, offset, d_ff), w2_[j].data(), row(expert_out_, offset, h));
    offset += n;
  }
}

void MoeLayer::combine() {
  const std::int64_t h = cfg_.h;
  ensure(back_send_, static_cast<std::size_t>(recv_rows_ * h) * e_);
  ops_.gather_rows(recv_rows_, h, regroup_scatter_.as<std::int64_t>(), expert_out_.data(),
                   back_send_.data());
  const std::size_t sent_rows = plan_.send_src.size();
  ensure(back_recv_, sent_rows * static_cast<std::size_t>(h) * e_);
  // The reverse exchange: what came from rank r goes back to rank r.
  measured_.combine = all_to_all_v_bytes(back_send_.data(), recv_elems_, recv_displs_,
                                         back_recv_.data(), send_elems_, send_displs_);
  ++fwd_calls_.all_to_all_v;
  ops_.combine(cfg_.tokens, cfg_.k, h, slot_pos_.as<std::int64_t>(), gates_dev_.as<float>(),
               back_recv_.data(), out_.data());
}

void MoeLayer::forward(PhaseTimer& phases) {
  fwd_calls_ = {};
  phases.time("route", [&] { route(); });
  phases.time("permute", [&] { permute_in(); });
  phases.time("dispatch", [&] { dispatch(); });
  phases.time("permute", [&] { regroup(); });
  phases.time("expert", [&] { experts(); });
  phases.time("combine", [&] { combine(); });
}

StepBytes MoeLayer::implied_bytes() const {
  const int per_rank = cfg_.experts_per_rank();
  const std::int64_t row_bytes = cfg_.h * static_cast<std::int64_t>(e_);
  StepBytes b;
  b.control = static_cast<std::int64_t>(ranks_ - 1) * per_rank * 8;
  if (capacity_ >= 0)
    b.control += static_cast<std::int64_t>(ranks_ - 1) * 2 * cfg_.tokens * cfg_.k * 8;
  for (int r = 0; r < ranks_; ++r) {
    if (r == rank_) continue;
    for (int j = 0; j < per_rank; ++j) {
      b.dispatch += plan_.send_counts[static_cast<std::size_t>(r * per_rank + j)] * row_bytes;
      b.combine += recv_counts_[static_cast<std::size_t>(r * per_rank + j)] * row_bytes;
    }
  }
  return b;
}

double MoeLayer::expert_flops() const {
  const double per_row = (cfg_.mlp == Mlp::swiglu ? 6.0 : 4.0) * cfg_.h * cfg_.d_ff;
  return per_row * static_cast<double>(recv_rows_);
}

std::vector<double> MoeLayer::group_sum(const std::vector<double>& v) {
  Buffer in = device_.alloc(std::max<std::size_t>(bytes_of(v), 8)),
         out = device_.alloc(std::max<std::size_t>(bytes_of(v), 8));
  upload(in, v.data(), bytes_of(v));
  comm_.all_reduce(in.data(), out.data(), v.size(), DType::fp64);
  std::vector<double> sum(v.size());
  device_.copy_to_host(sum.data(), out.data(), bytes_of(sum));
  return sum;
}

std::vector<double> MoeLayer::group_gather(const std::vector<double>& v) {
  std::vector<double> all(v.size() * static_cast<std::size_t>(ranks_));
  ensure(meta_send_, bytes_of(v));
  ensure(meta_recv_, bytes_of(all));
  upload(meta_send_, v.data(), bytes_of(v));
  comm_.all_gather(meta_send_.data(), meta_recv_.data(), v.size(), DType::fp64);
  device_.copy_to_host(all.data(), meta_recv_.data(), bytes_of(all));
  return all;
}

void MoeLayer::upload(Buffer& dst, const void* src, std::size_t bytes) {
  if (bytes > 0) device_.copy_from_host(dst.data(), src, bytes);
}

void MoeLayer::upload_values(Buffer& dst, const std::vector<double>& values) {
  auto bytes = encode(values, cfg_.dtype);
  upload(dst, bytes.data(), bytes.size());
}

std::vector<double> MoeLayer::to_host(const Buffer& b, std::int64_t n) const {
  std::vector<std::byte> raw(static_cast<std::size_t>(n) * e_);
  device_.copy_to_host(raw.data(), b.data(), raw.size());
  return decode(raw.data(), static_cast<std::size_t>(n), cfg_.dtype);
}

void* MoeLayer::row(const Buffer& b, std::int64_t r, std::int64_t cols) const {
  return static_cast<std::byte*>(b.data()) + r * cols * static_cast<std::int64_t>(e_);
}

}  // namespace suite::moe
