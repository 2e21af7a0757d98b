#include "common/device/cpu_info.hpp"

#include <unistd.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

namespace suite {
namespace {

using Entry = std::map<std::string, std::string>;

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

// Runs of blanks as one space (AMD pads its model names).
std::string squeeze(const std::string& s) {
  std::string out;
  for (char c : trim(s))
    if (!(c == ' ' || c == '\t') || (!out.empty() && out.back() != ' '))
      out += (c == '\t' ? ' ' : c);
  return out;
}

// One map per processor entry (entries are separated by blank lines; keys before the first
// "processor" line, as on some Arm kernels, go into an entry of their own).
std::vector<Entry> parse(const std::string& text) {
  std::vector<Entry> entries(1);
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (trim(line).empty()) {
      if (!entries.back().empty()) entries.emplace_back();
      continue;
    }
    if (colon == std::string::npos) continue;
    entries.back()[trim(line.substr(0, colon))] = trim(line.substr(colon + 1));
  }
  if (entries.back().empty()) entries.pop_back();
  return entries;
}

// Arm's own cores by MIDR part number (implementer 0x41), as lscpu names them.
std::string arm_core(const std::string& part) {
  static const std::map<std::string, std::string> kParts = {
      {"0xd0c", "Neoverse-N1"}, {"0xd40", "Neoverse-V1"}, {"0xd49", "Neoverse-N2"},
      {"0xd4f", "Neoverse-V2"}, {"0xd84", "Neoverse-V3"}, {"0xd8e", "Neoverse-N3"},
      {"0xd0b", "Cortex-A76"},  {"0xd41", "Cortex-A78"},  {"0xd08", "Cortex-A72"}};
  auto it = kParts.find(part);
  return it == kParts.end() ? "" : it->second;
}

std::string model_of(const std::vector<Entry>& entries) {
  for (const char* key : {"model name", "cpu model", "cpu"}) {
    for (const auto& e : entries) {
      auto it = e.find(key);
      if (it != e.end() && !it->second.empty()) return squeeze(it->second);
    }
  }
  for (const auto& e : entries) {
    auto impl = e.find("CPU implementer"), part = e.find("CPU part");
    if (impl == e.end() || part == e.end()) continue;
    const std::string known = impl->second == "0x41" ? arm_core(part->second) : "";
    return known.empty() ? "Arm CPU implementer " + impl->second + " part " + part->second : known;
  }
  return "unknown CPU";
}

std::string proc_cpuinfo() {
  std::ifstream in("/proc/cpuinfo");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

std::string cpu_device_name_from(const std::string& cpuinfo, long online_cpus) {
  const std::vector<Entry> entries = parse(cpuinfo);
  long threads = 0;
  std::set<std::pair<std::string, std::string>> cores;
  std::set<std::string> sockets;
  for (const auto& e : entries) {
    if (!e.count("processor")) continue;
    ++threads;
    auto socket = e.find("physical id"), core = e.find("core id");
    if (socket != e.end() && core != e.end()) {
      cores.emplace(socket->second, core->second);
      sockets.insert(socket->second);
    }
  }
  if (threads == 0) threads = online_cpus > 0 ? online_cpus : 1;
  const long n_cores = cores.empty() ? threads : static_cast<long>(cores.size());
  std::string count;
  if (sockets.size() > 1) count = std::to_string(sockets.size()) + " sockets, ";
  count += std::to_string(n_cores) + (n_cores == 1 ? " core" : " cores");
  if (threads != n_cores) count += ", " + std::to_string(threads) + " threads";
  return model_of(entries) + " (" + count + ")";
}

std::string cpu_device_name() {
  static const std::string name =
      cpu_device_name_from(proc_cpuinfo(), sysconf(_SC_NPROCESSORS_ONLN));
  return name;
}

std::set<std::string> cpu_flags_from(const std::string& cpuinfo) {
  for (const auto& e : parse(cpuinfo)) {
    auto it = e.find("flags");
    if (it == e.end()) it = e.find("Features");
    if (it == e.end()) continue;
    std::set<std::string> flags;
    std::istringstream words(it->second);
    for (std::string w; words >> w;)
      flags.insert(w);
    return flags;
  }
  return {};
}

const std::set<std::string>& cpu_flags() {
  static const std::set<std::string> flags = cpu_flags_from(proc_cpuinfo());
  return flags;
}

std::string cpu_isa_flags(const std::set<std::string>& flags) {
  static const char* const kIsa[] = {
      "sse4_2",   "avx",         "avx2",        "fma",         "avx512f",  "avx512bw",
      "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16",
      "asimd",    "sve",         "sve2",        "bf16",        "i8mm",     "sme"};
  std::string out;
  for (const char* f : kIsa)
    if (flags.count(f)) {
      if (!out.empty()) out += ',';
      out += f;
    }
  return out.empty() ? "none" : out;
}

}  // namespace suite
