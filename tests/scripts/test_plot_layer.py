"""plot.py on sp_tp layer cases (`mode="layer"`), alone and beside collectives cases, forward
cases and training steps (`pass="fwd_bwd"`)."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.patches import Rectangle

from synthetic_results import layer_cases, layer_step_cases, run_script, sp_tp_cases
from test_plot import _written

LAYER_PNGS = {"sp_tp_layer_time.png", "sp_tp_layer_memory.png", "sp_tp_layer_ledger.png"}
COLLECTIVES_PNGS = {"sp_tp_time.png", "sp_tp_busbw.png", "sp_tp_bytes.png"}


def _figures(names: set[str]) -> set[str]:
    return {n for n in names if not n.startswith("per_rank_")}


def test_layer_only_file(results_writer, tmp_path):
    path = results_writer("layer.h5", "sp_tp", layer_cases())
    proc = run_script("plot.py", path, "--out", tmp_path / "o")
    names = _written(proc)
    assert _figures(names) == LAYER_PNGS  # no generic sp_tp_time_median.png, no collectives
    assert sum(n.startswith("per_rank_sp_tp_layer_") for n in names) == 1
    assert proc.stderr == ""  # no "lacks op/n_bytes", no "falling back"


@pytest.mark.parametrize("mode", ["collectives", None])
def test_mixed_file_gets_both_sets(results_writer, tmp_path, mode):
    cases = sp_tp_cases(mode=mode) + layer_cases()
    path = results_writer("mixed.h5", "sp_tp", cases)
    proc = run_script("plot.py", path, "--out", tmp_path / "o",
                      "--rank-case", "allreduce_fp32_n1024")
    names = _written(proc)
    assert _figures(names) == COLLECTIVES_PNGS | LAYER_PNGS
    assert "per_rank_sp_tp_allreduce_fp32_n1024.png" in names
    assert proc.stderr == ""


def test_layer_without_ledger_datasets(results_writer, tmp_path):
    path = results_writer("noledger.h5", "sp_tp", layer_cases(ledger=False))
    proc = run_script("plot.py", path, "--out", tmp_path / "o")
    names = _written(proc)
    assert _figures(names) == {"sp_tp_layer_time.png", "sp_tp_layer_memory.png"}
    assert "ledger" in proc.stderr and "falling back" not in proc.stderr


def test_layer_without_phases_still_plots_time(results_writer, tmp_path):
    path = results_writer("nophase.h5", "sp_tp", layer_cases(phases=False))
    proc = run_script("plot.py", path, "--out", tmp_path / "o")
    assert _figures(_written(proc)) == LAYER_PNGS
    assert proc.stderr == ""


def test_fallback_stays_within_its_mode(results_writer, tmp_path):
    """Collectives cases without op fall back alone; the layer cases keep their figures."""
    broken = sp_tp_cases(mode="collectives")[:2]
    for spec in broken:
        del spec["params"]["op"]
    path = results_writer("mixed.h5", "sp_tp", broken + layer_cases())
    proc = run_script("plot.py", path, "--out", tmp_path / "o")
    names = _written(proc)
    assert LAYER_PNGS <= names and "sp_tp_time_median.png" in names
    assert "mode 'collectives'" in proc.stderr and "falling back" in proc.stderr
    assert "layer_tp" not in proc.stderr  # no layer case is blamed


@pytest.fixture
def layer_figs(sp_tp_figures):
    """(results, {file name: figure}) for the layer-only synthetic file, nothing saved."""
    res, captured = sp_tp_figures("layer.h5", layer_cases())
    assert set(captured) == LAYER_PNGS
    return res, captured


def _bars(ax) -> list[Rectangle]:
    return [p for p in ax.patches if isinstance(p, Rectangle) and p.get_width() > 0]


def test_layer_time_content(layer_figs):
    res, figs = layer_figs
    ax = figs["sp_tp_layer_time.png"].axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["tp", "tp_sp", "tp", "tp_sp"]
    assert {t.get_text() for t in ax.texts} == {"fused attention", "unfused attention"}
    order = ["fused", "unfused"]
    cases = sorted(res.cases_of("sp_tp"),
                   key=lambda c: (order.index(c.attrs["attention"]), c.attrs["variant"]))
    bars = sorted(_bars(ax), key=lambda p: (round(p.get_x(), 6), p.get_y()))
    assert len(bars) == 2 * len(cases)  # compute + comm per case
    for case, (compute, comm) in zip(cases, zip(bars[::2], bars[1::2])):
        assert compute.get_y() == 0
        assert compute.get_height() == pytest.approx(case.attrs["phase_compute_median_s"])
        assert comm.get_y() == pytest.approx(compute.get_height())
        assert comm.get_height() == pytest.approx(case.attrs["phase_comm_median_s"])
    markers = [line for line in ax.get_lines() if line.get_marker() == "D"]
    medians = sorted(float(m.get_ydata()[0]) for m in markers)
    assert medians == pytest.approx(sorted(c.attrs["time_median_s"] for c in cases))
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["tp", "tp_sp", "compute (median)", "comm (median)",
                      "step median (p10-p90)"]


def test_layer_memory_content(layer_figs):
    res, figs = layer_figs
    ax = figs["sp_tp_layer_memory.png"].axes[0]
    heights = sorted(p.get_height() * 2**20 for p in _bars(ax))
    expected = sorted([c.attrs["activation_bytes"] for c in res.cases_of("sp_tp")]
                      + [c.attrs["pred_activation_bytes"] for c in res.cases_of("sp_tp")])
    assert heights == pytest.approx(expected)
    err = 100 * res.cases_of("sp_tp")[0].attrs["activation_rel_err"]
    assert [t.get_text() for t in ax.texts] == [f"err {err:.2f}%"] * 4
    assert [t.get_text() for t in ax.get_xticklabels()] == [
        "tp\nfused", "tp_sp\nfused", "tp\nunfused", "tp_sp\nunfused"]


def test_layer_ledger_content(layer_figs):
    res, figs = layer_figs
    ax = figs["sp_tp_layer_ledger.png"].axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["tp fused", "tp_sp fused", "tp unfused", "tp_sp unfused"]
    by_label = {f"{c.attrs['variant']} {c.attrs['attention']}": c for c in res.cases_of("sp_tp")}
    for y, label in enumerate(labels):
        case = by_label[label]
        assert case.datasets["ledger_name"][0] == "ln1_input"  # vlen strings read as str
        segments = sorted((p for p in _bars(ax) if abs(p.get_y() + p.get_height() / 2 - y) < 1e-9),
                          key=lambda p: p.get_x())
        widths = np.array([p.get_width() for p in segments]) * 2**20
        assert widths == pytest.approx(np.asarray(case.datasets["ledger_bytes"], dtype=float))
        assert widths.sum() == pytest.approx(case.attrs["activation_bytes"])
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    names = {n for c in res.cases_of("sp_tp") for n in c.datasets["ledger_name"]}
    assert set(legend) == names and len(legend) == len(names)
    assert legend.index("attn_softmax") < legend.index("fc1_output")  # layer order


STEP_PNG = "sp_tp_layer_step.png"


def test_forward_and_step_cases_get_the_step_figure(results_writer, tmp_path):
    path = results_writer("steps.h5", "sp_tp", layer_cases() + layer_step_cases())
    proc = run_script("plot.py", path, "--out", tmp_path / "o")
    assert _figures(_written(proc)) == LAYER_PNGS | {STEP_PNG}
    assert proc.stderr == ""


def test_steps_alone_have_no_forward_time_figure(results_writer, tmp_path):
    path = results_writer("steps.h5", "sp_tp", layer_step_cases())
    proc = run_script("plot.py", path, "--out", tmp_path / "o")
    assert _figures(_written(proc)) == {STEP_PNG, "sp_tp_layer_memory.png",
                                        "sp_tp_layer_ledger.png"}
    assert proc.stderr == ""


@pytest.fixture
def step_figs(sp_tp_figures):
    return sp_tp_figures("steps.h5", layer_cases() + layer_step_cases())


def test_step_figure_stacks_forward_and_backward(step_figs):
    res, figs = step_figs
    ax = figs[STEP_PNG].axes[0]
    steps = [c for c in res.cases_of("sp_tp") if c.attrs.get("pass") == "fwd_bwd"]
    assert len(steps) == 6  # tp, tp_sp overlapped, tp_sp not; fused and unfused
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == ["tp", "tp_sp\noverlap", "tp_sp\nno overlap"] * 2
    bars = sorted(_bars(ax), key=lambda p: (round(p.get_x(), 6), p.get_y()))
    assert len(bars) == 4 * len(steps)
    phases = ("fwd_compute", "fwd_comm", "bwd_compute", "bwd_comm")
    by_height = sorted(round(b.get_height(), 12) for b in bars)
    want = sorted(round(c.attrs[f"phase_{p}_median_s"], 12) for c in steps for p in phases)
    assert by_height == pytest.approx(want)
    for i in range(0, len(bars), 4):  # each stack starts at 0 and is contiguous
        stack = bars[i:i + 4]
        assert stack[0].get_y() == 0
        for below, above in zip(stack, stack[1:]):
            assert above.get_y() == pytest.approx(below.get_y() + below.get_height())
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["tp", "tp_sp", "fwd compute", "fwd comm", "bwd compute",
                      "bwd comm (exposed)", "step median (p10-p90)"]


def test_memory_and_ledger_once_per_configuration(step_figs):
    res, figs = step_figs
    ax = figs["sp_tp_layer_memory.png"].axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == [
        "tp\nfused", "tp_sp\nfused", "tp\nunfused", "tp_sp\nunfused"]
    steps = [c for c in res.cases_of("sp_tp")
             if c.attrs.get("pass") == "fwd_bwd" and c.attrs.get("bwd_overlap", 1) == 1]
    heights = sorted(p.get_height() * 2**20 for p in _bars(ax))
    expected = sorted([c.attrs[k] for c in steps
                       for k in ("activation_bytes", "pred_activation_bytes", "bwd_peak_bytes")])
    assert heights == pytest.approx(expected)
    assert "backward peak" in " ".join(t.get_text() for t in ax.get_legend().get_texts())
    ledger = figs["sp_tp_layer_ledger.png"].axes[0]
    assert len(ledger.get_yticklabels()) == 4
