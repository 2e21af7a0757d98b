#include <gtest/gtest.h>

#include "common/harness/errors.hpp"
#include "common/harness/size_list.hpp"

using suite::parse_sweep;
using V = std::vector<std::int64_t>;

TEST(SizeList, NumbersAndSuffixes) {
  EXPECT_EQ(suite::parse_scaled_int("17"), 17);
  EXPECT_EQ(suite::parse_scaled_int("4K"), 4096);
  EXPECT_EQ(suite::parse_scaled_int("2m"), 2 << 20);
  EXPECT_EQ(suite::parse_scaled_int("1G"), 1LL << 30);
}

TEST(SizeList, ListsAndRanges) {
  EXPECT_EQ(parse_sweep("1,2,5"), (V{1, 2, 5}));
  EXPECT_EQ(parse_sweep("1K:8K:x2"), (V{1024, 2048, 4096, 8192}));
  EXPECT_EQ(parse_sweep("1K:5K:x2"), (V{1024, 2048, 4096}));  // end need not be on the grid
  EXPECT_EQ(parse_sweep("256:1024:+256"), (V{256, 512, 768, 1024}));
  EXPECT_EQ(parse_sweep("3,1K:2K:x2"), (V{3, 1024, 2048}));
  EXPECT_EQ(parse_sweep("8:8:x2"), (V{8}));
  // Each value once, where it was first named: two equal cases would run twice.
  EXPECT_EQ(parse_sweep("64,1K:4K:x2,1K,64"), (V{64, 1024, 2048, 4096}));
}

TEST(SizeList, RejectsBadInputWithTheOffendingText) {
  for (const char* bad : {"", "abc", "4Q", "-5", "1K:8K", "8K:1K:x2", "1K:8K:x1", "0:8:x2",
                          "1K:8K:y2", "1,,2", "99999999999G"}) {
    try {
      parse_sweep(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const suite::UsageError& e) {
      EXPECT_FALSE(std::string(e.what()).empty());
    }
  }
  try {
    parse_sweep("1K:8K:x0");
    FAIL();
  } catch (const suite::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("1K:8K:x0"), std::string::npos);
  }
}

TEST(SizeList, FormatsShortestExactSpelling) {
  EXPECT_EQ(suite::format_scaled_int(1048576), "1M");
  EXPECT_EQ(suite::format_scaled_int(3072), "3K");
  EXPECT_EQ(suite::format_scaled_int(1536), "1536");
  EXPECT_EQ(suite::format_scaled_int(0), "0");
}

TEST(SizeList, IntListsKeepTheirBounds) {
  EXPECT_EQ(suite::parse_int_list("--cp", "0,2:8:x2", 0), (std::vector<int>{0, 2, 4, 8}));
  try {
    suite::parse_int_list("--cp-sweep", "0,4", 1);
    FAIL() << "0 is below the bound";
  } catch (const suite::UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "--cp-sweep: 0 is out of range (1 to 1048576)");
  }
  EXPECT_THROW(suite::parse_int_list("--tp", "2M", 0), suite::UsageError);  // above 2^20
}

TEST(ParseList, EachItemOnceInOrder) {
  const auto parse = [](const std::string& s) { return std::stoi(s); };
  EXPECT_EQ(suite::parse_list("--x", "3,1,3,2", parse), (std::vector<int>{3, 1, 2}));
  EXPECT_EQ(suite::parse_list("--x", "4/5", parse, '/'), (std::vector<int>{4, 5}));
  try {
    suite::parse_list("--x", "", parse);
    FAIL() << "an empty list was accepted";
  } catch (const suite::UsageError& e) {
    EXPECT_STREQ(e.what(), "--x names nothing");
  }
}

TEST(ParseList, NamedItemsAndTheirError) {
  const auto kind = suite::named<int>("--kind", "kind", {{"a", 1}, {"b", 2}});
  EXPECT_EQ(suite::parse_list("--kind", "b,a,b", kind), (std::vector<int>{2, 1}));
  try {
    suite::parse_list("--kind", "a,,b", kind);  // an empty item is an unknown one
    FAIL() << "an empty item was accepted";
  } catch (const suite::UsageError& e) {
    EXPECT_STREQ(e.what(), "--kind: unknown kind '' (a, b)");
  }
}
