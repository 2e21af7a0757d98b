#include "common/benchmark_flags.hpp"

#include <regex>

#include "common/errors.hpp"

namespace suite {

std::optional<std::string> flag_value(const std::string& a, const std::string& name) {
  const std::string key = name + "=";
  if (a.rfind(key, 0) != 0) return std::nullopt;
  return a.substr(key.size());
}

void check_benchmark_values(const std::string& a) {
  static const std::regex kCount("[0-9]{1,9}");
  for (const char* name : {"--benchmark_format", "--benchmark_out_format"}) {
    if (auto v = flag_value(a, name); v && *v != "console" && *v != "json" && *v != "csv")
      throw UsageError(a + ": the format is console, json or csv");
  }
  if (auto v = flag_value(a, "--benchmark_repetitions");
      v && (!std::regex_match(*v, kCount) || std::stol(*v) < 1))
    throw UsageError(a + ": the repetition count is an integer >= 1");
  if (auto v = flag_value(a, "--benchmark_filter"); v && !v->empty()) {
    try {  // compiled as Google Benchmark does (extended syntax, a leading '-' negates)
      std::regex(v->front() == '-' ? v->substr(1) : *v, std::regex::extended);
    } catch (const std::regex_error&) {
      throw UsageError(a + ": not a regular expression");
    }
  }
  if (auto v = flag_value(a, "--benchmark_time_unit");
      v && *v != "ns" && *v != "us" && *v != "ms" && *v != "s")
    throw UsageError(a + ": the time unit is ns, us, ms or s");
}

}  // namespace suite
