// Sweep values from the command line: "a,b,c" lists and "begin:end:xFACTOR" geometric ranges
// (also "begin:end:+STEP"), each number with an optional K/M/G suffix (powers of 1024).
#pragma once

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/harness/errors.hpp"

namespace suite {

// Parses one number with an optional K, M or G suffix ("64K" = 65536). Throws UsageError.
std::int64_t parse_scaled_int(const std::string& text);

// Parses a list or range into the values it names, in order, each once (the first time it is
// named: "64,1K:4K:x2,1K" is 64, 1K, 2K, 4K). Throws UsageError with the
// offending text on bad syntax, a zero/negative factor, begin > end or an empty result.
std::vector<std::int64_t> parse_sweep(const std::string& text);

// A list or range of whole numbers each in [min, max] (degrees, group sizes): parse_sweep's
// values, or UsageError "FLAG: V is out of range (MIN to MAX)".
std::vector<int> parse_int_list(const std::string& flag, const std::string& text, int min,
                                int max = 1 << 20);

// "a,b,,c" -> {"a", "b", "", "c"}: the items of a separated list, empty ones kept.
std::vector<std::string> split_list(const std::string& text, char sep = ',');

// Every list flag's items: `text` split at `sep`, each item turned into a value by `item` (which
// throws UsageError naming the flag for a bad one), a value named twice kept once (the first
// time), UsageError "FLAG names nothing" where no item is left.
template <class Parse>
auto parse_list(const std::string& flag, const std::string& text, Parse item, char sep = ',') {
  using T = std::decay_t<decltype(item(std::string()))>;
  std::vector<T> out;
  for (const std::string& part : split_list(text, sep)) {
    T v = item(part);
    if constexpr (std::equality_comparable<T>)
      if (std::find(out.begin(), out.end(), v) != out.end()) continue;
    out.push_back(std::move(v));
  }
  if (out.empty()) throw UsageError(flag + " names nothing");
  return out;
}

// An item parser for a flag whose items are names: `choices` in the order the error lists them,
// UsageError "FLAG: unknown NOUN 'X' (a, b, c)" for any other text.
template <class T>
auto named(std::string flag, std::string noun, std::vector<std::pair<std::string, T>> choices) {
  return [flag = std::move(flag), noun = std::move(noun),
          choices = std::move(choices)](const std::string& item) -> T {
    std::string allowed;
    for (const auto& [name, value] : choices) {
      if (name == item) return value;
      allowed += (allowed.empty() ? "" : ", ") + name;
    }
    throw UsageError(flag + ": unknown " + noun + " '" + item + "' (" + allowed + ")");
  };
}

// "1048576" -> "1M", "1536" -> "1536": the shortest exact spelling, for readable case names.
std::string format_scaled_int(std::int64_t v);

}  // namespace suite
