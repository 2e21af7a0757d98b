// The planner tests' smallest block, small enough to count by hand.
#pragma once

#include "common/formulas/model.hpp"

// s 8, h 4, a 2 (d 2), n_kv 2, d_ff 16, bf16, one rank.
inline suite::model::MeshBlock tiny_block() {
  suite::model::MeshBlock m;
  m.s = 8, m.h = 4, m.a = 2, m.n_kv = 2, m.d_ff = 16, m.e = 2, m.lse_e = 4;
  return m;
}
