// Hierarchical dispatch and combine (the scheme of DeepEP's normal kernels; METHODS.md section
// 4.4). The group's ranks form nodes of P consecutive ranks: rank (node m, local index l). Its
// rail is the M ranks of local index l, one per node. A token whose kept copies go to experts
// on node N crosses to N once, as one row to the rail peer there (node N, index l), whatever
// the number of its copies on N; that relay fans the row out, one row per copy, to the experts'
// ranks inside N. The combine runs the route backwards: every expert output goes back to the
// relay that fanned it out, the relay sums the gate-weighted copies of each token it relayed,
// and one partial sum per (token, node) goes home, where a token's partial sums are added. The
// token's own node goes the same way with the token's own rank as relay (no bytes cross).
//
// Every rank receives exactly the rows the flat all-to-all-v gives it, in flat's
// [source rank][local expert] order, so the expert phase is shared with flat; the output and
// the input gradient differ from flat's by the order of their sums only, and the expert and
// gate gradients not at all (the same products). The backward retraces the route: the output
// gradient crosses once per (token, node) and the relay forms each copy's g_c dY_t and
// <dY_t, y_c> (it kept y_c from the combine); the input gradients are summed per token at the
// relay and then at home. Routing metadata crosses once per step: per copy its relay row, its
// destination rank in the node and its gate (three doubles), after a count per rail peer.
#pragma once

#include <cstdint>
#include <vector>

#include "bench/moe/moe_ops.hpp"
#include "common/device/device.hpp"
#include "common/transport/comm.hpp"
#include "kernels/moe/moe_cpu.hpp"

namespace suite::moe {

// Bytes this rank handed to the transport in one exchange, by level (self excluded).
struct LevelBytes {
  std::int64_t inter_sent = 0, inter_recv = 0;  // across nodes (the rail)
  std::int64_t intra_sent = 0, intra_recv = 0;  // inside the node
  std::int64_t sent() const { return inter_sent + intra_sent; }
};

class HierarchicalExchange {
 public:
  // node: the P ranks of this rank's node (in group order); rail: the M ranks of its local index,
  // one per node (in node order). Rows are h elements of type t.
  HierarchicalExchange(Device& device, MoeOps& ops, Comm& node, Comm& rail, DType t,
                       std::int64_t h);

  // The step's routes from the flat plan (send rows in [destination rank][local expert] order,
  // their tokens and every copy's send row), the gates [T k] and the rows this rank receives
  // per [source rank][local expert] (the flat dispatch's counts). Collective over the rail:
  // each relay learns the copies it fans out. Returns the control bytes this rank sent.
  std::int64_t plan(const kernels::moe::DispatchPlan& flat, const std::vector<float>& gates,
                    std::int64_t tokens, int k, int experts_per_rank,
                    const std::vector<std::int64_t>& recv_counts);

  // x [T, h] -> recv: the rows flat's all-to-all-v would deliver, in its layout.
  LevelBytes dispatch(const void* x, void* recv);
  // Expert outputs in that layout -> out [T, h], each token's gate-weighted copies summed.
  LevelBytes combine(const void* back, void* out);
  // dY [T, h] -> grad_recv: each received copy's g_c dY_t, in the received layout; gate_grad
  // [T k] (device) gets <dY_t, y_c> per kept copy, 0 per dropped one.
  LevelBytes combine_backward(const void* dy, void* grad_recv, float* gate_grad);
  // Input gradients in the received layout -> dx [T, h], each token's copies summed.
  LevelBytes dispatch_backward(const void* grad_back, void* dx);

  // Each of the four in two halves around its rail all-to-all-v, which starts without waiting
  // once set_rail_nonblocking(true) (a micro-batch's exchange: the node level, inside the
  // node, stays blocking): start up to and including the rail's start, finish from its wait
  // on; the bytes are added to b. The four above are start then finish.
  void set_rail_nonblocking(bool on) { rail_nonblocking_ = on; }
  void dispatch_start(const void* x, LevelBytes& b);
  void dispatch_finish(void* recv, LevelBytes& b);
  void combine_start(const void* back, LevelBytes& b);
  void combine_finish(void* out, LevelBytes& b);
  void combine_backward_start(const void* dy, LevelBytes& b);
  void combine_backward_finish(void* grad_recv, float* gate_grad, LevelBytes& b);
  void dispatch_backward_start(const void* grad_back, LevelBytes& b);
  void dispatch_backward_finish(void* dx, LevelBytes& b);

  // What the routing implies, in rows of one dispatch, for the check against the transport's
  // counts. From this rank's routing: rows it sends across nodes (its distinct (token, other
  // node) pairs) and copy records it sends across. From the flat counts it received: rows it
  // receives inside its node (its copies relayed by another rank of the node). From the records
  // its rail peers sent: rows it fans out to other ranks of its node, rows (partial sums) it
  // returns across nodes and records it answers across (gate gradients).
  std::int64_t inter_rows_sent() const { return inter_rows_; }
  std::int64_t inter_records_sent() const { return inter_records_; }
  std::int64_t intra_rows_received() const { return intra_rows_; }
  std::int64_t intra_rows_sent() const { return fan_out_rows_; }
  std::int64_t inter_rows_returned() const { return relay_inter_rows_; }
  std::int64_t inter_records_answered() const { return relay_inter_records_; }
  int nodes() const { return M_; }

 private:
  // One all-to-all-v of `elems`-element items of type t, per-peer item counts; adds the bytes
  // the transport counted to b at its level.
  void a2av(Comm& c, const void* send, const std::vector<std::int64_t>& send_n, void* recv,
            const std::vector<std::int64_t>& recv_n, std::int64_t elems, DType t, LevelBytes& b,
            bool inter, bool start_only = false);
  // The same for token rows (h elements of the run's type); start_only: the rail's, started
  // without waiting where set so (finish_rail waits for it).
  void rows_a2av(Comm& c, const void* send, const std::vector<std::int64_t>& send_rows, void* recv,
                 const std::vector<std::int64_t>& recv_rows, LevelBytes& b, bool inter,
                 bool start_only = false);
  void finish_rail();
  void ensure(Buffer& b, std::size_t bytes);
  void upload_index(Buffer& dst, const std::vector<std::int64_t>& v);

  Device& device_;
  MoeOps& ops_;
  Comm& node_;
  Comm& rail_;
  DType t_;
  std::int64_t h_ = 0;
  std::size_t row_bytes_ = 0;
  int P_ = 1, M_ = 1;
  std::int64_t T_ = 0;
  int k_ = 1;
  bool rail_nonblocking_ = false;
  int rail_ticket_ = -1;  // the rail exchange started and not yet finished

  // Home side: rows to each rail peer (its distinct tokens with a copy on that node), their
  // tokens; each copy record's copy index (t k + slot) per peer, in record order; per (token,
  // node) the row of its partial sum (-1: no copy there).
  std::vector<std::int64_t> home_rows_, home_src_, home_records_, home_record_copy_, home_slot_;
  std::int64_t home_total_ = 0;  // rows sent over the rail in all (self included)
  // Relay side: rows and records from each rail peer; fan-out rows to each node peer and the
  // relay row each takes; per relay row its copies' fan-out rows and gates (kmax per row).
  std::vector<std::int64_t> relay_rows_, relay_records_, fan_rows_, fan_src_, relay_slot_;
  std::vector<float> relay_gates_;
  std::vector<std::int64_t> relay_slot_record_;  // per (relay row, slot): record index, -1 none
  std::int64_t relay_total_ = 0, fan_total_ = 0;
  int kmax_ = 1;
  // Receiving side: rows from each node peer; received layout row <- fan-in row, and back.
  std::vector<std::int64_t> fanin_rows_, to_flat_, from_flat_;
  std::int64_t recv_total_ = 0;
  std::int64_t inter_rows_ = 0, inter_records_ = 0, intra_rows_ = 0, fan_out_rows_ = 0,
               relay_inter_rows_ = 0, relay_inter_records_ = 0;

  Buffer home_src_dev_, home_slot_dev_, fan_src_dev_, relay_slot_dev_, relay_gates_dev_,
      to_flat_dev_, from_flat_dev_;
  Buffer home_send_, relay_recv_, fan_send_, fan_recv_, relay_y_, partial_, home_back_,
      relay_gate_grad_, record_grad_send_, record_grad_recv_;
};

}  // namespace suite::moe
