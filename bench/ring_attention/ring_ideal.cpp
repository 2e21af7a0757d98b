#include "bench/ring_attention/ring_ideal.hpp"

#include <cmath>
#include <vector>

#include "bench/ring_attention/attention_inputs.hpp"
#include "common/device/typed_host.hpp"
#include "common/harness/stats.hpp"
#include "common/sim/sim.hpp"
#include "common/transport/mpi_env.hpp"

namespace suite::ring {
namespace {

constexpr double kMaxIdealSeconds = 2.0;  // per iteration, forward and backward together

}  // namespace

IdealTimes measure_ideal(const RingConfig& cfg, Device& device, kernels::AttentionEngine& engine,
                         double flops_per_s, bool backward, int iterations) {
  IdealTimes out;
  // With documents: one varlen attention of the whole pack (every document's own pairs) over
  // its tokens (padding slots are no tokens).
  const PackedDocuments* docs = cfg.documents();
  const std::int64_t s = docs ? docs->tokens() : cfg.s();
  const double pairs = docs         ? static_cast<double>(docs->total_visible_pairs(cfg.causal))
                       : cfg.causal ? 0.5 * s * (s + 1.0)
                                    : static_cast<double>(s) * s;
  const double flops = (backward ? 14.0 : 4.0) * cfg.head_dim * cfg.heads * cfg.batch * pairs;
  const std::size_t e = cfg.elem(), ge = dtype_size(engine.grad_type());
  const std::size_t q_bytes = static_cast<std::size_t>(s * cfg.q_row()) * e;
  const std::size_t kv_bytes = static_cast<std::size_t>(s * cfg.kv_row()) * e;
  const std::size_t need =
      4 * q_bytes + 2 * kv_bytes + (q_bytes + 2 * kv_bytes) / e * ge + 16 * s * cfg.heads;
  const double seconds = flops / flops_per_s;
  if (sim::modeled()) {  // what the modeled engine would inject, without s-token buffers
    out.fwd_s = 4.0 * cfg.head_dim * cfg.heads * cfg.batch * pairs / sim::modeled_flops();
    out.bwd_s =
        backward ? 10.0 * cfg.head_dim * cfg.heads * cfg.batch * pairs / sim::modeled_flops() : 0.0;
    return out;
  }
  const bool too_long = !(seconds <= kMaxIdealSeconds);
  const bool too_big = static_cast<double>(need) > 0.5 * device.memory_available();
  if (all_reduce_max(too_long || too_big ? 1.0 : 0.0) > 0) {
    out.skipped = true;
    out.why_skipped = "one rank's full attention over s = " + std::to_string(s) +
                      " tokens would take about " + std::to_string(seconds) + " s (limit " +
                      std::to_string(kMaxIdealSeconds) + " s) or more memory than is free";
    return out;
  }
  std::vector<std::int64_t> pos(static_cast<std::size_t>(s));
  for (std::int64_t i = 0; i < s; ++i)
    pos[static_cast<std::size_t>(i)] = i;
  if (docs) pos = docs->token_positions();
  auto upload = [&](InputTensor which, int heads) {
    const auto bytes =
        encode(attention_input(1, which, pos, cfg.batch, heads, cfg.head_dim), cfg.dtype);
    Buffer b = device.alloc(bytes.size());
    device.copy_from_host(b.data(), bytes.data(), bytes.size());
    return b;
  };
  Buffer q = upload(InputTensor::q, cfg.heads), k = upload(InputTensor::k, cfg.kv_heads),
         v = upload(InputTensor::v, cfg.kv_heads), d_o = upload(InputTensor::d_o, cfg.heads);
  Buffer o = device.alloc(q_bytes);
  const std::size_t stats = static_cast<std::size_t>(cfg.heads * s) * engine.lse_elem_size();
  Buffer lse = device.alloc(stats), delta = device.alloc(stats);
  Buffer dq = device.alloc(q_bytes / e * ge), dk = device.alloc(kv_bytes / e * ge),
         dv = device.alloc(kv_bytes / e * ge);
  const std::vector<std::int64_t> mask_pos = docs ? docs->tagged(pos) : pos;
  Buffer d_pos = device.alloc(mask_pos.size() * sizeof(std::int64_t));
  device.copy_from_host(d_pos.data(), mask_pos.data(), d_pos.bytes());
  const auto* p_pos = d_pos.as<std::int64_t>();

  auto p = kernels::make_attention_params(s, s, cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.causal);
  p.ld_q = p.ld_o = cfg.q_row();
  p.ld_k = p.ld_v = cfg.kv_row();
  p.known_visible_pairs = static_cast<std::int64_t>(pairs);
  const auto mask = docs && docs->count() > 1 ? kernels::BlockMask::positions
                    : cfg.causal              ? kernels::BlockMask::causal_top_left
                                              : kernels::BlockMask::full;
  const std::int64_t q_head_row = static_cast<std::int64_t>(cfg.heads) * cfg.head_dim;
  const std::int64_t kv_head_row = static_cast<std::int64_t>(cfg.kv_heads) * cfg.head_dim;
  auto at = [](const Buffer& b, std::int64_t elems, std::size_t size) {
    return b.as<std::byte>() + elems * static_cast<std::int64_t>(size);
  };
  auto forward = [&] {  // one sequence of the micro-batch at a time, as the ring does
    for (std::int64_t bi = 0; bi < cfg.batch; ++bi)
      engine.forward(p, mask, at(q, bi * q_head_row, e), at(k, bi * kv_head_row, e),
                     at(v, bi * kv_head_row, e), p_pos, p_pos, at(o, bi * q_head_row, e),
                     lse.data());
  };
  auto timer = device.make_timer();
  std::vector<double> fwd, bwd;
  for (int it = 0; it < iterations + 1; ++it) {  // one untimed warm-up
    device.synchronize();
    timer->start();
    forward();
    timer->stop();
    const double tf = all_reduce_max(timer->seconds());
    double tb = 0;
    if (backward) {
      device.fill_zero(dq.data(), dq.bytes());
      device.fill_zero(dk.data(), dk.bytes());
      device.fill_zero(dv.data(), dv.bytes());
      // Per sequence: its forward statistics (untimed), then delta and the gradients (timed).
      for (std::int64_t bi = 0; bi < cfg.batch; ++bi) {
        engine.forward(p, mask, at(q, bi * q_head_row, e), at(k, bi * kv_head_row, e),
                       at(v, bi * kv_head_row, e), p_pos, p_pos, at(o, bi * q_head_row, e),
                       lse.data());
        device.synchronize();
        timer->start();
        engine.backward_delta(s, cfg.heads, cfg.head_dim, at(o, bi * q_head_row, e),
                              at(d_o, bi * q_head_row, e), p.ld_o, delta.data());
        engine.backward(p, mask, at(q, bi * q_head_row, e), at(k, bi * kv_head_row, e),
                        at(v, bi * kv_head_row, e), at(o, bi * q_head_row, e),
                        at(d_o, bi * q_head_row, e), lse.data(), delta.data(), p_pos, p_pos,
                        at(dq, bi * q_head_row, ge), at(dk, bi * kv_head_row, ge),
                        at(dv, bi * kv_head_row, ge));
        timer->stop();
        tb += timer->seconds();
      }
      tb = all_reduce_max(tb);
    }
    if (it == 0) continue;
    fwd.push_back(tf);
    bwd.push_back(tb);
  }
  out.fwd_s = percentile(fwd, 0.5);
  out.bwd_s = percentile(bwd, 0.5);
  return out;
}

}  // namespace suite::ring
