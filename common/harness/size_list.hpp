// Sweep values from the command line: "a,b,c" lists and "begin:end:xFACTOR" geometric ranges
// (also "begin:end:+STEP"), each number with an optional K/M/G suffix (powers of 1024).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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

// "1048576" -> "1M", "1536" -> "1536": the shortest exact spelling, for readable case names.
std::string format_scaled_int(std::int64_t v);

}  // namespace suite
