#include "bench/ulysses/ulysses_config.hpp"

#include "common/harness/errors.hpp"

namespace suite::ulysses {

ring::RingConfig UlyssesConfig::ring_config() const {
  ring::RingConfig r;
  r.c = group_tokens();
  r.n_c = ring_degree();
  r.layout = layout;
  r.variant = ring_variant;
  r.causal = causal;
  r.heads = heads_per_rank();
  r.kv_heads = kv_heads_per_rank();
  r.head_dim = head_dim;
  r.batch = batch;
  r.dtype = dtype;
  r.pass = pass;
  r.grad_dtype = grad_dtype;
  r.docs = docs;
  r.docs_spec = docs_spec;
  r.doc_layout = doc_layout;
  return r;
}

void attach_documents(UlyssesConfig& cfg, const ring::DocSpec& spec, std::uint64_t seed) {
  ring::RingConfig r = cfg.ring_config();
  ring::attach_documents(r, spec, seed);
  cfg.docs = r.docs;
  cfg.docs_spec = r.docs_spec;
  cfg.doc_layout = r.doc_layout;
}

std::string UlyssesConfig::case_name() const {
  std::string n = "u" + std::to_string(u) + "_ncp" + std::to_string(n_c);
  if (ring_degree() > 1) n += "_" + std::string(ring::layout_name(layout));
  if (ring_degree() > 1 && ring_variant != ring::Variant::ring)
    n += "_" + std::string(ring::variant_name(ring_variant));
  n += std::string(causal ? "_causal" : "_full") + "_" + std::string(dtype_name(dtype)) + "_s" +
       std::to_string(s) + "_a" + std::to_string(heads);
  if (kv_heads != heads) n += "_kv" + std::to_string(kv_heads);
  if (replicating()) n += "_rep";
  n += "_d" + std::to_string(head_dim);
  if (batch != 1) n += "_b" + std::to_string(batch);
  if (backward()) n += "_fwd_bwd_g" + std::string(dtype_name(grad_dtype));
  if (docs) n += ring::docs_name_suffix(docs_spec);
  return n;
}

void validate(const UlyssesConfig& cfg) {
  auto fail = [&](const std::string& why) { throw UsageError(cfg.case_name() + ": " + why); };
  if (cfg.u < 1 || cfg.n_c % cfg.u != 0)
    fail("--ulysses-degree " + std::to_string(cfg.u) +
         " must divide the context-parallel group of " + std::to_string(cfg.n_c) + " ranks");
  if (cfg.s < cfg.n_c || cfg.s % cfg.n_c != 0)
    fail("--seq " + std::to_string(cfg.s) + " must be a positive multiple of the " +
         std::to_string(cfg.n_c) + " ranks");
  if (cfg.heads % cfg.u != 0)
    fail("the Ulysses degree " + std::to_string(cfg.u) + " must divide the " +
         std::to_string(cfg.heads) + " query heads (each rank needs whole heads: u <= a)");
  if (cfg.kv_heads < 1 || cfg.heads % cfg.kv_heads != 0)
    fail("--heads must be a multiple of --kv-heads");
  if (cfg.kv_heads >= cfg.u && cfg.kv_heads % cfg.u != 0)
    fail("the Ulysses degree " + std::to_string(cfg.u) + " must divide the " +
         std::to_string(cfg.kv_heads) + " K/V heads");
  if (cfg.kv_heads < cfg.u) {
    if (!cfg.kv_replicate)
      fail("the Ulysses degree " + std::to_string(cfg.u) + " exceeds the " +
           std::to_string(cfg.kv_heads) +
           " K/V heads (the GQA limit N_c <= n_kv); pass --kv-replicate to replicate K/V heads, or "
           "lower the degree and add ring attention across groups");
    if (cfg.u % cfg.kv_heads != 0)
      fail("--kv-replicate needs the Ulysses degree to be a multiple of the K/V heads");
  }
  ring::validate(cfg.ring_config());
}

}  // namespace suite::ulysses
