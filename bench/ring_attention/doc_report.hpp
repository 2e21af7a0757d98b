// What a case over packed documents records beside its timings (ring_attention, and ulysses'
// ring part): the pack (cu_seqlens, padding), each rank's skipped and masked block pairs per
// round, and the balance the schedule's exact work predicts: max / mean of the ranks' work and
// the efficiencies mean / max and mean / lockstep (the ring waits for each round's busiest
// rank). Collective: every rank of the job calls it.
#pragma once

#include <cstdint>
#include <vector>

#include "bench/ring_attention/ring_attention.hpp"
#include "bench/ring_attention/ring_pass_report.hpp"
#include "common/results/results.hpp"

namespace suite::ring {

// `rows`: the global positions of this rank's rows (saved as row_positions when small).
// Returns the totals of the ranks' visible pairs it counted (empty without documents).
WorkTotals report_documents(const RingConfig& cfg, const RingAttention& ring,
                            const std::vector<std::int64_t>& rows, CaseRecord& rec);

// The table both benchmarks print for their cases over packed documents (those report_documents
// wrote): the counted balance, padding and block pairs beside the measured efficiency.
void print_documents_table(const std::vector<CaseRecord>& records);

}  // namespace suite::ring
