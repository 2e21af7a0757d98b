#include "common/harness/benchmark_flags.hpp"

#include <cctype>
#include <regex>

#include "common/harness/errors.hpp"

namespace suite {

std::optional<std::string> flag_value(const std::string& a, const std::string& name) {
  const std::string key = name + "=";
  if (a.rfind(key, 0) != 0) return std::nullopt;
  return a.substr(key.size());
}

std::string last_flag_value(const std::vector<std::string>& flags, const std::string& name,
                            const std::string& fallback) {
  std::string value = fallback;
  for (const auto& a : flags)
    if (auto v = flag_value(a, name)) value = *v;
  return value;
}

bool flag_is_true(const std::vector<std::string>& flags, const std::string& name) {
  std::optional<std::string> value;
  for (const auto& a : flags) {
    if (a == name) value = "true";
    if (auto v = flag_value(a, name)) value = *v;
  }
  if (!value) return false;
  std::string v = *value;
  for (char& c : v)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return !(v == "0" || v == "false" || v == "no" || v == "off" || v == "f" || v == "n");
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
