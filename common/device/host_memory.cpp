#include "common/device/host_memory.hpp"

#include <cstdint>
#include <fstream>
#include <sstream>

#include <unistd.h>

namespace suite {

std::optional<std::size_t> mem_available_from(const std::string& meminfo) {
  std::istringstream in(meminfo);
  std::string line, key;
  unsigned long long kib = 0;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    if (!(fields >> key) || key != "MemAvailable:") continue;
    if (!(fields >> kib)) return std::nullopt;
    return static_cast<std::size_t>(kib) * 1024;  // the kernel writes kB (KiB) here
  }
  return std::nullopt;
}

std::size_t host_memory_available() {
  std::ifstream in("/proc/meminfo");
  if (in) {
    std::ostringstream text;
    text << in.rdbuf();
    if (auto bytes = mem_available_from(text.str())) return *bytes;
  }
  const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return SIZE_MAX;
  return static_cast<std::size_t>(pages) * static_cast<std::size_t>(page);
}

}  // namespace suite
