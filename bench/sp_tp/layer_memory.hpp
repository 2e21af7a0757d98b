// The layer's own allocator: every buffer the layer (forward and backward) works on, by name,
// with what it is for, whether it is in use, and the high-water mark of the bytes in use. A
// buffer is allocated on its first acquire and kept (cached, as a framework's caching allocator
// keeps blocks) for the next step; "in use" is what a step holds, so peak() is the measured
// peak of the buffers a pass needs at once, not of what has ever been allocated.
//
// Released buffers can be poisoned (every byte 0xff: NaN in fp64, fp32 and bf16), so a pass
// that still read one would produce NaN instead of a plausible number.
//
// Ledger: the view of the saved activations the backward receives, by name only; asking it for
// any other name throws, naming what it holds.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/device/device.hpp"

namespace suite::sp_tp {

enum class Role {
  parameter,  // weights (not counted in the activation figures)
  saved,      // kept by the forward for the backward: the activation ledger
  temporary,  // forward working buffers, released when the forward ends
  output,     // the layer output (the next layer's input)
  backward,   // everything the backward allocates: activation and weight gradients, scratch
  stashed,    // a pipeline stage's copies of the ledger for micro-batches still in flight
};

struct LedgerEntry {
  std::string name;
  std::vector<std::int64_t> shape;
  std::int64_t bytes;
};

class LayerMemory {
 public:
  explicit LayerMemory(Device& device) : device_(device) {}

  // The buffer `name` of shape x elem bytes, marked in use. Allocated on the first call; a
  // later call must ask for the same size and role (std::logic_error otherwise).
  const Buffer& acquire(const std::string& name, std::vector<std::int64_t> shape, std::size_t elem,
                        Role role);
  // Marks `name` in use again (a later step of the same pass).
  const Buffer& reacquire(const std::string& name);
  // No longer in use; poisoned when set_poison(true).
  void release(const std::string& name);
  void release_role(Role role);

  void set_poison(bool on) { poison_ = on; }
  bool poison() const { return poison_; }

  // Bytes in use now in buffers of every role but `parameter` and `output`, and their highest
  // value since reset_peak().
  std::int64_t in_use_bytes() const { return in_use_; }
  void reset_peak() { peak_ = in_use_; }
  std::int64_t peak_bytes() const { return peak_; }
  // Bytes of the buffers of `role` (in use or not).
  std::int64_t role_bytes(Role role) const;

  // The saved buffers in the order they were first acquired (METHODS.md's accounting).
  std::vector<LedgerEntry> ledger_entries() const;
  const Buffer& buffer(const std::string& name) const;
  bool in_use(const std::string& name) const;

 private:
  struct Entry {
    Buffer buffer;
    std::vector<std::int64_t> shape;
    Role role;
    bool in_use = false;
    std::size_t order = 0;
  };
  Entry& find(const std::string& name);
  void mark_in_use(Entry& e);
  static bool counted(Role r) { return r != Role::parameter && r != Role::output; }

  Device& device_;
  std::map<std::string, Entry> entries_;
  std::int64_t in_use_ = 0, peak_ = 0;
  bool poison_ = false;
};

// Thrown when the backward asks the ledger for a tensor it does not hold.
struct LedgerMiss : std::logic_error {
  using std::logic_error::logic_error;
};

class Ledger {
 public:
  Ledger(const LayerMemory& memory, std::vector<LedgerEntry> entries);
  // The saved buffer `name`; LedgerMiss for any name the ledger does not hold.
  const Buffer& get(const std::string& name) const;
  bool holds(const std::string& name) const;
  const std::vector<LedgerEntry>& entries() const { return entries_; }
  // The same ledger less one entry (the test that the backward needs every entry it holds).
  Ledger without(const std::string& name) const;

 private:
  const LayerMemory* memory_;
  std::vector<LedgerEntry> entries_;
};

// What the backward may allocate: buffers of role `backward`, under names of their own (a
// prefix keeps them apart from the forward's, so the backward cannot reach a forward buffer).
class Scratch {
 public:
  explicit Scratch(LayerMemory& memory) : memory_(memory) {}
  void* acquire(const std::string& name, std::vector<std::int64_t> shape, std::size_t elem) {
    return memory_.acquire("bwd." + name, std::move(shape), elem, Role::backward).data();
  }
  void release(const std::string& name) { memory_.release("bwd." + name); }

 private:
  LayerMemory& memory_;
};

}  // namespace suite::sp_tp
