// Reading figures back from a CaseRecord by name, for the tables benchmarks print at the end.
#pragma once

#include <string>

#include "common/results/results.hpp"

namespace suite {

// A numeric attribute or parameter (int or float); NaN when absent.
double attr_number(const CaseRecord& r, const std::string& name);
// A text parameter or attribute; empty when absent.
std::string param_text(const CaseRecord& r, const std::string& name);

}  // namespace suite
