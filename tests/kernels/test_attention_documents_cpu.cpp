// Packed documents (varlen): one attention call over tagged positions (attention_index.hpp)
// must equal each document's attention computed on its own with plain positions, forward and
// backward, causal and full. The per-document runs never see a tag, so the expected values do
// not come from the tagging code under test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/attention/attention_cpu.hpp"
#include "kernels/attention/attention_tile_range.hpp"
#include "kernels/attention/tile_mask.hpp"
#include "tests/kernels/kernel_test_util.hpp"

namespace suite::kernels {
namespace {

// Document starts (cu_seqlens without the final s) of a pack of `lengths`.
std::vector<std::int64_t> tagged_positions(const std::vector<std::int64_t>& lengths) {
  std::vector<std::int64_t> pos;
  for (std::size_t d = 0; d < lengths.size(); ++d)
    for (std::int64_t i = 0; i < lengths[d]; ++i)
      pos.push_back(
          tag_document(static_cast<std::int64_t>(d), static_cast<std::int64_t>(pos.size())));
  return pos;
}

struct Pack {
  std::vector<std::int64_t> lengths;
  int heads, kv_heads, head_dim;
  bool causal;
};

class DocumentMask : public ::testing::TestWithParam<Pack> {};

TEST_P(DocumentMask, OneTaggedCallEqualsEachDocumentAlone) {
  const Pack pk = GetParam();
  std::int64_t s = 0;
  for (auto l : pk.lengths)
    s += l;
  const auto p = make_attention_params(s, s, pk.heads, pk.kv_heads, pk.head_dim, pk.causal);
  const auto q = test::random_vector<double>(s * p.ld_q, 11);
  const auto k = test::random_vector<double>(s * p.ld_k, 12);
  const auto v = test::random_vector<double>(s * p.ld_v, 13);
  const auto d_o = test::random_vector<double>(s * p.ld_o, 14);
  const auto tagged = tagged_positions(pk.lengths);

  std::vector<double> o(s * p.ld_o), lse(pk.heads * s), delta(lse.size());
  std::vector<double> dq(q.size(), 0.0), dk(k.size(), 0.0), dv(v.size(), 0.0);
  cpu::attention_forward<double>(p, q.data(), k.data(), v.data(), tagged.data(), tagged.data(),
                                 o.data(), lse.data());
  cpu::attention_backward_delta<double>(s, pk.heads, pk.head_dim, o.data(), d_o.data(), p.ld_o,
                                        delta.data());
  cpu::attention_backward<double>(p, q.data(), k.data(), v.data(), d_o.data(), lse.data(),
                                  delta.data(), tagged.data(), tagged.data(), dq.data(), dk.data(),
                                  dv.data());

  std::int64_t start = 0, pairs = 0;
  for (std::int64_t len : pk.lengths) {
    auto pd = make_attention_params(len, len, pk.heads, pk.kv_heads, pk.head_dim, pk.causal);
    pd.ld_q = pd.ld_o = p.ld_q;
    pd.ld_k = pd.ld_v = p.ld_k;
    const auto plain = test::iota_positions(len);
    std::vector<double> od(len * p.ld_o), lsed(pk.heads * len);
    std::vector<double> dqd(len * p.ld_q, 0.0), dkd(len * p.ld_k, 0.0), dvd(len * p.ld_v, 0.0);
    cpu::attention_reference<double>(pd, q.data() + start * p.ld_q, k.data() + start * p.ld_k,
                                     v.data() + start * p.ld_v, plain.data(), plain.data(),
                                     od.data(), lsed.data());
    cpu::attention_backward_reference<double>(pd, q.data() + start * p.ld_q,
                                              k.data() + start * p.ld_k, v.data() + start * p.ld_v,
                                              d_o.data() + start * p.ld_o, plain.data(),
                                              plain.data(), dqd.data(), dkd.data(), dvd.data());
    for (std::int64_t i = 0; i < len * p.ld_o; ++i)
      ASSERT_NEAR(o[start * p.ld_o + i], od[i], 1e-12) << "o, document at " << start;
    for (int h = 0; h < pk.heads; ++h)
      for (std::int64_t i = 0; i < len; ++i)
        ASSERT_NEAR(lse[h * s + start + i], lsed[h * len + i], 1e-12) << "lse at " << start + i;
    for (std::int64_t i = 0; i < len * p.ld_q; ++i)
      ASSERT_NEAR(dq[start * p.ld_q + i], dqd[i], 1e-11) << "dq, document at " << start;
    for (std::int64_t i = 0; i < len * p.ld_k; ++i) {
      ASSERT_NEAR(dk[start * p.ld_k + i], dkd[i], 1e-11) << "dk, document at " << start;
      ASSERT_NEAR(dv[start * p.ld_v + i], dvd[i], 1e-11) << "dv, document at " << start;
    }
    pairs += pk.causal ? len * (len + 1) / 2 : len * len;  // by hand: each document alone
    start += len;
  }
  EXPECT_EQ(visible_pairs(pk.causal, tagged.data(), s, tagged.data(), s), pairs);
}

// Tiny documents between long ones (tiles of 256 x 512 queries and keys straddle several),
// a document of one token, GQA, both head dims.
INSTANTIATE_TEST_SUITE_P(Packs, DocumentMask,
                         ::testing::Values(Pack{{3, 50, 1, 200, 46}, 4, 2, 64, true},
                                           Pack{{3, 50, 1, 200, 46}, 4, 2, 64, false},
                                           Pack{{600, 1, 1, 97}, 2, 1, 128, true},
                                           Pack{{300, 300, 7}, 2, 2, 64, false},
                                           Pack{{1, 1, 1, 1, 1}, 2, 1, 64, true}));

TEST(DocumentMask, TagsKeepPositionsAndOrder) {
  EXPECT_EQ(document_of(tag_document(5, 123)), 5);
  EXPECT_EQ(untagged_position(tag_document(5, 123)), 123);
  EXPECT_LT(tag_document(0, 99), tag_document(1, 100));  // sorted as the positions are
  EXPECT_TRUE(key_visible(true, tag_document(1, 10), tag_document(1, 7)));
  EXPECT_FALSE(key_visible(true, tag_document(1, 10), tag_document(0, 7)));
  EXPECT_FALSE(key_visible(false, tag_document(1, 10), tag_document(2, 17)));
  EXPECT_TRUE(key_visible(false, tag_document(1, 10), tag_document(1, 17)));
  const KeyWindow w = visible_window(false, tag_document(3, 40));
  EXPECT_EQ(w.lo, tag_document(3, 0));
  EXPECT_EQ(w.hi + 1, tag_document(4, 0));
}

TEST(DocumentMask, TileClassificationAcrossDocuments) {
  const std::int64_t a0 = tag_document(0, 0), a9 = tag_document(0, 9);
  const std::int64_t b10 = tag_document(1, 10), b19 = tag_document(1, 19);
  // Queries all in document 1, keys all in document 0: nothing, causal or not.
  EXPECT_EQ(classify_tile(false, b10, b19, a0, a9, true, true, true), TileVisibility::none);
  EXPECT_EQ(classify_tile(true, b10, b19, a0, a9, true, true, true), TileVisibility::none);
  // Queries across both documents: partly visible even without a causal mask.
  EXPECT_EQ(classify_tile(false, a0, b19, a0, a9, true, true, true), TileVisibility::partial);
  // One document on both sides, no causal mask: every pair.
  EXPECT_EQ(classify_tile(false, b10, b19, b10, b19, true, true, true), TileVisibility::all);
  EXPECT_FALSE(tile_pair_visible(false, a9, b10));  // keys of a later document only
}

// The CPU kernels' row blocks over tiles of short documents (striped positions, stride 3, as
// a ring block holds them; and the same with the second half of each block's rows reversed, as
// a zig-zag block holds two chunks out of order): every visible pair lies in exactly one block's
// rows and keys (counted by brute force over the raw positions), no unmasked block holds a
// hidden pair, no block that masks spans two documents' queries, and none has more rows than a
// diagonal piece (8 here, sub-tiles of 32). Tiles of 128 rows (longer than a sub-tile) and of 20
// (shorter, some across a document boundary).
TEST(DocumentMask, RowBlocksCoverEveryVisiblePairOnceAndKeepToOneDocument) {
  const std::vector<std::int64_t> lengths = {3, 50, 1, 200, 46, 90, 7, 400};
  std::vector<std::int64_t> doc_of_pos;
  for (std::size_t d = 0; d < lengths.size(); ++d)
    doc_of_pos.insert(doc_of_pos.end(), static_cast<std::size_t>(lengths[d]),
                      static_cast<std::int64_t>(d));
  auto strided = [&](std::int64_t first, bool reverse_half) {
    std::vector<std::int64_t> pos;
    for (std::int64_t p = first; p < static_cast<std::int64_t>(doc_of_pos.size()); p += 3)
      pos.push_back(p);
    if (reverse_half)
      std::reverse(pos.begin() + static_cast<std::ptrdiff_t>(pos.size() / 2), pos.end());
    return pos;
  };
  auto tagged = [&](const std::vector<std::int64_t>& raw) {
    std::vector<std::int64_t> out;
    for (std::int64_t p : raw)
      out.push_back(tag_document(doc_of_pos[static_cast<std::size_t>(p)], p));
    return out;
  };
  for (bool reverse_half : {false, true})
    for (const std::int64_t tile : {128, 20})
      for (bool causal : {true, false}) {
        const std::vector<std::int64_t> qp = strided(1, reverse_half),
                                        kp = strided(2, reverse_half);
        const std::vector<std::int64_t> q = tagged(qp), k = tagged(kp);
        const auto rows = static_cast<std::int64_t>(q.size()),
                   keys = static_cast<std::int64_t>(k.size());
        std::vector<int> covered(static_cast<std::size_t>(rows * keys), 0);
        for (std::int64_t i0 = 0; i0 < rows; i0 += tile) {
          const std::int64_t i1 = std::min(i0 + tile, rows);
          cpu::for_each_row_block(causal, q.data(), i0, i1, k.data(), 0, keys, 32, 8,
                                  [&](std::int64_t r0, std::int64_t r1, const cpu::KeySpan& span) {
                                    if (span.needs_mask) {
                                      EXPECT_LE(r1 - r0, 8) << "rows " << i0 + r0;
                                      for (std::int64_t r = r0; r < r1; ++r)
                                        EXPECT_EQ(document_of(q[i0 + r]), document_of(q[i0 + r0]))
                                            << "a masked block spans documents at row " << i0 + r;
                                    }
                                    for (std::int64_t r = r0; r < r1; ++r)
                                      for (std::int64_t j = span.begin; j < span.end; ++j) {
                                        const bool seen = key_visible(causal, q[i0 + r], k[j]);
                                        // A call without a mask computes every pair it spans.
                                        EXPECT_TRUE(seen || span.needs_mask)
                                            << "an unmasked call holds hidden pair (" << i0 + r
                                            << ", " << j << ")";
                                        if (seen) ++covered[(i0 + r) * keys + j];
                                      }
                                  });
        }
        for (std::int64_t i = 0; i < rows; ++i)
          for (std::int64_t j = 0; j < keys; ++j) {
            const std::int64_t a = qp[static_cast<std::size_t>(i)],
                               b = kp[static_cast<std::size_t>(j)];
            const bool visible = doc_of_pos[static_cast<std::size_t>(a)] ==
                                     doc_of_pos[static_cast<std::size_t>(b)] &&
                                 (!causal || b <= a);
            ASSERT_EQ(covered[i * keys + j], visible ? 1 : 0)
                << "query " << i << ", key " << j << ", tiles of " << tile
                << (reverse_half ? ", half reversed" : "");
          }
      }
}

// A causal diagonal of 64 rows (one document, queries and keys at the same positions), sub-tiles
// of 32, pieces of 8: the calls, listed by hand. The first sub-tile's rows all see key 0 only, too
// few keys for a call of their own, so its pieces start at key 0; the second's all see keys 0 to
// 32, and the unmasked call takes whole pieces' worth of them, keys 0 to 31, the pieces the rest
// from key 32.
TEST(DocumentMask, ACausalDiagonalGivesNoCallToFewerKeysThanAPiece) {
  std::vector<std::int64_t> pos;
  for (std::int64_t p = 0; p < 64; ++p)
    pos.push_back(tag_document(0, p));
  struct Call {
    std::int64_t r0, r1, begin, end;
    bool masked;
    bool operator==(const Call&) const = default;
  };
  std::vector<Call> got;
  cpu::for_each_row_block(true, pos.data(), 0, 64, pos.data(), 0, 64, 32, 8,
                          [&](std::int64_t r0, std::int64_t r1, const cpu::KeySpan& span) {
                            got.push_back({r0, r1, span.begin, span.end, span.needs_mask});
                          });
  const std::vector<Call> want = {
      {0, 8, 0, 8, true},     {8, 16, 0, 16, true},   {16, 24, 0, 24, true},
      {24, 32, 0, 32, true},  {32, 64, 0, 32, false}, {32, 40, 32, 40, true},
      {40, 48, 32, 48, true}, {48, 56, 32, 56, true}, {56, 64, 32, 64, true}};
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i)
    EXPECT_TRUE(got[i] == want[i]) << "call " << i << ": rows [" << got[i].r0 << ", " << got[i].r1
                                   << ") keys [" << got[i].begin << ", " << got[i].end << ")";
}

}  // namespace
}  // namespace suite::kernels
