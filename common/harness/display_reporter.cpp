#include "common/harness/display_reporter.hpp"

#include <string>

namespace suite {

namespace {

constexpr const char* kDebugWarning = "Library was built as DEBUG";
constexpr const char* kDebugNote =
    "note: this Google Benchmark is a debug build; the suite's times do not depend on it: each "
    "step is timed by the suite's own clock and handed to the library (manual time)\n";

}  // namespace

std::string explain_debug_warning(const std::string& context) {
  std::istringstream in(context);
  std::string out, line;
  while (std::getline(in, line))
    out += line.find(kDebugWarning) == std::string::npos ? line + "\n" : kDebugNote;
  return out;
}

DisplayReporter::DisplayReporter(benchmark::BenchmarkReporter* display, bool hold_table)
    : display_(display), hold_table_(hold_table) {}

bool DisplayReporter::ReportContext(const Context& context) {
  // The context goes to the display's error stream: catch it to replace the warning.
  std::ostream& err = display_->GetErrorStream();
  std::ostringstream caught;
  display_->SetErrorStream(&caught);
  out_ = &display_->GetOutputStream();
  if (hold_table_) display_->SetOutputStream(&table_);
  const bool ok = display_->ReportContext(context);
  display_->SetErrorStream(&err);
  err << explain_debug_warning(caught.str()) << std::flush;
  return ok;
}

void DisplayReporter::ReportRuns(const std::vector<Run>& runs) {
  display_->ReportRuns(runs);
}

void DisplayReporter::Finalize() {
  display_->Finalize();
  if (!hold_table_ || out_ == nullptr) return;
  display_->SetOutputStream(out_);
  *out_ << table_.str() << std::flush;
}

}  // namespace suite
