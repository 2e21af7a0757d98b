#include "common/device/device_io.hpp"

#include <algorithm>
#include <vector>

#include "common/device/typed_host.hpp"

namespace suite {
namespace {
constexpr std::size_t kChunk = 1 << 20;  // elements per transfer
}

void upload_values(Device& device, void* dst, std::size_t count, DType t,
                   const std::function<double(std::size_t)>& value) {
  std::vector<double> chunk;
  for (std::size_t begin = 0; begin < count; begin += kChunk) {
    const std::size_t n = std::min(kChunk, count - begin);
    chunk.resize(n);
    for (std::size_t k = 0; k < n; ++k)
      chunk[k] = value(begin + k);
    auto bytes = encode(chunk, t);
    device.copy_from_host(static_cast<std::byte*>(dst) + begin * dtype_size(t), bytes.data(),
                          bytes.size());
  }
}

void scan_values(Device& device, const void* src, std::size_t count, DType t,
                 const std::function<void(std::size_t, double)>& visit) {
  std::vector<std::byte> bytes;
  for (std::size_t begin = 0; begin < count; begin += kChunk) {
    const std::size_t n = std::min(kChunk, count - begin);
    bytes.resize(n * dtype_size(t));
    device.copy_to_host(bytes.data(), static_cast<const std::byte*>(src) + begin * dtype_size(t),
                        bytes.size());
    auto values = decode(bytes.data(), n, t);
    for (std::size_t k = 0; k < n; ++k)
      visit(begin + k, values[k]);
  }
}

}  // namespace suite
