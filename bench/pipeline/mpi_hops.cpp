// The hops as nonblocking MPI messages on host rows in fp64, through the PP group's Comm (host
// buffers whatever the backend): each tagged by its sending stage, micro-batch and direction, so
// receives may be posted in any order. Under modeled compute the rows are placeholders
// (hop_buffer.hpp).
#include <map>
#include <utility>
#include <vector>

#include "bench/pipeline/hop_buffer.hpp"
#include "bench/pipeline/hop_transport.hpp"
#include "common/sim/sim.hpp"

namespace suite::pipeline {

namespace {

class MpiHops final : public HopTransport {
 public:
  MpiHops(const Schedule& schedule, Comm& pp)
      : comm_(pp), microbatches_(schedule.spec.microbatches) {}

  void post_receive(const HopChannel& c, int mb, std::size_t values, int from) override {
    Message& m = posted_[{c.index(), mb}];
    m.data = HopBuffer::receiving(values);
    m.request = comm_.post_receive(m.data.data(), values, DType::fp64, from, tag(c, mb));
  }

  Rows wait_receive(const HopChannel& c, int mb, int from) override {
    const auto it = posted_.find({c.index(), mb});
    std::vector<MPI_Request> wait{it->second.request};
    comm_.wait_messages(wait, from);
    Rows rows = it->second.data.take();
    posted_.erase(it);
    return rows;
  }

  void post_send(const HopChannel& c, int mb, Rows rows, std::size_t values, int to) override {
    auto m = std::make_unique<Message>();
    m->data = HopBuffer::holding(std::move(rows), values);
    m->request = comm_.post_send(m->data.data(), m->data.values(), DType::fp64, to, tag(c, mb));
    outbox_.push_back(std::move(m));
  }

  // Frees the buffers of the sends that have completed, so a rank holds only those in flight
  // (a step of m micro-batches would otherwise keep 2 m v hops until its end).
  void test_sends() override {
    // Under modeled compute the large hops are placeholders and the sends complete in simulated
    // time untested; testing them would slow the simulator (Comm's progress() says why).
    if (sim::modeled()) return;
    std::vector<MPI_Request> requests;  // testing them lets the sends in flight move
    for (auto& m : outbox_)
      requests.push_back(m->request);
    if (requests.empty()) return;
    comm_.test_messages(requests);
    std::vector<std::unique_ptr<Message>> pending;
    for (std::size_t k = 0; k < requests.size(); ++k)
      if (requests[k] != MPI_REQUEST_NULL) {
        outbox_[k]->request = requests[k];
        pending.push_back(std::move(outbox_[k]));
      }
    outbox_ = std::move(pending);
  }

  void wait_sends() override {
    std::vector<MPI_Request> sends;
    for (auto& m : outbox_)
      sends.push_back(m->request);
    comm_.wait_messages(sends, -1);
    outbox_.clear();
  }

  std::int64_t bytes_sent() const override { return comm_.bytes().sent; }
  void reset_bytes() override { comm_.reset_bytes(); }

 private:
  struct Message {
    HopBuffer data;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  Comm& comm_;
  int microbatches_;
  std::map<std::pair<int, int>, Message> posted_;  // (channel, micro-batch) -> its receive
  std::vector<std::unique_ptr<Message>> outbox_;   // the sends in flight

  int tag(const HopChannel& c, int mb) const {
    return Comm::kPeerTagBase + 2 * (c.from_stage() * microbatches_ + mb) + (c.backward ? 1 : 0);
  }
};

}  // namespace

std::unique_ptr<HopTransport> make_mpi_hops(const Schedule& schedule, Comm& pp) {
  return std::make_unique<MpiHops>(schedule, pp);
}

}  // namespace suite::pipeline
