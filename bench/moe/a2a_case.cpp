#include "bench/moe/a2a_case.hpp"

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <utility>

#include "common/device/typed_host.hpp"
#include "common/formulas/model.hpp"
#include "common/harness/errors.hpp"
#include "common/harness/size_list.hpp"
#include "common/mesh/device_meshes.hpp"
#include "common/results/record_access.hpp"
#include "common/sim/sim.hpp"

namespace suite::moe {
namespace {

constexpr const char* algo_name(A2aAlgo a) {
  return a == A2aAlgo::flat ? "flat" : a == A2aAlgo::pairwise ? "pairwise" : "hierarchical";
}

// What sender s writes in element i of its block for d: small integers, exact in every dtype.
double pattern(int s, int d, std::int64_t i) {
  return static_cast<double>((static_cast<std::int64_t>(s) * 31 + d * 17 + i) % 200) - 100;
}

struct Block {
  std::size_t from = 0, to = 0, count = 0;  // elements
};

// Counts and displacements of one all-to-all-v, in elements.
struct Split {
  std::vector<std::size_t> counts, displs;
  std::size_t total = 0;
  explicit Split(std::size_t n = 0) : counts(n, 0), displs(n, 0) {}
  void close() {
    total = 0;
    for (std::size_t i = 0; i < counts.size(); ++i) {
      displs[i] = total;
      total += counts[i];
    }
  }
};

class A2aCase final : public BenchCase {
 public:
  A2aCase(BenchContext& ctx, TrafficSpec traffic, A2aAlgo algo, int P,
          std::vector<std::int64_t> matrix)
      : ctx_(ctx), traffic_(std::move(traffic)), algo_(algo), P_(P), m_(std::move(matrix)) {}

  void setup() override {
    Comm& c = ctx_.comm;
    N_ = c.size();
    me_ = c.rank();
    e_ = static_cast<std::int64_t>(dtype_size(ctx_.dtype));
    const auto N = static_cast<std::size_t>(N_);
    send_ = Split(N);
    recv_ = Split(N);
    for (std::size_t d = 0; d < N; ++d) {
      send_.counts[d] = static_cast<std::size_t>(at(me_, static_cast<int>(d)) / e_);
      recv_.counts[d] = static_cast<std::size_t>(at(static_cast<int>(d), me_) / e_);
    }
    send_.close();
    recv_.close();
    if (std::max(send_.total, recv_.total) > c.max_count())
      throw UsageError("moe --mode a2a: a rank's buffer of " +
                       std::to_string(std::max(send_.total, recv_.total)) +
                       " elements is above this transport's limit");
    sbuf_ = ctx_.device.alloc(std::max<std::size_t>(send_.total, 1) * static_cast<std::size_t>(e_));
    rbuf_ = ctx_.device.alloc(std::max<std::size_t>(recv_.total, 1) * static_cast<std::size_t>(e_));
    if (!sim::modeled()) {
      std::vector<double> v;
      v.reserve(send_.total);
      for (int d = 0; d < N_; ++d)
        for (std::size_t i = 0; i < send_.counts[static_cast<std::size_t>(d)]; ++i)
          v.push_back(pattern(me_, d, static_cast<std::int64_t>(i)));
      const auto raw = encode(v, ctx_.dtype);
      if (!raw.empty()) ctx_.device.copy_from_host(sbuf_.data(), raw.data(), raw.size());
    }
    // Bytes by level the matrix implies for this rank (self excluded), flat and pairwise.
    for (int d = 0; d < N_; ++d)
      if (d != me_) (d / P_ == me_ / P_ ? want_intra_ : want_inter_) += at(me_, d);
    if (algo_ == A2aAlgo::hierarchical) plan_hierarchy();
    if (algo_ == A2aAlgo::pairwise) {
      // Step i: one non-empty peer each way, to rank + i and from rank - i (made here, not in
      // the timed step).
      for (int i = 0; i < N_; ++i) {
        const auto to = static_cast<std::size_t>((me_ + i) % N_),
                   from = static_cast<std::size_t>((me_ - i + N_) % N_);
        Split s = send_, r = recv_;
        std::fill(s.counts.begin(), s.counts.end(), 0);
        std::fill(r.counts.begin(), r.counts.end(), 0);
        s.counts[to] = send_.counts[to];
        r.counts[from] = recv_.counts[from];
        steps_.emplace_back(std::move(s), std::move(r));
        timers_.push_back(ctx_.device.make_timer());
      }
      step_times_.assign(N, {});
    }
  }

  void step(PhaseTimer& phases) override {
    Comm& c = ctx_.comm;
    const ByteCounts before = c.bytes();
    const ByteCounts node0 = node_ ? node_->bytes() : ByteCounts{},
                     rail0 = rail_ ? rail_->bytes() : ByteCounts{};
    if (algo_ == A2aAlgo::flat) {
      phases.time("exchange", [&] {
        c.all_to_all_v(sbuf_.data(), send_.counts, send_.displs, rbuf_.data(), recv_.counts,
                       recv_.displs, ctx_.dtype);
      });
    } else if (algo_ == A2aAlgo::pairwise) {
      phases.time("exchange", [&] {
        for (std::size_t i = 0; i < steps_.size(); ++i) {
          const auto& [s, r] = steps_[i];
          timers_[i]->start();
          c.all_to_all_v(sbuf_.data(), s.counts, s.displs, rbuf_.data(), r.counts, r.displs,
                         ctx_.dtype);
          timers_[i]->stop();
        }
      });
      for (int i = 0; i < N_; ++i)
        step_times_[static_cast<std::size_t>(i)].push_back(
            timers_[static_cast<std::size_t>(i)]->seconds());
    } else {
      phases.time("rail", [&] {
        rail_->all_to_all_v(sbuf_.data(), rail_send_.counts, rail_send_.displs, rail_buf_.data(),
                            rail_recv_.counts, rail_recv_.displs, ctx_.dtype);
      });
      phases.time("pack", [&] { copy_blocks(pack_, rail_buf_, node_send_buf_); });
      phases.time("node", [&] {
        node_->all_to_all_v(node_send_buf_.data(), node_send_.counts, node_send_.displs,
                            node_recv_buf_.data(), node_recv_.counts, node_recv_.displs,
                            ctx_.dtype);
      });
      phases.time("unpack", [&] { copy_blocks(unpack_, node_recv_buf_, rbuf_); });
    }
    const std::int64_t group = c.bytes().sent - before.sent;
    got_inter_ = group + (rail_ ? rail_->bytes().sent - rail0.sent : 0);
    got_intra_ = node_ ? node_->bytes().sent - node0.sent : 0;
    if (algo_ != A2aAlgo::hierarchical) {  // one exchange: its bytes are not split by level
      got_inter_ = group;
      got_intra_ = 0;
    }
  }

  CheckOutcome check() override {
    std::string why = bytes_mismatch();
    if (sim::modeled())
      return {why.empty(), 0, why.empty() ? "modeled compute: no values" : why, why.empty()};
    std::vector<std::byte> raw(recv_.total * static_cast<std::size_t>(e_));
    if (!raw.empty()) ctx_.device.copy_to_host(raw.data(), rbuf_.data(), raw.size());
    const std::vector<double> got = decode(raw.data(), recv_.total, ctx_.dtype);
    std::int64_t wrong = 0;
    for (int s = 0; s < N_; ++s)
      for (std::size_t i = 0; i < recv_.counts[static_cast<std::size_t>(s)]; ++i)
        wrong += got[recv_.displs[static_cast<std::size_t>(s)] + i] !=
                 pattern(s, me_, static_cast<std::int64_t>(i));
    if (wrong > 0) why += std::to_string(wrong) + " received elements differ from their sender's; ";
    return {why.empty(), wrong > 0 ? 1.0 : 0.0, why};
  }

  void report(const Measurement& m, CaseRecord& rec) override {
    // Per rank: bytes sent (measured across / inside, what the matrix implies across / inside
    // for this algorithm: hierarchical forwards inside the node too), its whole send
    // buffer (self included), then the pairwise step times (median over steps run).
    const bool hier = algo_ == A2aAlgo::hierarchical;
    std::vector<double> mine = {static_cast<double>(got_inter_), static_cast<double>(got_intra_),
                                static_cast<double>(hier ? want_hier_inter_ : want_inter_),
                                static_cast<double>(hier ? want_hier_intra_ : want_intra_),
                                static_cast<double>(send_.total * static_cast<std::size_t>(e_))};
    for (int i = 0; i < N_; ++i)
      mine.push_back(algo_ == A2aAlgo::pairwise
                         ? percentile(step_times_[static_cast<std::size_t>(i)], 0.5)
                         : 0.0);
    const int ranks = ctx_.mpi.size(), rank = ctx_.mpi.rank();
    std::vector<double> all(rank == 0 ? mine.size() * static_cast<std::size_t>(ranks) : 0);
    SUITE_MPI_CHECK(MPI_Gather(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, all.data(),
                               static_cast<int>(mine.size()), MPI_DOUBLE, 0, MPI_COMM_WORLD));
    if (rank != 0) return;
    const std::size_t w = mine.size();
    auto& a = rec.attrs;
    double sent = 0, pred = 0, inter = 0, intra = 0, buffer = 0, busiest = 0;
    bool match = true;
    IntTable per_rank{"a2a_bytes_sent", 1, static_cast<std::size_t>(ranks), {}};
    Table pair_time{
        "pair_time_s", static_cast<std::size_t>(ranks), static_cast<std::size_t>(N_), {}};
    for (int r = 0; r < ranks; ++r) {
      const double* v = all.data() + static_cast<std::size_t>(r) * w;
      sent += v[0] + v[1];
      pred += v[2] + v[3];
      inter += hier ? v[0] : v[2];
      intra += hier ? v[1] : v[3];
      match = match && (hier ? v[0] == v[2] && v[1] == v[3] : v[0] == v[2] + v[3]);
      buffer += v[4];
      busiest = std::max(busiest, v[4]);
      per_rank.values.push_back(static_cast<std::int64_t>(v[0] + v[1]));
      // Row r, column d: rank r's step towards d (step i goes to r + i).
      std::vector<double> row(static_cast<std::size_t>(N_), 0.0);
      for (int i = 0; i < N_; ++i)
        row[static_cast<std::size_t>((r % N_ + i) % N_)] = v[5 + i];
      pair_time.values.insert(pair_time.values.end(), row.begin(), row.end());
    }
    const double t = m.step.median;
    a.emplace_back("traffic", traffic_.text);
    a.emplace_back("algo", std::string(algo_name(algo_)));
    a.emplace_back("ranks_per_node", std::int64_t{P_});
    a.emplace_back("nodes", std::int64_t{N_ / P_});
    a.emplace_back("bytes_match", std::int64_t{match ? 1 : 0});
    a.emplace_back("a2a_bytes_per_rank", sent / ranks);
    a.emplace_back("pred_a2a_bytes_per_rank", pred / ranks);
    a.emplace_back("inter_node_bytes_per_rank", inter / ranks);
    a.emplace_back("intra_node_bytes_per_rank", intra / ranks);
    // nccl-tests: algbw = a rank's whole buffer (self included) / time; busbw x (N-1)/N.
    const double algbw = t > 0 ? buffer / ranks / t / 1e9 : 0.0;
    a.emplace_back("algbw_GBps", algbw);
    a.emplace_back("busbw_GBps", algbw * model::busbw_factor_rs_ag_a2a(N_));
    a.emplace_back("busiest_rank_buffer_bytes", busiest);
    rec.int_tables.push_back(std::move(per_rank));
    IntTable traffic{"traffic_bytes", static_cast<std::size_t>(N_), static_cast<std::size_t>(N_),
                     m_};
    rec.int_tables.push_back(std::move(traffic));
    if (algo_ == A2aAlgo::pairwise) rec.tables.push_back(std::move(pair_time));
  }

 private:
  std::int64_t at(int s, int d) const {
    return m_[static_cast<std::size_t>(s) * static_cast<std::size_t>(N_) +
              static_cast<std::size_t>(d)];
  }

  std::string bytes_mismatch() const {
    if (algo_ == A2aAlgo::hierarchical) {
      if (got_inter_ == want_hier_inter_ && got_intra_ == want_hier_intra_) return "";
      return "bytes across / inside nodes " + std::to_string(got_inter_) + " / " +
             std::to_string(got_intra_) + ", the matrix implies " +
             std::to_string(want_hier_inter_) + " / " + std::to_string(want_hier_intra_) + "; ";
    }
    if (got_inter_ == want_inter_ + want_intra_) return "";
    return "bytes sent " + std::to_string(got_inter_) + ", the matrix implies " +
           std::to_string(want_inter_ + want_intra_) + "; ";
  }

  // Hierarchical: the rail carries what this rank sends each other node (its destinations
  // there are consecutive, so its send buffer needs no packing); the relay packs, per rank of
  // its node, the parts of its rail peers' messages bound there; the receiver unpacks them into
  // flat's layout.
  void plan_hierarchy() {
    node_ = &ctx_.meshes.own().ep_node(P_);
    rail_ = &ctx_.meshes.own().ep_rail(P_);
    const int M = N_ / P_, m = me_ / P_, l = me_ % P_;
    const auto Ms = static_cast<std::size_t>(M), Ps = static_cast<std::size_t>(P_);
    auto elems = [&](int s, int d) { return static_cast<std::size_t>(at(s, d) / e_); };
    rail_send_ = Split(Ms);
    rail_recv_ = Split(Ms);
    for (int n = 0; n < M; ++n)
      for (int q = 0; q < P_; ++q) {
        rail_send_.counts[static_cast<std::size_t>(n)] += elems(me_, n * P_ + q);
        rail_recv_.counts[static_cast<std::size_t>(n)] += elems(n * P_ + l, m * P_ + q);
      }
    rail_send_.close();
    for (int n = 0; n < M; ++n)  // this rank's destinations on node n start at rank n P
      rail_send_.displs[static_cast<std::size_t>(n)] =
          send_.displs[static_cast<std::size_t>(n * P_)];
    rail_recv_.close();
    node_send_ = Split(Ps);
    node_recv_ = Split(Ps);
    pack_.clear();
    for (int q = 0; q < P_; ++q)
      for (int n = 0; n < M; ++n) {
        const int s = n * P_ + l;
        std::size_t offset = rail_recv_.displs[static_cast<std::size_t>(n)];
        for (int d = m * P_; d < m * P_ + q; ++d)
          offset += elems(s, d);
        pack_.push_back({offset, 0, elems(s, m * P_ + q)});
        node_send_.counts[static_cast<std::size_t>(q)] += elems(s, m * P_ + q);
      }
    node_send_.close();
    for (std::size_t i = 0, to = 0; i < pack_.size(); ++i) {
      pack_[i].to = to;
      to += pack_[i].count;
    }
    unpack_.clear();
    for (int q = 0, from = 0; q < P_; ++q)
      for (int n = 0; n < M; ++n) {
        const int s = n * P_ + q;
        unpack_.push_back({static_cast<std::size_t>(from),
                           recv_.displs[static_cast<std::size_t>(s)], elems(s, me_)});
        node_recv_.counts[static_cast<std::size_t>(q)] += elems(s, me_);
        from += static_cast<int>(elems(s, me_));
      }
    node_recv_.close();
    const std::size_t e = static_cast<std::size_t>(e_);
    rail_buf_ = ctx_.device.alloc(std::max<std::size_t>(rail_recv_.total, 1) * e);
    node_send_buf_ = ctx_.device.alloc(std::max<std::size_t>(node_send_.total, 1) * e);
    node_recv_buf_ = ctx_.device.alloc(std::max<std::size_t>(node_recv_.total, 1) * e);
    for (int n = 0; n < M; ++n)
      if (n != m)
        want_hier_inter_ +=
            static_cast<std::int64_t>(rail_send_.counts[static_cast<std::size_t>(n)]) * e_;
    for (int q = 0; q < P_; ++q)
      if (q != l)
        want_hier_intra_ +=
            static_cast<std::int64_t>(node_send_.counts[static_cast<std::size_t>(q)]) * e_;
  }

  void copy_blocks(const std::vector<Block>& blocks, const Buffer& from, const Buffer& to) {
    const std::size_t e = static_cast<std::size_t>(e_);
    for (const Block& b : blocks)
      if (b.count > 0)
        ctx_.device.copy_on_device(static_cast<std::byte*>(to.data()) + b.to * e,
                                   static_cast<const std::byte*>(from.data()) + b.from * e,
                                   b.count * e);
  }

  BenchContext& ctx_;
  TrafficSpec traffic_;
  A2aAlgo algo_;
  int P_ = 1, N_ = 1, me_ = 0;
  std::int64_t e_ = 4;
  std::vector<std::int64_t> m_;
  Split send_, recv_, rail_send_, rail_recv_, node_send_, node_recv_;
  std::vector<Block> pack_, unpack_;
  std::vector<std::pair<Split, Split>> steps_;  // pairwise: each step's send and receive splits
  Buffer sbuf_, rbuf_, rail_buf_, node_send_buf_, node_recv_buf_;
  Comm* node_ = nullptr;  // hierarchical: the EP mesh's node and rail groups
  Comm* rail_ = nullptr;
  std::vector<std::unique_ptr<IntervalTimer>> timers_;
  std::vector<std::vector<double>> step_times_;
  std::int64_t want_inter_ = 0, want_intra_ = 0, want_hier_inter_ = 0, want_hier_intra_ = 0;
  std::int64_t got_inter_ = 0, got_intra_ = 0;
};

}  // namespace

std::vector<A2aAlgo> parse_a2a_algos(const std::string& text) {
  return parse_list("--a2a-algo", text,
                    named<A2aAlgo>("--a2a-algo", "algorithm",
                                   {{"flat", A2aAlgo::flat},
                                    {"pairwise", A2aAlgo::pairwise},
                                    {"hierarchical", A2aAlgo::hierarchical}}));
}

std::vector<CaseSpec> a2a_cases(BenchContext& ctx, const A2aSweep& sweep) {
  const int n = ctx.comm.size(), P = sweep.ranks_per_node;
  const std::int64_t e = static_cast<std::int64_t>(dtype_size(ctx.dtype));
  std::vector<CaseSpec> specs;
  for (const TrafficSpec& t : sweep.traffic)
    for (std::int64_t bytes : sweep.bytes) {
      if (bytes < 0) throw UsageError("--bytes must be >= 0");
      auto matrix = traffic_matrix(t, n, P, bytes, e, ctx.opts.seed);
      for (A2aAlgo algo : sweep.algos) {
        CaseSpec spec;
        spec.name = "a2a_" + traffic_name(t) + "_B" + std::to_string(bytes) + "_" +
                    algo_name(algo) + "_" + std::string(dtype_name(ctx.dtype)) + "_ep" +
                    std::to_string(n) + "_rpn" + std::to_string(P);
        spec.params = {{"mode", std::string("a2a")},
                       {"traffic", t.text},
                       {"bytes", bytes},
                       {"algo", std::string(algo_name(algo))},
                       {"dtype", std::string(dtype_name(ctx.dtype))},
                       {"n_e", std::int64_t{n}},
                       {"ranks_per_node", std::int64_t{P}}};
        spec.make = [&ctx, t, algo, P, matrix] {
          return std::make_unique<A2aCase>(ctx, t, algo, P, matrix);
        };
        spec.console_counters = {"algbw_GBps", "busbw_GBps", "a2a_bytes_per_rank"};
        specs.push_back(std::move(spec));
      }
    }
  return specs;
}

void print_a2a_table(const std::vector<CaseRecord>& records) {
  if (records.empty()) return;
  std::printf(
      "\nAll-to-all-v over a traffic matrix (median step = max over ranks; bytes = sent to other "
      "ranks per rank, mean; busbw = algbw (N-1)/N)\n");
  std::printf("%-18s %12s %-13s %12s %10s %10s %14s %14s %6s\n", "traffic", "bytes", "algo",
              "step_us", "algbw", "busbw", "bytes/rank", "pred", "check");
  for (const CaseRecord& r : records)
    std::printf("%-18s %12.0f %-13s %12.1f %10.3f %10.3f %14.0f %14.0f %6s\n",
                param_text(r, "traffic").c_str(), attr_number(r, "bytes"),
                param_text(r, "algo").c_str(), attr_number(r, "time_median_s") * 1e6,
                attr_number(r, "algbw_GBps"), attr_number(r, "busbw_GBps"),
                attr_number(r, "a2a_bytes_per_rank"), attr_number(r, "pred_a2a_bytes_per_rank"),
                attr_number(r, "check_passed") > 0 ? "ok" : "FAIL");
}

}  // namespace suite::moe
