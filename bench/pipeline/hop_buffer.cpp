#include "bench/pipeline/hop_buffer.hpp"

#include <utility>

#include "common/harness/errors.hpp"
#include "common/sim/sim.hpp"

namespace suite::pipeline {

HopBuffer HopBuffer::receiving(std::size_t values) {
  HopBuffer hop;
  hop.values_ = values;
  hop.placeholder_ = sim::alloc_placeholder(values * sizeof(double));
  if (!hop.placeholder_.data()) hop.rows_.resize(values);
  return hop;
}

HopBuffer HopBuffer::holding(Rows rows, std::size_t values) {
  SUITE_CHECK(rows.empty() || rows.size() == values, "a hop's rows fill its values");
  HopBuffer hop;
  hop.values_ = values;
  hop.placeholder_ = sim::alloc_placeholder(values * sizeof(double));
  SUITE_CHECK(hop.placeholder_.data() || rows.size() == values,
              "only a placeholder hop travels without its rows (modeled compute)");
  if (!hop.placeholder_.data()) hop.rows_ = std::move(rows);
  return hop;
}

void* HopBuffer::data() {
  return placeholder_.data() ? placeholder_.data() : rows_.data();
}

Rows HopBuffer::take() {
  if (!placeholder_.data()) return std::move(rows_);
  placeholder_ = Buffer();
  return Rows();
}

}  // namespace suite::pipeline
