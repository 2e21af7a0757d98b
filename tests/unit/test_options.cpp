#include <CLI/CLI.hpp>

#include <gtest/gtest.h>

#include "common/harness/errors.hpp"
#include "common/harness/options.hpp"

namespace {

std::vector<char*> argv_of(std::vector<std::string>& args) {
  std::vector<char*> out;
  for (auto& a : args)
    out.push_back(a.data());
  return out;
}

int parse(CLI::App& app, std::vector<std::string> args) {
  std::reverse(args.begin(), args.end());
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return 0;
}

}  // namespace

TEST(Options, DefaultsAndValues) {
  suite::CommonOptions o;
  CLI::App app;
  suite::add_common_options(app, o);
  ASSERT_EQ(
      parse(app, {"--backend", "cpu", "--iters", "7", "--dtype", "fp64", "--check", "0", "--link",
                  "ib", "--save-tensors", "--timeout", "2.5", "--out", "x.h5", "--seed", "9"}),
      0);
  EXPECT_EQ(o.backend, "cpu");
  EXPECT_EQ(o.iters, 7);
  EXPECT_EQ(o.dtype, "fp64");
  EXPECT_EQ(o.check, 0);
  EXPECT_EQ(o.link, "ib");
  EXPECT_TRUE(o.save_tensors);
  EXPECT_DOUBLE_EQ(o.timeout_s, 2.5);
  EXPECT_EQ(o.out, "x.h5");
  EXPECT_EQ(o.seed, 9u);
  EXPECT_EQ(o.warmup, 5);  // untouched default
}

TEST(Options, RejectsUnknownFlagsAndValues) {
  for (std::vector<std::string> bad : {std::vector<std::string>{"--bogus"},
                                       {"--backend", "tpu"},
                                       {"--iters", "0"},
                                       {"--check", "2"},
                                       {"--dtype", "fp8"},
                                       {"--timeout", "-1"}}) {
    suite::CommonOptions o;
    CLI::App app;
    suite::add_common_options(app, o);
    testing::internal::CaptureStderr();
    testing::internal::CaptureStdout();
    EXPECT_NE(parse(app, bad), 0) << bad[0];
    testing::internal::GetCapturedStderr();
    testing::internal::GetCapturedStdout();
  }
}

TEST(Options, SplitsGoogleBenchmarkFlags) {
  std::vector<std::string> args{"bench", "--iters", "3", "--benchmark_filter=rs_ag",
                                "--benchmark_repetitions=2"};
  auto argv = argv_of(args);
  auto split = suite::split_benchmark_flags(static_cast<int>(argv.size()), argv.data());
  EXPECT_EQ(split.ours, (std::vector<std::string>{"bench", "--iters", "3"}));
  EXPECT_EQ(split.benchmark, (std::vector<std::string>{"bench", "--benchmark_filter=rs_ag",
                                                       "--benchmark_repetitions=2"}));
}

TEST(Options, AcceptsInterleavingTurnedOff) {
  std::vector<std::string> args{"bench", "--benchmark_enable_random_interleaving=false"};
  auto argv = argv_of(args);
  EXPECT_NO_THROW(suite::split_benchmark_flags(static_cast<int>(argv.size()), argv.data()));
}

TEST(Options, RefusesFlagsThatDesynchroniseRanks) {
  for (std::string bad :
       {"--benchmark_enable_random_interleaving=true", "--benchmark_min_time=2"}) {
    std::vector<std::string> args{"bench", bad};
    auto argv = argv_of(args);
    EXPECT_THROW(suite::split_benchmark_flags(static_cast<int>(argv.size()), argv.data()),
                 suite::UsageError)
        << bad;
  }
}
