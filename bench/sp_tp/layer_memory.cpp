#include "bench/sp_tp/layer_memory.hpp"

#include <algorithm>
#include <numeric>

namespace suite::sp_tp {
namespace {

std::int64_t elements(const std::vector<std::int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), std::int64_t{1},
                         [](std::int64_t a, std::int64_t b) { return a * b; });
}

}  // namespace

LayerMemory::Entry& LayerMemory::find(const std::string& name) {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw std::logic_error("layer memory: no buffer '" + name + "'");
  return it->second;
}

void LayerMemory::mark_in_use(Entry& e) {
  if (e.in_use) return;
  e.in_use = true;
  if (!counted(e.role)) return;
  in_use_ += static_cast<std::int64_t>(e.buffer.bytes());
  peak_ = std::max(peak_, in_use_);
}

const Buffer& LayerMemory::acquire(const std::string& name, std::vector<std::int64_t> shape,
                                   std::size_t elem, Role role) {
  const auto bytes = static_cast<std::size_t>(elements(shape)) * elem;
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    Entry e{device_.alloc(bytes), std::move(shape), role, false, entries_.size()};
    it = entries_.emplace(name, std::move(e)).first;
  } else if (it->second.buffer.bytes() != bytes || it->second.role != role) {
    throw std::logic_error("layer memory: '" + name + "' asked for again with another size/role");
  }
  mark_in_use(it->second);
  return it->second.buffer;
}

const Buffer& LayerMemory::reacquire(const std::string& name) {
  Entry& e = find(name);
  mark_in_use(e);
  return e.buffer;
}

void LayerMemory::release(const std::string& name) {
  Entry& e = find(name);
  if (!e.in_use) return;
  e.in_use = false;
  if (counted(e.role)) in_use_ -= static_cast<std::int64_t>(e.buffer.bytes());
  if (poison_ && e.buffer.bytes() > 0) {
    const std::vector<unsigned char> nan(e.buffer.bytes(), 0xff);
    device_.copy_from_host(e.buffer.data(), nan.data(), nan.size());
  }
}

void LayerMemory::release_role(Role role) {
  for (auto& [name, e] : entries_)
    if (e.role == role) release(name);
}

std::int64_t LayerMemory::role_bytes(Role role) const {
  std::int64_t sum = 0;
  for (const auto& [name, e] : entries_)
    if (e.role == role) sum += static_cast<std::int64_t>(e.buffer.bytes());
  return sum;
}

std::vector<LedgerEntry> LayerMemory::ledger_entries() const {
  std::vector<std::pair<std::size_t, LedgerEntry>> saved;
  for (const auto& [name, e] : entries_)
    if (e.role == Role::saved)
      saved.push_back({e.order, {name, e.shape, static_cast<std::int64_t>(e.buffer.bytes())}});
  std::sort(saved.begin(), saved.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<LedgerEntry> out;
  for (auto& s : saved)
    out.push_back(std::move(s.second));
  return out;
}

const Buffer& LayerMemory::buffer(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw std::logic_error("layer memory: no buffer '" + name + "'");
  return it->second.buffer;
}

bool LayerMemory::in_use(const std::string& name) const {
  auto it = entries_.find(name);
  return it != entries_.end() && it->second.in_use;
}

Ledger::Ledger(const LayerMemory& memory, std::vector<LedgerEntry> entries)
    : memory_(&memory), entries_(std::move(entries)) {}

bool Ledger::holds(const std::string& name) const {
  return std::any_of(entries_.begin(), entries_.end(),
                     [&](const LedgerEntry& e) { return e.name == name; });
}

const Buffer& Ledger::get(const std::string& name) const {
  if (!holds(name)) {
    std::string held;
    for (const auto& e : entries_)
      held += (held.empty() ? "" : ", ") + e.name;
    throw LedgerMiss("the backward reached for '" + name +
                     "', which the activation ledger does not hold (it holds: " + held + ")");
  }
  return memory_->buffer(name);
}

Ledger Ledger::without(const std::string& name) const {
  Ledger out = *this;
  out.entries_.erase(std::remove_if(out.entries_.begin(), out.entries_.end(),
                                    [&](const LedgerEntry& e) { return e.name == name; }),
                     out.entries_.end());
  return out;
}

}  // namespace suite::sp_tp
