// How attention sees the other context-parallel ranks' tokens (--cp-method): one type and one
// parser for the mesh benchmark that runs the method and the model that predicts it.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace suite {

// The ring (K/V blocks travel, overlapped), the all-gather variant (K/V gathered once), Ulysses
// (all-to-all to head sharding) or the hybrid (Ulysses inside groups of u CP ranks, the ring
// across them).
enum class CpMethod { ring, allgather, ulysses, hybrid };

struct CpChoice {
  CpMethod method = CpMethod::ring;
  int u = 1;  // hybrid's Ulysses degree (ulysses: C once the CP degree is known; 0 before)
  bool operator==(const CpChoice&) const = default;
  // ring, allgather, ulysses, hybrid:U
  std::string name() const;
};

// "ring", "allgather", "ulysses", "hybrid:2" -> the choice; UsageError naming --cp-method.
CpChoice parse_cp_method(const std::string& text);

// --cp-method, declared once for the mesh benchmark (a list it sweeps) and model (one method).
void add_cp_method_flag(CLI::App& app, std::string& methods);

}  // namespace suite
