#include "common/formulas/cp_method.hpp"

#include <CLI/CLI.hpp>

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

void add_cp_method_flag(CLI::App& app, std::string& methods) {
  app.add_option("--cp-method", methods,
                 "attention over the CP group: ring (ring_attention's ring, overlapped), "
                 "allgather (K/V gathered once, Llama 3's), ulysses (all-to-all to head sharding), "
                 "hybrid:U (Ulysses inside groups of U CP ranks, the ring across them); the mesh "
                 "benchmark takes a list")
      ->capture_default_str();
}

}  // namespace suite
