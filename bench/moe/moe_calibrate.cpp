#include "bench/moe/moe_calibrate.hpp"

#include <algorithm>
#include <vector>

#include "common/harness/stats.hpp"
#include "common/sim/sim.hpp"

namespace suite::moe {
namespace {

constexpr int kReps = 5;

// Median seconds of reps() runs of f() after one untimed run (none in modeled compute);
// before() runs untimed ahead of each (a barrier, so that a collective is timed from a common
// start).
int reps() {
  return sim::modeled() ? 1 : kReps;
}
template <class B, class F>
double median_seconds(Device& device, B&& before, F&& f) {
  auto timer = device.make_timer();
  if (!sim::modeled()) f();
  device.synchronize();
  std::vector<double> t;
  for (int i = 0; i < reps(); ++i) {
    before();
    timer->start();
    f();
    timer->stop();
    t.push_back(timer->seconds());
  }
  return percentile(t, 0.5);
}

}  // namespace

Rates calibrate_rates(const MoeConfig& c, Device& device, Comm& group, MoeOps& ops,
                      const ExchangeBuffers& lend) {
  Rates r;
  const std::size_t e = dtype_size(c.dtype);
  const bool modeled = sim::modeled();
  // Uniform load: each local expert gets k T N_e / E rows.
  const std::int64_t m = std::max<std::int64_t>(1, c.k * c.tokens * c.n_e / c.experts);
  Buffer a, b, out;
  if (!modeled) {
    a = device.alloc(static_cast<std::size_t>(m * c.h) * e);
    b = device.alloc(static_cast<std::size_t>(c.h * c.w1_cols()) * e);
    out = device.alloc(static_cast<std::size_t>(m * c.w1_cols()) * e);
    device.fill_zero(a.data(), a.bytes());
    device.fill_zero(b.data(), b.bytes());
  }
  const double t_gemm = median_seconds(
      device, [] {}, [&] { ops.gemm(m, c.w1_cols(), c.h, a.data(), b.data(), out.data()); });
  r.flops_per_s = 2.0 * m * c.w1_cols() * c.h / std::max(t_gemm, 1e-12);
  if (c.n_e == 1) return r;
  // Uniform dispatch: k T rows of h elements spread evenly over the N_e ranks.
  const std::size_t per_rank =
      static_cast<std::size_t>(std::max<std::int64_t>(1, c.k * c.tokens / c.n_e) * c.h);
  if (per_rank > group.max_count()) return r;
  const std::size_t bytes = per_rank * c.n_e * e;
  Buffer s, g;
  if (lend.bytes < bytes) {
    s = device.alloc(bytes);
    g = device.alloc(bytes);
  }
  void* send = s.data() ? s.data() : lend.send;
  void* recv = g.data() ? g.data() : lend.recv;
  const std::int64_t before = group.bytes().sent;
  const double t_a2a = median_seconds(
      device,
      [&] {
        device.synchronize();
        group.barrier();
      },
      [&] { group.all_to_all(send, recv, per_rank, c.dtype); });
  const double sent =
      static_cast<double>(group.bytes().sent - before) / (reps() + (modeled ? 0 : 1));
  r.bytes_per_s = sent / std::max(t_a2a, 1e-12);
  return r;
}

}  // namespace suite::moe
