#include "bench/pipeline/hop_buffer.hpp"

#include <utility>

#include "common/sim/sim.hpp"

namespace suite::pipeline {

HopBuffer HopBuffer::receiving(std::size_t values) {
  HopBuffer hop;
  hop.values_ = values;
  hop.placeholder_ = sim::alloc_placeholder(values * sizeof(double));
  if (!hop.placeholder_.data()) hop.rows_.resize(values);
  return hop;
}

HopBuffer HopBuffer::holding(Rows rows) {
  HopBuffer hop;
  hop.values_ = rows.size();
  hop.placeholder_ = sim::alloc_placeholder(rows.size() * sizeof(double));
  if (!hop.placeholder_.data()) hop.rows_ = std::move(rows);
  return hop;
}

void* HopBuffer::data() {
  return placeholder_.data() ? placeholder_.data() : rows_.data();
}

Rows HopBuffer::take() {
  if (!placeholder_.data()) return std::move(rows_);
  placeholder_ = Buffer();
  return Rows(values_);
}

}  // namespace suite::pipeline
