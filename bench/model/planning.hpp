// The model as a planning tool: times at the given F (FLOP/s) and W (bytes/s) for every
// section, whole-model totals over --layers L, and one machine-readable `prediction:` line per
// section (scripts/envs/sweep.py reads it in its dry-run; it stays the forward pass). Forward pass
// unless said otherwise; sp, ring and ulysses also print the backward and fwd+bwd figures.
#pragma once

namespace suite::plan {

struct Inputs {
  double s, b, h, a, kv, d_ff;  // d_ff > 0
  int t, n_c, n_e, experts;
  double k, tokens;
  double flops, bw, e;
  bool causal, swiglu;
  int layers;
  int u;  // Ulysses degree (u = n_c: plain Ulysses; below: a hybrid with a ring across groups)
  double flops_bwd;  // F_b: attention backward FLOP/s
  double e_grad;     // bytes per element of the ring's travelling dK/dV partial sums
};

void print_sp_plan(const Inputs& in);
void print_ring_plan(const Inputs& in);
void print_ulysses_plan(const Inputs& in);
void print_moe_plan(const Inputs& in);

}  // namespace suite::plan
