#pragma once

#include <benchmark/benchmark.h>

#include <sstream>
#include <string>
#include <vector>

namespace suite {

// Google Benchmark's display reporter (as --benchmark_format and _color set it) with two
// changes. Its table is held until the last case has run and printed whole then, so the
// "[i/N] case" progress lines (stderr, as each case starts) come before it and do not split it.
// Its warning that the library was built as DEBUG (Debian's libbenchmark is) becomes one line
// saying why it does not apply: the suite times every step with its own clock and hands the
// library the result (manual time), so the library's build affects no figure. The other context
// lines (CPU, caches, load) are printed as they were.
class DisplayReporter final : public benchmark::BenchmarkReporter {
 public:
  // display: Google Benchmark's reporter (benchmark::CreateDefaultDisplayReporter(), after
  // benchmark::Initialize); hold_table = false prints each row as its case ends.
  explicit DisplayReporter(benchmark::BenchmarkReporter* display, bool hold_table = true);
  bool ReportContext(const Context& context) override;
  void ReportRuns(const std::vector<Run>& runs) override;
  void Finalize() override;

 private:
  benchmark::BenchmarkReporter* display_;  // owned by Google Benchmark
  bool hold_table_;
  std::ostream* out_ = nullptr;  // where the table goes in the end (the display's stream)
  std::ostringstream table_;
};

// The context lines Google Benchmark prints, with its DEBUG-build warning replaced by the note
// above (tested on its own).
std::string explain_debug_warning(const std::string& context);

}  // namespace suite
