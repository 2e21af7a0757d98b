#include "common/formulas/pipeline_schedule.hpp"

#include <algorithm>
#include <array>
#include <deque>
#include <stdexcept>

#include "common/harness/errors.hpp"

namespace suite::pipeline {

const char* op_name(OpKind kind) {
  switch (kind) {
    case OpKind::F:
      return "F";
    case OpKind::B:
      return "B";
    case OpKind::W:
      return "W";
    case OpKind::BW:
      return "BW";
  }
  return "?";
}

namespace {

constexpr std::array<ScheduleKind, 5> kKinds = {ScheduleKind::gpipe, ScheduleKind::one_f_one_b,
                                                ScheduleKind::interleaved, ScheduleKind::zb_h1,
                                                ScheduleKind::zb_v};

std::string numbers(const ScheduleSpec& s) {
  return "--pp " + std::to_string(s.ranks) + ", --microbatches " + std::to_string(s.microbatches) +
         ", --chunks " + std::to_string(s.chunks);
}

// GPipe: every forward, then every backward, in micro-batch order.
std::vector<Op> gpipe_rank(int m) {
  std::vector<Op> ops;
  for (int i = 0; i < m; ++i)
    ops.push_back({OpKind::F, i, 0});
  for (int i = 0; i < m; ++i)
    ops.push_back({OpKind::BW, i, 0});
  return ops;
}

// 1F1B: p - r - 1 warm-up forwards, then a forward and a backward in turn, then the backwards
// left.
std::vector<Op> one_f_one_b_rank(int p, int m, int r) {
  const int warmup = std::min(p - r - 1, m);
  std::vector<Op> ops;
  for (int i = 0; i < warmup; ++i)
    ops.push_back({OpKind::F, i, 0});
  for (int i = 0; i < m - warmup; ++i) {
    ops.push_back({OpKind::F, warmup + i, 0});
    ops.push_back({OpKind::BW, i, 0});
  }
  for (int i = m - warmup; i < m; ++i)
    ops.push_back({OpKind::BW, i, 0});
  return ops;
}

// Megatron's interleaved 1F1B: the k-th forward of a rank runs chunk (k / p) mod v of
// micro-batch (k / (p v)) p + k mod p, its backwards the chunks in reverse; (p - r - 1) 2 +
// (v - 1) p warm-up forwards (all of them when m = p).
std::vector<Op> interleaved_rank(int p, int m, int v, int r) {
  const int total = m * v;
  const auto op = [&](OpKind kind, int k) {
    const int chunk = (k % (p * v)) / p;
    return Op{kind, (k / (p * v)) * p + k % p, kind == OpKind::F ? chunk : v - 1 - chunk};
  };
  const int warmup = m == p ? total : std::min((p - r - 1) * 2 + (v - 1) * p, total);
  std::vector<Op> ops;
  for (int k = 0; k < warmup; ++k)
    ops.push_back(op(OpKind::F, k));
  for (int k = 0; k < total - warmup; ++k) {
    ops.push_back(op(OpKind::F, warmup + k));
    ops.push_back(op(OpKind::BW, k));
  }
  for (int k = total - warmup; k < total; ++k)
    ops.push_back(op(OpKind::BW, k));
  return ops;
}

// How far a rank may run ahead: micro-batch chunks past their F and not yet past their B
// (`ahead`), and not yet past their W (`held`, the activations it keeps).
struct Limits {
  std::vector<int> ahead, held;
};

// The zero-bubble schedules as a list schedule at unit op times (their authors build them the
// same way from profiled times): each free rank takes, in this order, the oldest forward whose
// input has arrived while it is within its limits (1F1B's order: a freed slot goes to the next
// forward), the oldest B whose gradient has arrived, and otherwise its oldest pending W, which
// so fills what would be bubble. Deeper stages go first among ready ops of a kind.
std::vector<std::vector<Op>> list_schedule(const Schedule& s, const Limits& limit) {
  const int p = s.spec.ranks, m = s.spec.microbatches, v = s.spec.chunks, S = s.stages();
  // done[kind][stage][mb]: the unit time its op ended, or -1.
  std::vector<std::vector<int>> f_done(S, std::vector<int>(m, -1)), b_done = f_done;
  std::vector<std::vector<int>> next_f(p, std::vector<int>(v, 0)), next_b = next_f;
  std::vector<std::deque<Op>> pending_w(p);
  std::vector<int> ahead(p, 0), held(p, 0), busy_until(p, 0), left(p, 3 * m * v);
  std::vector<std::vector<Op>> ops(p);
  const auto ready = [](int end, int t) { return end >= 0 && end <= t; };
  // Some rank runs an op in every unit of time unless the ranks wait on each other for good.
  const int serial = 3 * m * S;
  for (int t = 0, total = serial; total > 0; ++t) {
    if (t > serial) throw std::logic_error("pipeline list schedule: the ranks wait on each other");
    for (int r = 0; r < p; ++r) {
      if (busy_until[r] > t || left[r] == 0) continue;
      std::vector<int> order(v);
      for (int c = 0; c < v; ++c)
        order[c] = c;
      std::sort(order.begin(), order.end(),
                [&](int a, int b) { return s.stage_of(r, a) > s.stage_of(r, b); });
      const auto pick_b = [&]() -> Op {  // the oldest micro-batch whose gradient is here
        Op pick{OpKind::B, -1, -1};
        for (int c : order) {
          const int i = next_b[r][c], st = s.stage_of(r, c);
          if (i >= m || i >= next_f[r][c] || (pick.microbatch >= 0 && i >= pick.microbatch))
            continue;
          if (ready(st == S - 1 ? f_done[st][i] : b_done[st + 1][i], t)) pick = {OpKind::B, i, c};
        }
        return pick;
      };
      const auto pick_f = [&]() -> Op {  // the oldest micro-batch whose input is here
        Op pick{OpKind::F, -1, -1};
        if (ahead[r] >= limit.ahead[r] || held[r] >= limit.held[r]) return pick;
        for (int c : order) {
          const int i = next_f[r][c], st = s.stage_of(r, c);
          if (i >= m || (pick.microbatch >= 0 && i >= pick.microbatch)) continue;
          if (st == 0 || ready(f_done[st - 1][i], t)) pick = {OpKind::F, i, c};
        }
        return pick;
      };
      Op chosen = pick_f();
      if (chosen.microbatch < 0) chosen = pick_b();
      if (chosen.microbatch < 0 && !pending_w[r].empty()) {
        chosen = pending_w[r].front();
        pending_w[r].pop_front();
      }
      if (chosen.microbatch < 0) continue;
      const int st = s.stage_of(r, chosen.chunk);
      if (chosen.kind == OpKind::F) {
        f_done[st][chosen.microbatch] = t + 1, ++next_f[r][chosen.chunk], ++ahead[r], ++held[r];
      } else if (chosen.kind == OpKind::B) {
        b_done[st][chosen.microbatch] = t + 1, ++next_b[r][chosen.chunk], --ahead[r];
        pending_w[r].push_back({OpKind::W, chosen.microbatch, chosen.chunk});
      } else {
        --held[r];
      }
      ops[r].push_back(chosen);
      busy_until[r] = t + 1, --left[r], --total;
    }
  }
  return ops;
}

}  // namespace

const char* schedule_name(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::gpipe:
      return "gpipe";
    case ScheduleKind::one_f_one_b:
      return "1f1b";
    case ScheduleKind::interleaved:
      return "interleaved";
    case ScheduleKind::zb_h1:
      return "zb-h1";
    case ScheduleKind::zb_v:
      return "zb-v";
  }
  return "?";
}

const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (ScheduleKind k : kKinds)
      n.emplace_back(schedule_name(k));
    return n;
  }();
  return names;
}

ScheduleKind parse_schedule(const std::string& name) {
  for (ScheduleKind k : kKinds)
    if (name == schedule_name(k)) return k;
  std::string known;
  for (const std::string& n : schedule_names())
    known += (known.empty() ? "" : ", ") + n;
  throw UsageError("--schedule: unknown schedule '" + name + "' (known: " + known + ")");
}

int default_chunks(ScheduleKind kind) {
  return kind == ScheduleKind::interleaved || kind == ScheduleKind::zb_v ? 2 : 1;
}

bool splits_backward(ScheduleKind kind) {
  return kind == ScheduleKind::zb_h1 || kind == ScheduleKind::zb_v;
}

std::string check_schedule(const ScheduleSpec& s) {
  const std::string name = schedule_name(s.kind);
  if (s.ranks < 1 || s.microbatches < 1 || s.chunks < 1)
    return "pipeline sizes must be positive (" + numbers(s) + ")";
  if (s.kind == ScheduleKind::interleaved && s.chunks < 2)
    return "--chunks " + std::to_string(s.chunks) + ": interleaved runs 2 or more chunks per rank";
  if (s.kind == ScheduleKind::zb_v && s.chunks != 2)
    return "--chunks " + std::to_string(s.chunks) + ": zb-v runs exactly 2 chunks per rank";
  if (default_chunks(s.kind) == 1 && s.chunks != 1)
    return "--chunks " + std::to_string(s.chunks) + ": " + name +
           " has no chunks (use interleaved or zb-v)";
  if (s.kind == ScheduleKind::interleaved && s.microbatches % s.ranks != 0)
    return "--microbatches " + std::to_string(s.microbatches) +
           ": interleaved needs a multiple of --pp " + std::to_string(s.ranks);
  return {};
}

int Schedule::stage_of(int rank, int chunk) const {
  const int p = spec.ranks;
  if (spec.kind == ScheduleKind::zb_v) return chunk == 0 ? rank : 2 * p - 1 - rank;
  return chunk * p + rank;
}

int Schedule::rank_of(int stage) const {
  const int p = spec.ranks;
  if (spec.kind == ScheduleKind::zb_v) return stage < p ? stage : 2 * p - 1 - stage;
  return stage % p;
}

int Schedule::chunk_of(int stage) const {
  if (spec.kind == ScheduleKind::zb_v) return stage < spec.ranks ? 0 : 1;
  return stage / spec.ranks;
}

Schedule make_schedule(const ScheduleSpec& spec) {
  if (const std::string bad = check_schedule(spec); !bad.empty()) throw UsageError(bad);
  Schedule s{spec, std::vector<std::vector<Op>>(spec.ranks)};
  const int p = spec.ranks, m = spec.microbatches;
  Limits limit{std::vector<int>(p), std::vector<int>(p)};
  switch (spec.kind) {
    case ScheduleKind::gpipe:
      for (int r = 0; r < p; ++r)
        s.ranks[r] = gpipe_rank(m);
      break;
    case ScheduleKind::one_f_one_b:
      for (int r = 0; r < p; ++r)
        s.ranks[r] = one_f_one_b_rank(p, m, r);
      break;
    case ScheduleKind::interleaved:
      for (int r = 0; r < p; ++r)
        s.ranks[r] = interleaved_rank(p, m, spec.chunks, r);
      break;
    case ScheduleKind::zb_h1:  // 1F1B's forwards ahead (p - r), its first stage's p held
      for (int r = 0; r < p; ++r)
        limit.ahead[r] = p - r, limit.held[r] = p;
      s.ranks = list_schedule(s, limit);
      break;
    case ScheduleKind::zb_v:  // 1F1B's first-stage memory on every rank: p stages' worth
      for (int r = 0; r < p; ++r)
        limit.ahead[r] = limit.held[r] = 2 * p;
      s.ranks = list_schedule(s, limit);
      break;
  }
  return s;
}

Schedule fuse_backward(Schedule schedule) {
  for (auto& ops : schedule.ranks) {
    ops.erase(
        std::remove_if(ops.begin(), ops.end(), [](const Op& o) { return o.kind == OpKind::W; }),
        ops.end());
    for (Op& o : ops)
      if (o.kind == OpKind::B) o.kind = OpKind::BW;
  }
  schedule.fused = true;
  return schedule;
}

std::vector<int> peak_in_flight(const Schedule& s) {
  std::vector<int> peak(s.spec.ranks, 0);
  const OpKind release = s.split_backward() ? OpKind::W : OpKind::BW;
  for (int r = 0; r < s.spec.ranks; ++r) {
    int held = 0;
    for (const Op& op : s.ranks[r]) {
      if (op.kind == OpKind::F) peak[r] = std::max(peak[r], ++held);
      if (op.kind == release) --held;
    }
  }
  return peak;
}

}  // namespace suite::pipeline
