#include "bench/kernel_bench/kernel_results.hpp"

#include <map>
#include <regex>
#include <utility>

#include "common/harness/stats.hpp"

namespace suite::bench {
namespace {

// Every call of a case's function (Google Benchmark calls it once per trial while it sizes
// the iteration count, then once per repetition), with its iteration times.
std::map<std::string, std::vector<std::vector<double>>>& calls_by_case() {
  static std::map<std::string, std::vector<std::vector<double>>> calls;
  return calls;
}
std::vector<double>* current_call = nullptr;

// Google Benchmark's run name less the suffixes it appends to the registered name.
std::string registered_name(const std::string& run_name) {
  static const std::regex kSuffix(
      "(/(manual_time|real_time|process_time|iterations:[0-9]+|repeats:[0-9]+|min_time:[^/]+|"
      "min_warmup_time:[^/]+|threads:[0-9]+))+$");
  return std::regex_replace(run_name, kSuffix, "");
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      parts.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return parts;
}

// "op_backend/dtype[/kernel]/shape" -> typed parameters; the backend follows the last
// underscore ("attention_bwd_cuda": op attention_bwd, backend cuda).
Attributes params_of(const std::string& registered) {
  const std::vector<std::string> parts = split(registered, '/');
  const std::string& family = parts.front();
  const std::size_t underscore = family.rfind('_');
  Attributes params = {{"op", family.substr(0, underscore)},
                       {"backend", underscore == std::string::npos ? std::string("?")
                                                                   : family.substr(underscore + 1)},
                       {"dtype", parts.size() > 1 ? parts[1] : std::string("?")},
                       {"shape", parts.back()}};
  if (parts.size() == 4) params.emplace_back("kernel_choice", parts[2]);
  return params;
}

// "attn_kernel=cudnn attn_library=cudnn 9.19.0" -> {{attn_kernel, cudnn}, {attn_library, ...}}:
// a value runs to the next " key=".
Attributes label_attrs(const std::string& label) {
  static const std::regex kKey("(^| )([a-z_]+)=");
  std::vector<std::smatch> keys(std::sregex_iterator(label.begin(), label.end(), kKey),
                                std::sregex_iterator());
  Attributes out;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const std::size_t from = keys[i].position() + keys[i].length();
    const std::size_t to = i + 1 < keys.size() ? keys[i + 1].position() : label.size();
    out.emplace_back(keys[i][2].str(), label.substr(from, to - from));
  }
  return out;
}

// The counters under the results file's names (rates in FLOP/s, as measured_F_flops is).
std::string attr_name(const std::string& counter) {
  if (counter == "FLOP/s") return "flops_per_s";
  if (counter == "peak_FLOP/s") return "peak_flops";
  return counter;
}

}  // namespace

benchmark::internal::Benchmark* register_kernel_case(const std::string& name,
                                                     std::function<void(benchmark::State&)> fn) {
  return benchmark::RegisterBenchmark(name.c_str(),
                                      [name, fn](benchmark::State& state) {
                                        auto& calls = calls_by_case()[name];
                                        calls.emplace_back();
                                        current_call = &calls.back();
                                        fn(state);
                                        current_call = nullptr;
                                      })
      ->UseManualTime();
}

void set_iteration_time(benchmark::State& state, double seconds) {
  state.SetIterationTime(seconds);
  if (current_call) current_call->push_back(seconds);
}

std::string kernel_case_name(const std::string& registered, long repetition) {
  std::string name = registered;
  for (char& c : name)
    c = c == '/' ? '_' : c;
  if (repetition > 0) name += "_rep" + std::to_string(repetition);
  return name;
}

ResultsFileReporter::ResultsFileReporter(ResultsWriter& writer, bool aggregates_only)
    : display_(benchmark::CreateDefaultDisplayReporter(), false),
      writer_(writer),
      aggregates_only_(aggregates_only) {}

bool ResultsFileReporter::ReportContext(const Context& context) {
  return display_.ReportContext(context);
}

void ResultsFileReporter::Finalize() {
  display_.Finalize();
}

void ResultsFileReporter::ReportRuns(const std::vector<Run>& runs) {
  // Google Benchmark reports a case's repetitions, then (several repetitions) their
  // aggregates, in two calls: aggregates-only hides the first.
  const bool aggregates_follow =
      !runs.empty() && runs.front().run_type == Run::RT_Iteration && runs.front().repetitions > 1;
  if (!(aggregates_only_ && aggregates_follow)) display_.ReportRuns(runs);
  // The runs of one case arrive together (all its repetitions): its last calls of the reported
  // iteration count are those repetitions, in order.
  std::map<std::string, std::vector<const Run*>> by_case;
  for (const Run& run : runs)
    if (run.run_type == Run::RT_Iteration && !run.error_occurred)
      by_case[registered_name(run.benchmark_name())].push_back(&run);
  for (const auto& [registered, reps] : by_case) {
    std::vector<const std::vector<double>*> matching;
    for (const auto& call : calls_by_case()[registered])
      if (static_cast<std::int64_t>(call.size()) == reps.front()->iterations)
        matching.push_back(&call);
    for (std::size_t r = 0; r < reps.size(); ++r) {
      const Run& run = *reps[r];
      const std::size_t k =
          matching.size() >= reps.size() ? matching.size() - reps.size() + r : matching.size();
      const std::vector<double> times = k < matching.size() ? *matching[k] : std::vector<double>{};
      CaseRecord rec{"kernel_bench",
                     kernel_case_name(registered, static_cast<long>(r)),
                     params_of(registered),
                     {},
                     {},
                     {},
                     {}};
      const Summary t = summarize(times);
      rec.attrs = {{"iterations", static_cast<std::int64_t>(times.size())},
                   {"warmup", std::int64_t{0}},
                   {"time_median_s", t.median},
                   {"time_p10_s", t.p10},
                   {"time_p90_s", t.p90},
                   {"time_min_s", t.min},
                   {"time_max_s", t.max},
                   {"time_mean_s", t.mean},
                   {"check_passed", std::int64_t{-1}}};  // rates, not results: nothing to check
      for (const auto& [name, counter] : run.counters)
        rec.attrs.emplace_back(attr_name(name), static_cast<double>(counter.value));
      for (auto& attr : label_attrs(run.report_label))
        rec.attrs.push_back(std::move(attr));
      rec.tables.push_back({"time_s", times.size(), 1, times});
      writer_.write_case(rec);
      ++written_;
    }
  }
}

}  // namespace suite::bench
