// The CPU a rank runs on, as the CPU backend names its device: the model and its core count,
// e.g. "Intel(R) Xeon(R) Processor (2 cores)". It goes into device_names and so into the
// baseline registry's system key, which then tells one CPU machine from another.
#pragma once

#include <set>
#include <string>

namespace suite {

// The device name from the text of /proc/cpuinfo: the model ("model name"; POWER's "cpu";
// Arm's implementer and part, named as lscpu names Arm's cores), and the cores (distinct
// physical id / core id pairs; else one per processor entry; else `online_cpus`), with the
// sockets when more than one and the hardware threads when they differ from the cores.
std::string cpu_device_name_from(const std::string& cpuinfo, long online_cpus);

// This machine's, read from /proc/cpuinfo once.
std::string cpu_device_name();

// The CPU's instruction-set flags: the first processor entry's "flags" (x86) or "Features"
// (Arm) of /proc/cpuinfo's text; empty where it lists none.
std::set<std::string> cpu_flags_from(const std::string& cpuinfo);

// This machine's, read from /proc/cpuinfo once.
const std::set<std::string>& cpu_flags();

// Those of `flags` the kernels and the BLAS choose their instructions by, in a fixed order
// from the oldest (x86 SSE4.2 to AMX; Arm's SIMD to SME), comma-separated:
// "sse4_2,avx,avx2,fma,avx512f,avx512bw,avx512vl,avx512_vnni,avx512_bf16,avx512_fp16" on
// Emerald Rapids; "none" where it has none of them. Recorded as cpu_flags.
std::string cpu_isa_flags(const std::set<std::string>& flags);

}  // namespace suite
