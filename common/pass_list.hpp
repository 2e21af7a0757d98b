// --pass: which passes of a training step a method's cases run. Every case of a sweep runs
// once per pass named: `fwd` (the forward alone) and `fwd_bwd` (forward then backward on the
// same inputs and buffers, each pass timed, counted and predicted, and their sum).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace suite {

enum class Pass { fwd, fwd_bwd };

std::string_view pass_name(Pass p);

// "fwd,fwd_bwd" -> {fwd, fwd_bwd}, in order, duplicates dropped. Throws UsageError naming
// `flag` and the accepted values for anything else (or an empty list).
std::vector<Pass> parse_pass_list(const std::string& flag, const std::string& text);

// What --help says about the flag, the same in every benchmark.
constexpr const char* kPassHelp =
    "passes of a training step, comma-separated: fwd (forward only) and/or fwd_bwd (forward "
    "then backward on the same inputs, each pass timed and predicted, and their sum); each "
    "case runs once per pass";

}  // namespace suite
