#include "common/device/device.hpp"

#include <algorithm>
#include <utility>

namespace suite {

Buffer Buffer::on_free(std::function<void()> hook) && {
  Deleter inner = ptr_.get_deleter();
  void* p = ptr_.release();
  return Buffer(p, bytes_, [inner = std::move(inner), hook = std::move(hook)](void* q) {
    inner(q);
    hook();
  });
}

Buffer Device::alloc(std::size_t bytes) {
  Buffer b = allocate(bytes);
  if (!b.data()) return b;  // nothing was allocated (0 bytes)
  const auto n = static_cast<std::int64_t>(bytes);
  counters_->live += n;
  counters_->peak = std::max(counters_->peak, counters_->live);
  ++counters_->allocations;
  return std::move(b).on_free([counters = counters_, n] { counters->live -= n; });
}

}  // namespace suite
