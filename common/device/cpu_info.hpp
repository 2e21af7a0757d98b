// The CPU a rank runs on, as the CPU backend names its device: the model and its core count,
// e.g. "Intel(R) Xeon(R) Processor (2 cores)". It goes into device_names and so into the
// baseline registry's system key, which then tells one CPU machine from another.
#pragma once

#include <string>

namespace suite {

// The device name from the text of /proc/cpuinfo: the model ("model name"; POWER's "cpu";
// Arm's implementer and part, named as lscpu names Arm's cores), and the cores (distinct
// physical id / core id pairs; else one per processor entry; else `online_cpus`), with the
// sockets when more than one and the hardware threads when they differ from the cores.
std::string cpu_device_name_from(const std::string& cpuinfo, long online_cpus);

// This machine's, read from /proc/cpuinfo once.
std::string cpu_device_name();

}  // namespace suite
