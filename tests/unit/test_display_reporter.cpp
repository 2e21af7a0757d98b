// The console output of a benchmark: Google Benchmark's DEBUG-build warning explained, and its
// table held until the last case so that the progress lines do not split it.
#include "common/harness/display_reporter.hpp"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace suite {
namespace {

// What Debian's libbenchmark 1.7.1 printed before the first case of a `make run` (2-core VM).
const std::string kContext =
    "Run on (2 X 2596.14 MHz CPU s)\n"
    "CPU Caches:\n"
    "  L1 Data 32 KiB (x2)\n"
    "Load Average: 1.64, 0.98, 0.41\n"
    "***WARNING*** Library was built as DEBUG. Timings may be affected.\n";

TEST(DisplayReporter, DebugWarningBecomesOneNote) {
  const std::string out = explain_debug_warning(kContext);
  EXPECT_EQ(out.find("***WARNING***"), std::string::npos) << out;
  EXPECT_NE(out.find("Load Average: 1.64, 0.98, 0.41\n"), std::string::npos) << out;
  EXPECT_NE(out.find("Run on (2 X 2596.14 MHz CPU s)\n"), std::string::npos) << out;
  const auto note = out.find("note: this Google Benchmark is a debug build");
  ASSERT_NE(note, std::string::npos) << out;
  EXPECT_EQ(out.find("note:", note + 1), std::string::npos) << "the note is said once";
  EXPECT_NE(out.find("manual time"), std::string::npos) << out;
}

TEST(DisplayReporter, ContextWithoutTheWarningIsUnchanged) {
  const std::string release = "Run on (2 X 2596.14 MHz CPU s)\nLoad Average: 1.64\n";
  EXPECT_EQ(explain_debug_warning(release), release);
}

// A context as RunSpecifiedBenchmarks makes it (the name column's width is not set by its
// constructor).
benchmark::BenchmarkReporter::Context context() {
  benchmark::BenchmarkReporter::Context ctx;
  ctx.name_field_width = 40;
  return ctx;
}

benchmark::BenchmarkReporter::Run one_run(const std::string& name) {
  benchmark::BenchmarkReporter::Run run;
  run.run_name.function_name = name;
  run.iterations = 5;
  run.real_accumulated_time = 5e-3;
  run.cpu_accumulated_time = 5e-3;
  run.time_unit = benchmark::kMicrosecond;
  return run;
}

TEST(DisplayReporter, TableIsHeldUntilTheLastCase) {
  benchmark::ConsoleReporter console(benchmark::ConsoleReporter::OO_None);
  std::ostringstream out, err;
  console.SetOutputStream(&out);
  console.SetErrorStream(&err);
  DisplayReporter display(&console);
  ASSERT_TRUE(display.ReportContext(context()));
  display.ReportRuns({one_run("bench/first_case")});
  display.ReportRuns({one_run("bench/second_case")});
  EXPECT_EQ(out.str(), "") << "no row before the last case has run";
  display.Finalize();
  const std::string table = out.str();
  const auto first = table.find("bench/first_case"), second = table.find("bench/second_case");
  ASSERT_NE(first, std::string::npos) << table;
  ASSERT_NE(second, std::string::npos) << table;
  EXPECT_LT(first, second);
  EXPECT_LT(table.find("Benchmark"), first) << "the header heads the held table";
}

TEST(DisplayReporter, RowsAsTheyComeWhenNotHeld) {
  benchmark::ConsoleReporter console(benchmark::ConsoleReporter::OO_None);
  std::ostringstream out, err;
  console.SetOutputStream(&out);
  console.SetErrorStream(&err);
  DisplayReporter display(&console, false);
  display.ReportContext(context());
  display.ReportRuns({one_run("bench/first_case")});
  EXPECT_NE(out.str().find("bench/first_case"), std::string::npos) << out.str();
}

}  // namespace
}  // namespace suite
