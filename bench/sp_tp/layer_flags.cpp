#include "bench/sp_tp/layer_flags.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>

#include "common/harness/errors.hpp"
#include "common/harness/shared_flags.hpp"
#include "common/harness/size_list.hpp"

namespace suite::sp_tp {

void add_layer_shape_flags(CLI::App& app, LayerShapeFlags& f) {
  app.add_option("--seq", f.seq, "s: sequence length, tokens per sequence (a CP group splits them)")
      ->capture_default_str();
  add_batch_flag(app, f.batch);
  add_hidden_flag(app, f.hidden);
  add_heads_flag(app, f.heads);
  add_ffn_hidden_flag(app, f.ffn_hidden);
}

void add_tp_overlap_flag(CLI::App& app, std::string& modes) {
  app.add_option("--tp-overlap", modes,
                 "TP+SP forward and backward (list): none (blocking collectives), ring (each "
                 "all-gather cut into t ring steps, the QKV / fc1 GEMM running on each block as it "
                 "arrives; each reduce-scatter cut into t steps, the output-projection / fc2 GEMM "
                 "making one block's partial sum while the previous travels), chunks:K (each "
                 "collective cut into K pieces of every rank's rows, 1 <= K <= s*b/t; a piece's "
                 "all-gather runs while the GEMM of the piece before it computes, a piece's "
                 "reduce-scatter while the GEMM of the piece after it does). Cases named _ovring, "
                 "_ovchunksK; the overlap condition per op is model --section tp_overlap's")
      ->capture_default_str();
}

TpOverlapMode parse_tp_overlap(const std::string& v) {
  if (v == "none") return TpOverlapMode{};
  if (v == "ring") return TpOverlapMode{TpOverlap::ring, 0};
  if (v.rfind("chunks:", 0) != 0)
    throw UsageError("--tp-overlap: unknown mode '" + v + "' (none, ring, chunks:K)");
  const std::string k = v.substr(7);
  if (k.empty() || k.find_first_not_of("0123456789") != std::string::npos || k.size() > 9 ||
      std::stoi(k) < 1)
    throw UsageError("--tp-overlap " + v + ": K must be a whole number >= 1");
  return TpOverlapMode{TpOverlap::chunks, std::stoi(k)};
}

}  // namespace suite::sp_tp
