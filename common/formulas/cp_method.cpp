#include "common/formulas/cp_method.hpp"

#include "common/harness/errors.hpp"

namespace suite {

std::string CpChoice::name() const {
  switch (method) {
    case CpMethod::ring:
      return "ring";
    case CpMethod::allgather:
      return "allgather";
    case CpMethod::ulysses:
      return "ulysses";
    case CpMethod::hybrid:
      return "hybrid:" + std::to_string(u);
  }
  return "?";
}

CpChoice parse_cp_method(const std::string& text) {
  if (text == "ring") return {CpMethod::ring, 1};
  if (text == "allgather") return {CpMethod::allgather, 1};
  if (text == "ulysses") return {CpMethod::ulysses, 0};
  if (text.rfind("hybrid:", 0) == 0) {
    const std::string u = text.substr(7);
    if (!u.empty() && u.size() < 7 && u.find_first_not_of("0123456789") == std::string::npos &&
        std::stoi(u) >= 1)
      return {CpMethod::hybrid, std::stoi(u)};
  }
  throw UsageError("--cp-method: unknown method '" + text +
                   "' (ring, allgather, ulysses, hybrid:U with U >= 1 the Ulysses degree)");
}

}  // namespace suite
