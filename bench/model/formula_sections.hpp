// model's formula sections (sp, ring, ulysses, moe, tp_overlap): METHODS.md's figures for the
// parameters; e and e_grad are the bytes per element of --dtype and --grad-dtype.
#pragma once

#include "bench/model/params.hpp"
#include "bench/model/planning.hpp"

namespace suite::model_cli {

void print_tp_overlap(const Params& p, double e);
void print_sp(const Params& p, double e);
void print_ring(const Params& p, double e, double e_grad, double flops_bwd);
void print_ulysses(const Params& p, double e, double e_grad);
void print_moe(const Params& p, double e);
// The planning tool's inputs (planning.hpp) for the same parameters.
plan::Inputs plan_inputs(const Params& p, double e, double e_grad);

}  // namespace suite::model_cli
