#include "bench/sp_tp/layer_microbatches.hpp"

#include <string>

#include "common/device/typed_host.hpp"
#include "common/harness/errors.hpp"
#include "common/sim/sim.hpp"

namespace suite::sp_tp {
namespace {

std::string slot_name(int slot, const std::string& name) {
  return "microbatch" + std::to_string(slot) + "." + name;
}

std::int64_t elements(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape)
    n *= d;
  return n;
}

}  // namespace

LayerMicrobatches::LayerMicrobatches(TransformerLayer& layer, LayerOps& ops)
    : layer_(layer), ops_(ops), e_(dtype_size(layer.config().dtype)) {
  layer_.allocate_gradients();
}

void LayerMicrobatches::upload(const Buffer& dst, const std::vector<double>& rows) {
  // A placeholder keeps no values (modeled compute): its rows may come empty, as they left the
  // layer before (BlockStage).
  const bool placeholder = sim::is_placeholder(dst.data());
  SUITE_CHECK(rows.size() * e_ == dst.bytes() || (placeholder && rows.empty()),
              "a micro-batch's rows fill the layer's buffer");
  if (placeholder) return;
  const auto bytes = encode(rows, layer_.config().dtype);
  layer_.device().copy_from_host(dst.data(), bytes.data(), bytes.size());
}

void LayerMicrobatches::set_input(const std::vector<double>& rows) {
  upload(layer_.memory().buffer("ln1_input"), rows);
}

void LayerMicrobatches::set_output_grad(const std::vector<double>& rows) {
  upload(layer_.memory().buffer("bwd.grad_output"), rows);
}

void LayerMicrobatches::stash(int slot) {
  ++held_;
  // Modeled compute reads no value back, so a slot copies nothing: its buffers under 1 MiB, not
  // placeholders, would cost every simulated rank real memory for each micro-batch in flight.
  if (sim::modeled()) return;
  LayerMemory& memory = layer_.memory();
  for (const LedgerEntry& l : layer_.ledger_entries()) {
    const Buffer& copy =
        memory.acquire(slot_name(slot, l.name), l.shape,
                       static_cast<std::size_t>(l.bytes / elements(l.shape)), Role::stashed);
    layer_.device().copy_on_device(copy.data(), memory.buffer(l.name).data(),
                                   static_cast<std::size_t>(l.bytes));
  }
}

void LayerMicrobatches::restore(int slot) {
  --held_;
  if (sim::modeled()) return;  // nothing was copied (stash)
  LayerMemory& memory = layer_.memory();
  for (const LedgerEntry& l : layer_.ledger_entries()) {
    const std::string name = slot_name(slot, l.name);
    SUITE_CHECK(memory.in_use(name), "a micro-batch's backward follows its forward");
    layer_.device().copy_on_device(memory.buffer(l.name).data(), memory.buffer(name).data(),
                                   static_cast<std::size_t>(l.bytes));
    memory.release(name);
  }
}

std::int64_t LayerMicrobatches::slot_bytes() const {
  std::int64_t sum = 0;
  for (const LedgerEntry& l : layer_.ledger_entries())
    sum += l.bytes;
  return sum;
}

const Buffer& LayerMicrobatches::sum_buffer(const TransformerLayer::GradBuffer& g) {
  return layer_.memory().acquire("step_sum." + g.name, {g.elems}, e_, Role::backward);
}

void LayerMicrobatches::accumulate() {
  for (const auto& g : layer_.grad_buffers()) {
    const Buffer& sum = sum_buffer(g);
    if (summed_ == 0)
      layer_.device().copy_on_device(sum.data(), g.data, static_cast<std::size_t>(g.elems) * e_);
    else
      ops_.residual_add(g.elems, sum.data(), g.data, sum.data());
  }
  ++summed_;
}

void LayerMicrobatches::finish_step(Comm* replicas) {
  for (const auto& g : layer_.grad_buffers()) {
    const std::size_t bytes = static_cast<std::size_t>(g.elems) * e_;
    const Buffer& sum = sum_buffer(g);
    if (summed_ == 0) layer_.device().fill_zero(sum.data(), bytes);
    if (replicas)
      replicas->all_reduce(sum.data(), g.data, static_cast<std::size_t>(g.elems),
                           layer_.config().dtype);
    else
      layer_.device().copy_on_device(g.data, sum.data(), bytes);
  }
}

}  // namespace suite::sp_tp
