// ring_attention: context parallelism by ring attention (METHODS.md section 2).
#include "bench/ring_attention/ring_cases.hpp"
#include "common/bench_main.hpp"
#include "common/errors.hpp"
#include "common/size_list.hpp"

namespace {

struct RingOptions {
  std::string blocks = "128:512:x2";
  std::string layouts = "contiguous,zigzag";
  std::string variants = "ring";
  std::string causal = "1";
  int heads = 8, kv_heads = 0, head_dim = 64;
  std::int64_t batch = 1;
  int cp = 0;
  std::string attn_kernel = "auto";
  std::string cpu_progress = "poll";
};

template <class T, class Parse>
std::vector<T> parse_each(const std::string& flag, const std::string& text, Parse parse,
                          const std::string& allowed) {
  std::vector<T> out;
  for (const auto& item : suite::split_list(text)) {
    auto v = parse(item);
    if (!v) throw suite::UsageError(flag + ": unknown value '" + item + "' (" + allowed + ")");
    out.push_back(*v);
  }
  if (out.empty()) throw suite::UsageError(flag + " names nothing");
  return out;
}

suite::ring::RingSweep make_sweep(const RingOptions& o) {
  using namespace suite::ring;
  RingSweep s;
  s.blocks = suite::parse_sweep(o.blocks);
  s.layouts =
      parse_each<Layout>("--layout", o.layouts, parse_layout, "contiguous, zigzag, striped");
  s.variants = parse_each<Variant>(
      "--variant", o.variants,
      [](const std::string& v) -> std::optional<Variant> {
        if (v == "ring") return Variant::ring;
        if (v == "allgather") return Variant::allgather;
        return std::nullopt;
      },
      "ring, allgather");
  s.causal = parse_each<bool>(
      "--causal", o.causal,
      [](const std::string& v) -> std::optional<bool> {
        if (v == "1") return true;
        if (v == "0") return false;
        return std::nullopt;
      },
      "0, 1");
  s.heads = o.heads;
  s.kv_heads = o.kv_heads == 0 ? o.heads : o.kv_heads;
  s.head_dim = o.head_dim;
  s.batch = o.batch;
  s.cp = o.cp;
  auto k = suite::kernels::parse_attn_kernel(o.attn_kernel);
  if (!k)
    throw suite::UsageError("--attn-kernel: unknown kernel '" + o.attn_kernel +
                            "' (auto, suite, cudnn)");
  s.attn_kernel = *k;
  s.poll_progress = o.cpu_progress == "poll";
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  RingOptions o;
  suite::BenchDefinition def;
  def.name = "ring_attention";
  def.description =
      "Ring attention (context parallelism): each rank holds c tokens of Q, K, V; K/V blocks "
      "travel\n"
      "around the ring (double-buffered, overlapped with attention), partial results merge "
      "exactly\n"
      "by log-sum-exp. Each case runs overlapped, compute only and transfer only, so F (attention\n"
      "FLOP/s) and W (ring bytes/s) are measured in the same run, and reports c* = F/(gW) (x2 "
      "causal\n"
      "balanced, x e/2) beside the block size, per-rank per-round work / compute / transfer / "
      "idle,\n"
      "bytes per rank against (N_c-1) 4ch/g, memory against six blocks, and checks the output\n"
      "against full attention over the whole sequence.";
  def.add_options = [&](CLI::App& app) {
    app.add_option("--block", o.blocks,
                   "c: tokens per rank, list or range (e.g. 256:16K:x2); s = c * N_c")
        ->capture_default_str();
    app.add_option(
           "--layout", o.layouts,
           "token layouts, comma-separated: contiguous (rank r holds [rc, (r+1)c)), zigzag "
           "(chunks r and 2N_c-1-r of c/2; needs even c), striped (token i on rank i mod N_c)")
        ->capture_default_str();
    app.add_option("--variant", o.variants,
                   "ring (K/V travel, overlapped) and/or allgather (gather all K/V once, exposed, "
                   "then one local attention, as Llama 3)")
        ->capture_default_str();
    app.add_option("--causal", o.causal, "1 causal, 0 full attention; a list runs both")
        ->capture_default_str();
    app.add_option("--heads", o.heads, "a: query heads")->capture_default_str();
    app.add_option(
           "--kv-heads", o.kv_heads,
           "n_kv: K/V heads (GQA: a multiple of it must be a; only these travel); 0 = heads")
        ->capture_default_str();
    app.add_option("--head-dim", o.head_dim, "d: head dimension (64 or 128)")
        ->capture_default_str();
    app.add_option("--batch", o.batch, "b: sequences per rank")->capture_default_str();
    app.add_option("--cp", o.cp,
                   "N_c: context-parallel group size (consecutive ranks; all groups run at once); "
                   "0 = all ranks")
        ->capture_default_str();
    app.add_option(
           "--attn-kernel", o.attn_kernel,
           "attention kernel: auto (cuDNN when built in, on cuda), suite (the suite's own), "
           "cudnn")
        ->check(CLI::IsMember({"auto", "suite", "cudnn"}))
        ->capture_default_str();
    app.add_option("--cpu-progress", o.cpu_progress,
                   "CPU backend: poll (MPI_Testall between attention tiles, so the transfer moves "
                   "during compute) or none (MPI progresses only when waiting: no overlap)")
        ->check(CLI::IsMember({"poll", "none"}))
        ->capture_default_str();
  };
  def.make_cases = [&](suite::BenchContext& ctx) {
    return suite::ring::ring_cases(ctx, make_sweep(o));
  };
  def.summarize = [](const suite::BenchContext&, const std::vector<suite::CaseRecord>& records) {
    suite::ring::print_ring_table(records);
  };
  return suite::run_benchmark(argc, argv, def);
}
