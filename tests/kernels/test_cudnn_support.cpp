// Which blocks the cuDNN engine hands to cuDNN and which fall back to the suite's kernel:
// decided on the host from shape and mask hint, so it is tested here without cuDNN or a GPU.
#include <gtest/gtest.h>

#include "kernels/attention/cudnn_support.hpp"

namespace suite::kernels {
namespace {

TEST(CudnnSupport, ExpressibleBlocks) {
  auto p = make_attention_params(4096, 4096, 32, 8, 128, true);
  EXPECT_FALSE(cudnn_unsupported_reason(p, BlockMask::causal_top_left, DType::bf16));
  EXPECT_FALSE(cudnn_unsupported_reason(p, BlockMask::causal_bottom_right, DType::bf16));
  EXPECT_FALSE(cudnn_unsupported_reason(p, BlockMask::full, DType::bf16));
  p.ck = 8192;  // more keys than queries: bottom-right leaves every query a key
  EXPECT_FALSE(cudnn_unsupported_reason(p, BlockMask::causal_bottom_right, DType::bf16));
  p.ld_q = p.ld_k = p.ld_v = 3 * 32 * 128;  // packed qkv rows
  EXPECT_FALSE(cudnn_unsupported_reason(p, BlockMask::full, DType::bf16));
}

TEST(CudnnSupport, FallbackReasons) {
  const auto p = make_attention_params(256, 128, 4, 4, 64, true);
  EXPECT_TRUE(cudnn_unsupported_reason(p, BlockMask::positions, DType::bf16));
  EXPECT_TRUE(cudnn_unsupported_reason(p, BlockMask::full, DType::fp32));
  // Bottom-right with cq > ck: the first 128 queries see no key.
  const auto why = cudnn_unsupported_reason(p, BlockMask::causal_bottom_right, DType::bf16);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("cq > ck"), std::string::npos) << *why;
  // Top-left with cq > ck is fine: query i sees keys 0..min(i, ck-1).
  EXPECT_FALSE(cudnn_unsupported_reason(p, BlockMask::causal_top_left, DType::bf16));
  auto odd = p;
  odd.ld_q = 4 * 64 + 3;
  EXPECT_TRUE(cudnn_unsupported_reason(odd, BlockMask::full, DType::bf16));
  auto empty = p;
  empty.ck = 0;
  EXPECT_TRUE(cudnn_unsupported_reason(empty, BlockMask::full, DType::bf16));
}

TEST(CudnnSupport, BackwardFollowsTheForwardAndRefusesOneByOne) {
  auto p = make_attention_params(4096, 4096, 32, 8, 128, true);
  EXPECT_FALSE(cudnn_backward_unsupported_reason(p, BlockMask::causal_top_left, DType::bf16));
  EXPECT_FALSE(cudnn_backward_unsupported_reason(p, BlockMask::causal_bottom_right, DType::bf16));
  EXPECT_TRUE(cudnn_backward_unsupported_reason(p, BlockMask::positions, DType::bf16));
  EXPECT_TRUE(cudnn_backward_unsupported_reason(p, BlockMask::full, DType::fp32));
  p.cq = p.ck = 1;
  EXPECT_FALSE(cudnn_unsupported_reason(p, BlockMask::full, DType::bf16));  // the forward runs it
  const auto why = cudnn_backward_unsupported_reason(p, BlockMask::full, DType::bf16);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("s_q = s_kv = 1"), std::string::npos) << *why;
  p.ck = 2;
  EXPECT_FALSE(cudnn_backward_unsupported_reason(p, BlockMask::full, DType::bf16));
}

TEST(CudnnSupport, HintConsistencyAndVersionText) {
  auto p = make_attention_params(8, 8, 1, 1, 64, false);
  EXPECT_TRUE(mask_hint_consistent(p, BlockMask::full));
  EXPECT_FALSE(mask_hint_consistent(p, BlockMask::causal_top_left));
  p.causal = true;
  EXPECT_TRUE(mask_hint_consistent(p, BlockMask::causal_bottom_right));
  EXPECT_TRUE(mask_hint_consistent(p, BlockMask::full));  // an off-diagonal ring block
  EXPECT_EQ(cudnn_version_text(91900), "9.19.0");
  EXPECT_EQ(cudnn_version_text(90102), "9.1.2");
}

}  // namespace
}  // namespace suite::kernels
