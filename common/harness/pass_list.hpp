// --pass: which passes of a training step a method's cases run. Every case of a sweep runs
// once per pass named: `fwd` (the forward alone) and `fwd_bwd` (forward then backward on the
// same inputs and buffers, each pass timed, counted and predicted, and their sum).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kernels/core/dtype.hpp"

namespace CLI {
class App;
}

namespace suite {

enum class Pass { fwd, fwd_bwd };

std::string_view pass_name(Pass p);

// One --pass item: "fwd" or "fwd_bwd"; UsageError naming the flag and the accepted values
// otherwise (the list: parse_list("--pass", text, parse_pass)).
Pass parse_pass(const std::string& item);

// What --help says about the flag, the same in every benchmark.
constexpr const char* kPassHelp =
    "passes of a training step, comma-separated: fwd (forward only) and/or fwd_bwd (forward "
    "then backward on the same inputs, each pass timed and predicted, and their sum); each "
    "case runs once per pass, a fwd_bwd case named as its forward case with _fwd_bwd at the end";

// --pass, declared once for every benchmark (kPassHelp); what the backward covers is in each
// benchmark's description.
void add_pass_flag(CLI::App& app, std::string& passes);

// --grad-dtype: the element type of gradient partial sums a method sends (the ring's dK/dV).
// "auto": fp64 for fp64 runs, else fp32 (as ring-flash-attention sends them). Throws
// UsageError for anything but auto, fp32, fp64, bf16.
DType parse_grad_dtype_flag(const std::string& text, DType storage);

constexpr const char* kGradDtypeHelp =
    "element type of the gradient partial sums that travel in the backward (the ring's dK/dV): "
    "auto (fp32; fp64 with --dtype fp64), fp32, bf16, fp64 (cpu only)";

}  // namespace suite
