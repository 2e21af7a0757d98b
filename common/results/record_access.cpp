#include "common/results/record_access.hpp"

#include <cmath>

namespace suite {
namespace {

const h5::Value* find(const CaseRecord& r, const std::string& name) {
  for (const auto* list : {&r.attrs, &r.params})
    for (const auto& [n, v] : *list)
      if (n == name) return &v;
  return nullptr;
}

}  // namespace

double attr_number(const CaseRecord& r, const std::string& name) {
  const h5::Value* v = find(r, name);
  if (!v) return NAN;
  if (auto* d = std::get_if<double>(v)) return *d;
  if (auto* i = std::get_if<std::int64_t>(v)) return static_cast<double>(*i);
  return NAN;
}

std::string param_text(const CaseRecord& r, const std::string& name) {
  const h5::Value* v = find(r, name);
  if (v)
    if (auto* s = std::get_if<std::string>(v)) return *s;
  return "";
}

}  // namespace suite
