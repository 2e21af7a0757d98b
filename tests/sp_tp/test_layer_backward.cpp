// The TP / TP+SP layer's backward under mpirun (CPU backend, MPI transport, fp64): the gradient
// of the whole layer against a finite-difference directional derivative, TP+SP's gradients
// against TP's (bit for bit with one or two ranks), the overlapped all-gather changing no
// number, the collectives of each pass counted exactly, and the ledger-only backward: it fails,
// naming the tensor, when any ledger entry is withheld, and succeeds with every other forward
// buffer poisoned.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <memory>

#include "bench/sp_tp/layer_check.hpp"
#include "bench/sp_tp/transformer_layer.hpp"
#include "common/formulas/model.hpp"
#include "common/transport/comm.hpp"

namespace suite::sp_tp {
namespace {

struct Path {
  bool fused;
  Variant variant;
};

std::string path_name(const ::testing::TestParamInfo<Path>& info) {
  return std::string(info.param.fused ? "fused_" : "unfused_") + variant_name(info.param.variant);
}

class LayerFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    device_ = make_cpu_device();
    comm_ = make_mpi_comm(*device_, MPI_COMM_WORLD);
    ops_ = make_cpu_layer_ops(DType::fp64);
  }
  LayerConfig config(bool fused) const {
    LayerConfig c;
    c.s = 16;
    c.b = 2;
    c.h = 256;
    c.heads = 4;
    c.d_ff = 256;
    c.dropout = 0.1f;
    c.causal = true;
    c.fused_attention = fused;
    c.dtype = DType::fp64;
    c.t = comm_->size();
    c.pass = Pass::fwd_bwd;
    return c;
  }
  std::unique_ptr<TransformerLayer> layer(Variant v, bool fused) {
    return std::make_unique<TransformerLayer>(config(fused), v, *device_, *comm_, *ops_);
  }
  static void step(TransformerLayer& l, bool overlap = true, bool poison = true) {
    PhaseTimer ph(l.device());
    ph.begin_step();
    l.memory().set_poison(poison);
    l.forward(ph, "fwd_");
    l.backward(ph, overlap);
    l.memory().set_poison(false);
    ph.end_step(false);
  }
  std::unique_ptr<Device> device_;
  std::unique_ptr<Comm> comm_;
  std::unique_ptr<LayerOps> ops_;
};

class LayerBackward : public LayerFixture, public ::testing::WithParamInterface<Path> {};

TEST_P(LayerBackward, GradientIsTheFiniteDifferenceDirectionalDerivative) {
  auto l = layer(GetParam().variant, GetParam().fused);
  const FdResult fd = finite_difference_check(*l, true);
  EXPECT_LT(fd.rel_err, kFdTolerance)
      << "finite difference " << fd.derivative << " vs analytic " << fd.analytic;
  EXPECT_GT(std::fabs(fd.analytic), 1e-3);  // a direction that moves the loss at all
}

TEST_F(LayerFixture, TpSpGradientsEqualTps) {
  for (bool fused : {true, false}) {
    SCOPED_TRACE(fused ? "fused attention" : "unfused attention");
    auto sp = layer(Variant::tp_sp, fused), tp = layer(Variant::tp, fused);
    step(*sp);
    step(*tp);
    // One or two ranks sum in one order whatever the algorithm: equal to the bit.
    const bool exact = comm_->size() <= 2;
    auto expect_same = [&](const std::vector<double>& a, const std::vector<double>& b,
                           const std::string& what) {
      ASSERT_EQ(a.size(), b.size()) << what;
      double scale = 1;
      for (double v : b)
        scale = std::max(scale, std::fabs(v));
      for (std::size_t i = 0; i < a.size(); ++i) {
        if (exact)
          ASSERT_EQ(a[i], b[i]) << what << " at " << i;
        else
          ASSERT_NEAR(a[i], b[i], 1e-10 * scale) << what << " at " << i;
      }
    };
    expect_same(sp->gathered_output(), tp->gathered_output(), "output");
    expect_same(sp->gathered_grad_input(), tp->gathered_grad_input(), "input gradient");
    for (std::size_t i = 0; i < sp->slices().size(); ++i)
      expect_same(sp->param_grad(i), tp->param_grad(i), sp->slices()[i].name + " gradient");
  }
}

TEST_P(LayerBackward, OverlapChangesNoNumber) {
  auto a = layer(GetParam().variant, GetParam().fused),
       b = layer(GetParam().variant, GetParam().fused);
  step(*a, true);
  step(*b, false);
  EXPECT_EQ(a->local_grad_input(), b->local_grad_input());
  for (std::size_t i = 0; i < a->slices().size(); ++i)
    EXPECT_EQ(a->param_grad(i), b->param_grad(i)) << a->slices()[i].name;
}

TEST_P(LayerBackward, CollectivesOfEachPassAreTheFormulas) {
  const Variant v = GetParam().variant;
  auto l = layer(v, GetParam().fused);
  step(*l);
  const LayerConfig c = config(GetParam().fused);
  const std::int64_t t = comm_->size(), n = c.rows() * c.h * 8;  // fp64
  // Written out here, independently of common/model: per RS or AG (t-1)/t n, per AR twice that.
  const std::int64_t rs_ag = (t - 1) * n / t, ar = 2 * rs_ag, ln = 2 * (t - 1) * 4 * c.h * 8 / t;
  const PassComm &f = l->pass_comm(kFwd), &b = l->pass_comm(kBwd);
  if (v == Variant::tp) {
    EXPECT_EQ(f.calls, (std::array<int, 4>{2, 0, 0, 0}));
    EXPECT_EQ(b.calls, (std::array<int, 4>{2, 0, 0, 0}));
    EXPECT_EQ(f.activation_bytes(), 2 * ar);
    EXPECT_EQ(b.activation_bytes(), 2 * ar);  // 4 all-reduces per layer: 8 (t-1)/t n
    EXPECT_EQ(b.sent(Coll::ln_grad_all_reduce), 0);
  } else {
    EXPECT_EQ(f.calls, (std::array<int, 4>{0, 2, 2, 0}));
    EXPECT_EQ(b.calls, (std::array<int, 4>{0, 2, 4, 1}));
    EXPECT_EQ(f.activation_bytes(), 4 * rs_ag);
    EXPECT_EQ(b.activation_bytes(), 6 * rs_ag);  // 4 RS + 6 AG per layer: 10 (t-1)/t n
    EXPECT_EQ(b.sent(Coll::ln_grad_all_reduce), ln);
  }
  const double e = 8;
  const auto model_both = v == Variant::tp
                              ? model::tp_layer_comm_bytes_fwd_bwd(c.s, c.b, c.h, c.t, e)
                              : model::sp_layer_comm_bytes_fwd_bwd(c.s, c.b, c.h, c.t, e);
  EXPECT_EQ(static_cast<double>(f.activation_bytes() + b.activation_bytes()), model_both);
}

TEST_P(LayerBackward, BackwardNeedsEveryLedgerEntryAndFailsWithoutIt) {
  auto l = layer(GetParam().variant, GetParam().fused);
  PhaseTimer ph(l->device());
  ph.begin_step();
  l->forward(ph, "fwd_");
  const Ledger full = l->ledger();
  ASSERT_FALSE(full.entries().empty());
  for (const auto& entry : full.entries()) {
    try {
      l->backward(ph, true, full.without(entry.name));
      ADD_FAILURE() << "the backward ran without '" << entry.name << "'";
    } catch (const LedgerMiss& e) {
      EXPECT_NE(std::string(e.what()).find("'" + entry.name + "'"), std::string::npos) << e.what();
    }
    // It failed before any collective: nothing was sent.
    EXPECT_EQ(l->pass_comm(kBwd).calls, (std::array<int, 4>{}));
  }
  // A forward temporary is not in the ledger: asking for it fails.
  EXPECT_THROW(full.get("row_parallel_partial"), LedgerMiss);
  EXPECT_THROW(full.get("fc2_partial"), LedgerMiss);
  ph.end_step(false);
}

TEST_P(LayerBackward, LedgerAloneSufficesWithEverythingElsePoisoned) {
  auto l = layer(GetParam().variant, GetParam().fused);
  PhaseTimer ph(l->device());
  ph.begin_step();
  l->memory().set_poison(true);
  l->forward(ph, "fwd_");
  // Every forward buffer outside the ledger (and the output) is NaN now.
  const std::vector<std::string> temporaries = {"row_parallel_partial", "row_parallel_reduced",
                                                "dropout_output", "fc2_partial"};
  for (const auto& name : temporaries) {
    EXPECT_FALSE(l->memory().in_use(name)) << name;
    EXPECT_TRUE(std::isnan(l->memory().buffer(name).as<double>()[0])) << name;
  }
  l->backward(ph, true);
  ph.end_step(false);
  for (double g : l->local_grad_input())
    ASSERT_TRUE(std::isfinite(g));
  for (std::size_t i = 0; i < l->slices().size(); ++i)
    for (double g : l->param_grad(i))
      ASSERT_TRUE(std::isfinite(g)) << l->slices()[i].name;
  // The peak of the backward holds the ledger and the gradients at least.
  std::int64_t weights = 0;
  for (const auto& s : l->slices())
    weights += s.elems() * 8;
  EXPECT_GE(l->memory().peak_bytes(), l->ledger_bytes() + weights);
}

INSTANTIATE_TEST_SUITE_P(Paths, LayerBackward,
                         ::testing::Values(Path{true, Variant::tp}, Path{true, Variant::tp_sp},
                                           Path{false, Variant::tp}, Path{false, Variant::tp_sp}),
                         path_name);

}  // namespace
}  // namespace suite::sp_tp
