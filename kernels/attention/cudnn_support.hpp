// Which attention blocks cuDNN's SDPA can run exactly as the suite defines them, decided from
// the block's shape and mask hint alone (no cuDNN needed: the CPU tests exercise it). A block
// it cannot express runs on the suite's kernel instead and is counted as a fallback.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kernels/attention/attention_engine.hpp"
#include "kernels/attention/attention_index.hpp"
#include "kernels/core/dtype.hpp"

namespace suite::kernels {

// Empty when cuDNN's SDPA computes exactly this block; otherwise why not.
//  - storage bf16 only (cuDNN's SDPA has no fp32 path);
//  - the mask must be one cuDNN expresses: none, causal top-left, causal bottom-right;
//  - bottom-right with cq > ck leaves the first cq - ck queries with no visible key, which
//    the suite defines as o = 0, lse = -inf (cuDNN does not promise that);
//  - empty blocks (nothing to compute, or every query empty) stay with the suite's kernel;
//  - row strides must keep every row 16-byte aligned (multiples of 8 bf16 elements).
inline std::optional<std::string> cudnn_unsupported_reason(const AttentionParams& p, BlockMask mask,
                                                           DType dtype) {
  if (dtype != DType::bf16) return "storage " + std::string(dtype_name(dtype)) + " (cuDNN: bf16)";
  if (mask == BlockMask::positions) return std::string("mask given by positions only");
  if (p.cq == 0 || p.ck == 0) return std::string("empty block");
  if (mask == BlockMask::causal_bottom_right && p.cq > p.ck)
    return std::string("bottom-right causal block with cq > ck (queries that see no key)");
  for (std::int64_t ld : {p.ld_q, p.ld_k, p.ld_v, p.ld_o}) {
    if (ld % 8 != 0) return "row stride " + std::to_string(ld) + " not a multiple of 8 elements";
  }
  if (p.head_dim % 8 != 0 || p.head_dim > 128)
    return "head_dim " + std::to_string(p.head_dim) + " (cuDNN here: multiples of 8 up to 128)";
  return std::nullopt;
}

// The same for the backward (sdpa_backward): the forward's rules, and the frontend refuses a
// block of one query against one key (s_q = s_kv = 1).
inline std::optional<std::string> cudnn_backward_unsupported_reason(const AttentionParams& p,
                                                                    BlockMask mask, DType dtype) {
  if (auto why = cudnn_unsupported_reason(p, mask, dtype)) return why;
  if (p.cq == 1 && p.ck == 1)
    return std::string("one query against one key (cuDNN's SDPA backward: s_q = s_kv = 1)");
  return std::nullopt;
}

// The suite's causal flag must agree with the hint: a causal hint on a non-causal block (or
// the reverse, for a block that is not fully visible) would make cuDNN compute another thing.
inline bool mask_hint_consistent(const AttentionParams& p, BlockMask mask) {
  return mask == BlockMask::full || mask == BlockMask::positions || p.causal;
}

// cudnnGetVersion()'s integer (e.g. 91900) as "9.19.0".
inline std::string cudnn_version_text(std::int64_t v) {
  return std::to_string(v / 10000) + "." + std::to_string((v % 10000) / 100) + "." +
         std::to_string(v % 100);
}

}  // namespace suite::kernels
