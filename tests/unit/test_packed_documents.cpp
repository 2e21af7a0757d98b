// Packed documents (--docs): the spec's forms and refusals, the pack's draws (deterministic,
// filling the sequence, the last document cut), and the schedule's per-block counts and masks
// against brute force over the document mask for every layout.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <tuple>

#include "bench/layouts/packed_documents.hpp"
#include "bench/layouts/ring_layout.hpp"
#include "common/harness/errors.hpp"
#include "kernels/attention/attention_index.hpp"
#include "tests/unit/segment_pairs.hpp"

namespace suite::ring {
namespace {

std::string refusal(const std::string& spec) {
  try {
    parse_doc_spec(spec);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

std::string temp_file(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

TEST(DocSpec, ParsesEveryForm) {
  EXPECT_EQ(parse_doc_spec("fixed:128").kind, DocSpec::Kind::fixed);
  const DocSpec u = parse_doc_spec("uniform:16:64");
  EXPECT_EQ(u.a, 16);
  EXPECT_EQ(u.b, 64);
  EXPECT_EQ(parse_doc_spec("lognormal:200:1.5").b, 1.5);
  EXPECT_EQ(parse_doc_spec("pareto:8:1.2").kind, DocSpec::Kind::pareto);
  const DocSpec f = parse_doc_spec("file:" + temp_file("lens.txt", "3\n\n 40 \n7\n"));
  EXPECT_EQ(f.lengths, (std::vector<std::int64_t>{3, 40, 7}));
}

TEST(DocSpec, RefusesBadInputWithOneMessage) {
  EXPECT_NE(refusal("fixed:0").find("whole number of tokens >= 1"), std::string::npos);
  EXPECT_NE(refusal("uniform:0:5").find(">= 1"), std::string::npos);
  EXPECT_NE(refusal("uniform:9:5").find("MAX must be >= MIN"), std::string::npos);
  EXPECT_NE(refusal("fixed:2.5").find("whole number"), std::string::npos);
  EXPECT_NE(refusal("lognormal:0.5:1").find("MEDIAN"), std::string::npos);
  EXPECT_NE(refusal("pareto:4:0").find("ALPHA"), std::string::npos);
  EXPECT_NE(refusal("zipf:3").find("unknown distribution 'zipf'"), std::string::npos);
  EXPECT_NE(refusal("fixed").find("expected fixed:L"), std::string::npos);
  EXPECT_NE(refusal("uniform:4").find("expected uniform:MIN:MAX"), std::string::npos);
  EXPECT_NE(refusal("fixed:abc").find("not a number"), std::string::npos);
  EXPECT_NE(refusal("file:/nonexistent/lens").find("cannot read"), std::string::npos);
  EXPECT_NE(refusal("file:" + temp_file("bad.txt", "5\n-3\n")).find("line 2"), std::string::npos);
  EXPECT_NE(refusal("file:" + temp_file("zero.txt", "0\n")).find("positive whole"),
            std::string::npos);
  EXPECT_NE(refusal("file:" + temp_file("word.txt", "12\nten\n")).find("'ten'"), std::string::npos);
  EXPECT_NE(refusal("file:" + temp_file("empty.txt", "\n")).find("holds no lengths"),
            std::string::npos);
}

TEST(PackedDocuments, FillsTheSequenceAndCutsTheLast) {
  const auto p = PackedDocuments::pack(parse_doc_spec("fixed:300"), 1000, 1);
  EXPECT_EQ(p.cu_seqlens(), (std::vector<std::int64_t>{0, 300, 600, 900, 1000}));
  EXPECT_EQ(p.cut_tokens(), 200);
  EXPECT_EQ(p.document_of(0), 0);
  EXPECT_EQ(p.document_of(599), 1);
  EXPECT_EQ(p.document_of(600), 2);
  EXPECT_EQ(p.document_of(999), 3);
  // By hand: 300 (300 + 1) / 2 three times and 100 101 / 2.
  EXPECT_EQ(p.total_visible_pairs(true), 3 * 45150 + 5050);
  EXPECT_EQ(p.total_visible_pairs(false), 3 * 90000 + 10000);
  const auto exact = PackedDocuments::pack(parse_doc_spec("fixed:250"), 1000, 1);
  EXPECT_EQ(exact.count(), 4);
  EXPECT_EQ(exact.cut_tokens(), 0);
}

// A padding slot is tagged with no document, so a kernel given it as a key among a block's
// tokens (--varlen-calls block) never lets a query see it, causal or not.
TEST(PackedDocuments, PaddingSlotsAreTaggedWithNoDocument) {
  // Documents of 5 and 2 tokens padded to multiples of 4: slots 5..7 and 10..11 are padding.
  const auto spec = parse_doc_spec("file:" + temp_file("padded.txt", "5\n2\n"));
  const auto p = PackedDocuments::pack(spec, 12, 3, 4);
  ASSERT_EQ(p.cu_seqlens_padded(), (std::vector<std::int64_t>{0, 8, 12}));
  std::vector<std::int64_t> slots(12);
  for (std::int64_t i = 0; i < 12; ++i)
    slots[static_cast<std::size_t>(i)] = i;
  const std::vector<std::int64_t> tagged = p.tagged(slots);
  const std::vector<std::int64_t> pads{5, 6, 7, 10, 11};
  for (std::int64_t i = 0; i < 12; ++i) {
    const bool pad = std::find(pads.begin(), pads.end(), i) != pads.end();
    const std::int64_t t = tagged[static_cast<std::size_t>(i)];
    EXPECT_EQ(kernels::untagged_position(t), i);
    EXPECT_EQ(kernels::document_of(t), pad ? kernels::kNoDocument : (i < 8 ? 0 : 1)) << i;
    for (std::int64_t q : {0, 4, 8, 9})  // the tokens of both documents
      for (bool causal : {false, true}) {
        const std::int64_t tq = tagged[static_cast<std::size_t>(q)];
        if (pad) EXPECT_FALSE(kernels::key_visible(causal, tq, t)) << q << " " << i;
        if (pad) EXPECT_FALSE(kernels::key_maybe_visible(causal, tq, tq, t)) << q << " " << i;
      }
  }
}

TEST(PackedDocuments, FileLengthsInOrderThenAgain) {
  const auto spec = parse_doc_spec("file:" + temp_file("cycle.txt", "5\n2\n"));
  const auto p = PackedDocuments::pack(spec, 12, 9);
  EXPECT_EQ(p.cu_seqlens(), (std::vector<std::int64_t>{0, 5, 7, 12}));
  EXPECT_THROW(PackedDocuments::pack(spec, 4, 9), UsageError);  // cannot hold the 5
}

TEST(PackedDocuments, RefusesASequenceShorterThanTheShortestDocument) {
  try {
    PackedDocuments::pack(parse_doc_spec("uniform:600:900"), 512, 1);
    FAIL() << "accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot hold a document of 600"), std::string::npos);
  }
}

TEST(PackedDocuments, SameSeedSamePackOtherSeedAnother) {
  const auto spec = parse_doc_spec("lognormal:64:1");
  const auto a = PackedDocuments::pack(spec, 100000, 7), b = PackedDocuments::pack(spec, 100000, 7);
  const auto c = PackedDocuments::pack(spec, 100000, 8);
  EXPECT_EQ(a.cu_seqlens(), b.cu_seqlens());
  EXPECT_NE(a.cu_seqlens(), c.cu_seqlens());
  EXPECT_EQ(a.tokens(), 100000);
}

// The draws follow their distributions (large samples, deterministic seeds, loose bounds).
std::vector<std::int64_t> lengths_of(const PackedDocuments& p) {
  std::vector<std::int64_t> out;
  for (std::int64_t d = 0; d + 1 < p.count(); ++d)  // the last may be cut
    out.push_back(p.length(d));
  return out;
}

TEST(PackedDocuments, DrawsFollowTheirDistributions) {
  auto u = lengths_of(PackedDocuments::pack(parse_doc_spec("uniform:10:30"), 2000000, 3));
  double mean = 0;
  for (auto l : u) {
    ASSERT_GE(l, 10);
    ASSERT_LE(l, 30);
    mean += static_cast<double>(l) / u.size();
  }
  EXPECT_NEAR(mean, 20.0, 0.2);
  EXPECT_EQ(*std::min_element(u.begin(), u.end()), 10);
  EXPECT_EQ(*std::max_element(u.begin(), u.end()), 30);

  auto ln = lengths_of(PackedDocuments::pack(parse_doc_spec("lognormal:100:0.8"), 4000000, 3));
  std::nth_element(ln.begin(), ln.begin() + ln.size() / 2, ln.end());
  EXPECT_NEAR(static_cast<double>(ln[ln.size() / 2]), 100.0, 4.0);  // the median

  // Pareto(MIN, ALPHA): P(L >= x) = (MIN / x)^ALPHA; at x = 4 MIN, 1/4^1.5 = 1/8.
  auto pa = lengths_of(PackedDocuments::pack(parse_doc_spec("pareto:50:1.5"), 8000000, 3));
  std::size_t tail = 0;
  for (auto l : pa) {
    ASSERT_GE(l, 50);
    tail += l >= 200;
  }
  EXPECT_NEAR(static_cast<double>(tail) / pa.size(), 0.125, 0.01);
}

// Every (query segment, key segment) pair of every layout: the count against brute force over
// the document mask, and the mask hint consistent with it.
class DocumentPairs : public ::testing::TestWithParam<std::tuple<Layout, int, std::int64_t>> {};

TEST_P(DocumentPairs, CountsAndMasksMatchBruteForce) {
  auto [layout, n_c, c] = GetParam();
  const std::int64_t s = c * n_c;
  for (const char* spec : {"uniform:1:9", "fixed:37", "pareto:3:0.8"}) {
    const auto docs = PackedDocuments::pack(parse_doc_spec(spec), s, 5);
    for_each_segment_pair(
        layout, n_c, c, [&](bool causal, int r, int src, const Segment& q, const Segment& k) {
          const std::int64_t brute = brute_force_pairs(q, k, [&](std::int64_t qp, std::int64_t kp) {
            return docs.document_of(qp) == docs.document_of(kp) && (!causal || kp <= qp);
          });
          ASSERT_EQ(visible_pairs(q, k, causal, &docs), brute)
              << spec << " causal " << causal << " ranks " << r << "," << src;
          const auto mask = classify_pair(q, k, causal, &docs);
          ASSERT_EQ(!mask.has_value(), brute == 0) << spec;
          if (mask && *mask != kernels::BlockMask::positions) {  // a shape: its own count
            ASSERT_EQ(kernels::structured_visible_pairs(causal ? *mask : kernels::BlockMask::full,
                                                        q.count, k.count),
                      brute)
                << spec;
          }
        });
    if (HasFatalFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, DocumentPairs,
                         ::testing::Combine(::testing::Values(Layout::contiguous, Layout::zigzag,
                                                              Layout::striped),
                                            ::testing::Values(2, 4), ::testing::Values(32, 50)));

}  // namespace
}  // namespace suite::ring
