#include "common/harness/size_list.hpp"

#include <algorithm>
#include <cctype>
#include <limits>
#include <sstream>

#include "common/harness/errors.hpp"

namespace suite {

std::int64_t parse_scaled_int(const std::string& text) {
  if (text.empty()) throw UsageError("empty number");
  size_t end = 0;
  long long base = 0;
  try {
    base = std::stoll(text, &end);
  } catch (const std::exception&) {
    throw UsageError("'" + text + "' is not a number");
  }
  std::int64_t scale = 1;
  if (end < text.size()) {
    switch (std::toupper(static_cast<unsigned char>(text[end]))) {
      case 'K':
        scale = 1LL << 10;
        break;
      case 'M':
        scale = 1LL << 20;
        break;
      case 'G':
        scale = 1LL << 30;
        break;
      default:
        throw UsageError("'" + text + "': unknown suffix (use K, M or G)");
    }
    ++end;
  }
  if (end != text.size()) throw UsageError("'" + text + "' is not a number");
  if (base < 0) throw UsageError("'" + text + "' is negative");
  if (base > std::numeric_limits<std::int64_t>::max() / scale)
    throw UsageError("'" + text + "' is too large");
  return base * scale;
}

namespace {

std::vector<std::int64_t> parse_range(const std::string& text) {
  auto parts = split_list(text, ':');
  if (parts.size() != 3 || parts[2].size() < 2 || (parts[2][0] != 'x' && parts[2][0] != '+'))
    throw UsageError("'" + text + "': a range is begin:end:xFACTOR or begin:end:+STEP");
  std::int64_t begin = parse_scaled_int(parts[0]);
  std::int64_t end = parse_scaled_int(parts[1]);
  std::int64_t step = parse_scaled_int(parts[2].substr(1));
  bool geometric = parts[2][0] == 'x';
  if (begin > end) throw UsageError("'" + text + "': begin is larger than end");
  if (geometric && (step < 2 || begin == 0))
    throw UsageError("'" + text + "': a geometric range needs begin >= 1 and a factor >= 2");
  if (!geometric && step < 1) throw UsageError("'" + text + "': the step must be >= 1");
  std::vector<std::int64_t> values;
  for (std::int64_t v = begin; v <= end;) {
    values.push_back(v);
    if (geometric ? v > end / step : v > end - step) break;
    v = geometric ? v * step : v + step;
  }
  return values;
}

}  // namespace

std::vector<std::string> split_list(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, sep))
    parts.push_back(part);
  if (!text.empty() && text.back() == sep) parts.emplace_back();
  return parts;
}

std::vector<std::int64_t> parse_sweep(const std::string& text) {
  std::vector<std::int64_t> values;
  auto add = [&values](std::int64_t v) {  // a value named twice is one case, not two
    if (std::find(values.begin(), values.end(), v) == values.end()) values.push_back(v);
  };
  for (const auto& item : split_list(text, ',')) {
    if (item.find(':') != std::string::npos) {
      for (std::int64_t v : parse_range(item))
        add(v);
    } else {
      add(parse_scaled_int(item));
    }
  }
  if (values.empty()) throw UsageError("'" + text + "' names no values");
  return values;
}

std::string format_scaled_int(std::int64_t v) {
  const char* suffix[] = {"", "K", "M", "G"};
  int i = 0;
  while (i < 3 && v != 0 && v % 1024 == 0) {
    v /= 1024;
    ++i;
  }
  return std::to_string(v) + suffix[i];
}

std::vector<int> parse_int_list(const std::string& flag, const std::string& text, int min,
                                int max) {
  std::vector<int> out;
  for (std::int64_t v : parse_sweep(text)) {
    if (v < min || v > max)
      throw UsageError(flag + ": " + std::to_string(v) + " is out of range (" +
                       std::to_string(min) + " to " + std::to_string(max) + ")");
    out.push_back(static_cast<int>(v));
  }
  return out;
}

}  // namespace suite
