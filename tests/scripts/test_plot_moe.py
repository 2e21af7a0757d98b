"""plot.py / plot_moe.py on synthetic moe files written like bench/moe/moe_report.cpp."""

from __future__ import annotations

from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from scripts.plots.plot_moe import moe_figures  # noqa: E402
from scripts.results.suite_results import read_results  # noqa: E402
from synthetic_results import rank_times, run_script  # noqa: E402
from test_plot import _written  # noqa: E402

E, WORLD = 8, 4
ALL_PNGS = {f"moe_{n}.png" for n in ("expert_load", "load_vs_skew", "load_vs_cf", "phases", "ratio",
                                     "balance")}


def moe_case(skew: str, knob: float, cf: float, seed: int, balance: bool = False) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    routed = rng.integers(100, 300, size=E).astype(np.int64)
    if skew != "none":
        routed[seed % E] += int(200 * knob)
    cap = int(np.ceil(cf * routed.sum() / E)) if cf > 0 else -1
    kept = np.minimum(routed, cap) if cap >= 0 else routed
    phases = {p: rank_times(t, seed=seed + i) for i, (p, t) in
              enumerate([("route", 1e-5), ("permute", 2e-5), ("dispatch", 1e-4), ("expert", 3e-4),
                         ("combine", 1e-4)])}
    time_s = sum(phases.values()) + 1e-6
    attrs: dict[str, Any] = {
        "capacity": cap, "expert_load_max_over_mean": float(kept.max() / kept.mean()),
        "expert_load_routed_max_over_mean": float(routed.max() / routed.mean()),
        "drop_rate": float((routed - kept).sum() / routed.sum()),
        "dropped_copies": int((routed - kept).sum()), "aux_loss": 0.01 + 0.001 * seed,
        "pred_aux_loss": 0.01, "a2a_bytes_per_rank": 1e6, "pred_a2a_bytes_per_rank": 1.02e6,
        "a2a_expert_ratio": 0.6 + 0.1 * seed, "pred_a2a_expert_ratio": 0.5, "bytes_match": 1}
    attrs.update({f"phase_{p}_median_s": float(np.median(v.max(axis=1))) for p, v in phases.items()})
    datasets: dict[str, Any] = {f"phase_{p}_s": v for p, v in phases.items()}
    datasets.update(expert_load=kept, expert_load_routed=routed,
                    rank_load=np.full(WORLD, kept.sum() // WORLD, dtype=np.int64))
    if balance:
        datasets["balance_max_over_mean"] = np.array([2.0, 1.6, 1.3, 1.1])
    knob_name = {"zipf": "alpha", "hot": "hot_factor"}.get(skew)
    name = f"moe_fp32_T512_h64_ff128_E8_k2_swiglu_{skew}" + (f"_{knob:g}" if knob_name else "") + \
        (f"_cf{cf:g}" if cf > 0 else "_dropless") + "_ep4"
    return {"name": name,
            "params": {"dtype": "fp32", "tokens": 512, "h": 64, "d_ff": 128, "experts": E, "top_k": 2,
                       "mlp": "swiglu", "skew": skew, "alpha": knob if skew == "zipf" else 0.0,
                       "hot_factor": knob if skew == "hot" else 1.0, "capacity_factor": float(cf),
                       "balance_steps": 3 if balance else 0, "n_e": WORLD, "groups": 1},
            "attrs": attrs, "time_s": time_s, "datasets": datasets}


BWD_PHASES = ("bwd_combine", "bwd_permute", "bwd_expert", "bwd_dispatch", "bwd_router")


def fwd_bwd_case(fwd: dict[str, Any], seed: int) -> dict[str, Any]:
    """The fwd_bwd case of a forward case, as moe_report.cpp writes it: the same routing, the
    forward's phases re-measured, backward phases nested in `backward`, both in the step."""
    case = {**fwd, "name": fwd["name"] + "_fwd_bwd", "params": {**fwd["params"], "pass": "fwd_bwd"},
            "attrs": dict(fwd["attrs"]), "datasets": dict(fwd["datasets"])}
    bwd = {p: rank_times(t, seed=seed + 10 + i) for i, (p, t) in
           enumerate(zip(BWD_PHASES, (1e-4, 2e-5, 6e-4, 1e-4, 2e-5)))}
    forward, backward = fwd["time_s"] - 1e-6, sum(bwd.values()) + 1e-6
    case["time_s"] = forward + backward + 1e-6
    case["datasets"].update({f"phase_{p}_s": v for p, v in bwd.items()},
                            phase_forward_s=forward, phase_backward_s=backward)
    for name, v in (*bwd.items(), ("forward", forward), ("backward", backward)):
        case["attrs"][f"phase_{name}_median_s"] = float(np.median(v.max(axis=1)))
    case["attrs"].update(bwd_over_fwd_time=case["attrs"]["phase_backward_median_s"] /
                         case["attrs"]["phase_forward_median_s"],
                         bwd_a2a_expert_ratio=0.3 + 0.05 * seed, pred_bwd_a2a_expert_ratio=0.25,
                         fwd_bwd_a2a_bytes_per_rank=2e6, pred_fwd_bwd_a2a_bytes_per_rank=2.04e6)
    return case


def sweep(cfs=(0.0, 1.25), skews=(("none", 0.0), ("zipf", 0.6), ("zipf", 1.2), ("hot", 3.0)),
          balance: bool = True, passes: tuple[str, ...] = ("fwd",)) -> list[dict[str, Any]]:
    cases = []
    for i, (skew, knob) in enumerate(skews):
        for j, cf in enumerate(cfs):
            fwd = moe_case(skew, knob, cf, seed=2 * i + j, balance=balance and i == 0)
            if "fwd" in passes:
                cases.append(fwd)
            if "fwd_bwd" in passes:
                cases.append(fwd_bwd_case(fwd, seed=2 * i + j))
    return cases


def test_full_sweep_gets_every_figure(results_writer, tmp_path):
    path = results_writer("moe.h5", "moe", sweep())
    proc = run_script("plot.py", path, "--out", tmp_path / "o")
    names = _written(proc)
    assert {n for n in names if not n.startswith("per_rank_")} == ALL_PNGS
    assert sum(n.startswith("per_rank_moe_") for n in names) == 1
    assert proc.stderr == ""


def test_one_cf_uniform_only(results_writer, tmp_path):
    """No skew knob and one capacity factor: no against-skew or against-CF figure."""
    path = results_writer("moe1.h5", "moe", sweep(cfs=(0.0,), skews=(("none", 0.0),), balance=False))
    names = _written(run_script("plot.py", path, "--out", tmp_path / "o"))
    assert {n for n in names if not n.startswith("per_rank_")} == {
        "moe_expert_load.png", "moe_phases.png", "moe_ratio.png"}


def test_cases_without_skew_fall_back_to_generic(results_writer, tmp_path):
    cases = sweep(cfs=(0.0,), skews=(("none", 0.0),), balance=False)
    for c in cases:
        del c["params"]["skew"]
    path = results_writer("old.h5", "moe", cases)
    proc = run_script("plot.py", path, "--out", tmp_path / "o")
    names = _written(proc)
    assert "moe_time_median.png" in names and "moe_expert_load.png" not in names
    assert "lack" in proc.stderr


def _figures(results_writer, cases):
    res = read_results(results_writer("f.h5", "moe", cases))
    return moe_figures(res.cases_of("moe"), "moe", lambda what: what), res


def test_skew_lines_follow_the_recorded_figures(results_writer):
    figures, res = _figures(results_writer, sweep())
    ax_load, ax_drop = figures["moe_load_vs_skew.png"].axes[0], figures["moe_load_vs_skew.png"].axes[2]
    zipf_dropless = sorted((c for c in res.cases_of("moe")
                            if c.attrs["skew"] == "zipf" and c.attrs["capacity_factor"] == 0),
                           key=lambda c: c.attrs["alpha"])
    line = next(l for l in ax_load.get_lines() if l.get_label() == "dropless")
    assert list(line.get_xdata()) == pytest.approx([0.6, 1.2])
    assert list(line.get_ydata()) == pytest.approx(
        [c.attrs["expert_load_max_over_mean"] for c in zipf_dropless])
    cf_line = next(l for l in ax_drop.get_lines() if l.get_label() == "CF 1.25")
    assert max(cf_line.get_ydata()) > 0  # the capacity-limited cases dropped copies
    plt.close("all")


def test_load_bars_are_the_expert_loads(results_writer):
    cases = sweep(cfs=(1.25,), skews=(("hot", 3.0),), balance=False)
    figures, _ = _figures(results_writer, cases)
    ax = figures["moe_expert_load.png"].axes[0]
    heights = [p.get_height() for p in ax.patches]
    routed, kept = cases[0]["datasets"]["expert_load_routed"], cases[0]["datasets"]["expert_load"]
    assert heights == list(routed) + list(kept)
    capacity = [l for l in ax.get_lines() if l.get_label() == "capacity"]
    assert capacity and capacity[0].get_ydata()[0] == cases[0]["attrs"]["capacity"]
    plt.close("all")


def test_both_passes_add_the_passes_figure_and_draw_routing_once(results_writer, tmp_path):
    cases = sweep(passes=("fwd", "fwd_bwd"))
    path = results_writer("both.h5", "moe", cases)
    names = _written(run_script("plot.py", path, "--out", tmp_path / "o"))
    assert {n for n in names if not n.startswith("per_rank_")} == ALL_PNGS | {"moe_passes.png"}
    figures, res = _figures(results_writer, cases)
    # Routing figures: one panel per sweep point, not one per pass.
    loads = [ax for ax in figures["moe_expert_load.png"].axes if ax.get_visible()]
    assert len(loads) == len(cases) // 2
    plt.close("all")


def test_passes_bars_are_the_recorded_forward_and_backward(results_writer):
    cases = sweep(cfs=(0.0,), skews=(("none", 0.0), ("hot", 3.0)), balance=False, passes=("fwd", "fwd_bwd"))
    figures, res = _figures(results_writer, cases)
    ax = figures["moe_passes.png"].axes[0]
    bars = {label: [p.get_height() for p in container]
            for container, label in zip(ax.containers, ("fwd", "forward", "backward"))}
    steps = [c for c in res.cases_of("moe") if c.name.endswith("_fwd_bwd")]
    fwds = [c for c in res.cases_of("moe") if not c.name.endswith("_fwd_bwd")]
    assert bars["fwd"] == pytest.approx([c.median_s for c in fwds])
    assert bars["forward"] == pytest.approx([c.attrs["phase_forward_median_s"] for c in steps])
    assert bars["backward"] == pytest.approx([c.attrs["phase_backward_median_s"] for c in steps])
    texts = [t.get_text() for t in ax.texts]
    assert texts == [f"bwd/fwd {c.attrs['bwd_over_fwd_time']:.2f}" for c in steps]
    # The phases figure stacks a fwd_bwd case's backward phases (hatched) above its forward.
    ph = figures["moe_phases.png"].axes[0]
    hatched = {c.get_label() for c in ph.containers if c.patches[0].get_hatch()}
    assert hatched == set(BWD_PHASES)
    # The ratio figure: the forward once per variant, the backward of each fwd_bwd case.
    ratio = figures["moe_ratio.png"].axes[0]
    assert len(ratio.collections) == 2 * len(steps)
    plt.close("all")


def test_fwd_bwd_only_runs_still_get_every_routing_figure(results_writer, tmp_path):
    path = results_writer("steps.h5", "moe", sweep(passes=("fwd_bwd",)))
    names = _written(run_script("plot.py", path, "--out", tmp_path / "o"))
    assert {n for n in names if not n.startswith("per_rank_")} == ALL_PNGS | {"moe_passes.png"}


def overlap_case(fwd: dict[str, Any], m: int, d_ff: int) -> dict[str, Any]:
    """An `_mb<M>` case as moe_case_overlap.cpp records it."""
    case = {**fwd, "name": fwd["name"].replace("_ff128", f"_ff{d_ff}") + f"_mb{m}", "params": {**fwd["params"], "microbatches": m, "d_ff": d_ff},
            "attrs": dict(fwd["attrs"])}
    step = fwd["attrs"]["phase_expert_median_s"] + 2e-5
    case["attrs"].update(microbatches=m, d_ff=d_ff, overlap_a2a_s=2e-4, overlap_compute_s=3e-4,
                         exposed_a2a_s=step - 3e-4, step_m1_s=5e-4, pred_step_s=step * 1.01,
                         pred_exposed_a2a_s=step * 1.01 - 3e-4, pred_d_ff_star=256.0)
    return case


def test_overlapped_cases_get_the_overlap_figure(results_writer):
    base = sweep(cfs=(0.0,), skews=(("none", 0.0),), balance=False)
    mb = overlap_case(base[0], 4, 128)
    one, res = _figures(results_writer, base + [mb])
    (recorded,) = [c for c in res.cases_of("moe") if c.name == mb["name"]]
    heights = [p.get_height() for p in one["moe_overlap.png"].axes[0].patches]
    assert heights == pytest.approx([500.0, recorded.attrs["time_median_s"] * 1e6, mb["attrs"]["pred_step_s"] * 1e6,
                                     300.0])
    sweep_ff, _ = _figures(results_writer, [overlap_case(base[0], 4, ff) for ff in (128, 512)])
    lines = {l.get_label() for l in sweep_ff["moe_overlap.png"].axes[0].get_lines()}
    assert {"exposed all-to-all (step - X)", "d_ff* = 256"} <= lines
    assert "moe_overlap.png" not in _figures(results_writer, base)[0]
    plt.close("all")
