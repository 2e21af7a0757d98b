// Memory the host can still give, as the CPU backend reports it: the kernel's MemAvailable
// (free pages plus the page cache and slabs it can reclaim), not the free pages alone, which
// shrink as the page cache grows (a build, a large read) and would then refuse cases that fit
// on one run and not on the next.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace suite {

// MemAvailable in bytes from the text of /proc/meminfo; none without that line (kernels
// before 3.14, or not Linux).
std::optional<std::size_t> mem_available_from(const std::string& meminfo);

// This host's, read now: MemAvailable, else the free pages (sysconf), else SIZE_MAX.
std::size_t host_memory_available();

}  // namespace suite
