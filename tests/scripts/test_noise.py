"""Thresholds from the machine's own history (scripts/results/noise.py): the spread of A/A runs
(one commit, or the runs between change points) sets each case's threshold, which the verdict
line gives; too little history keeps the fixed rule and says so."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from scripts.results import run_verdict
from scripts.results.baselines import add_baseline
from scripts.results.noise import FLOOR, K_SIGMA, MIN_SAMPLES, case_threshold
from synthetic_results import REPO, scale_times

KERNELS = REPO / "results" / "baselines" / "Intel-Xeon-Processor-2-cores_x1_none_none_cpu_per-case"
# Eight reruns of one commit: each run's times off the first by these factors.
JITTER = (1.0, 1.01, 0.99, 1.005, 0.995, 1.01, 1.0, 0.99)


def test_threshold_is_k_times_the_mad_of_the_aa_runs():
    # deviations from the median 1.0: 0, +1%, -1%, +2%, -2%, 0; |deviation| median 1%
    found = case_threshold([[1.00, 1.01, 0.99, 1.02, 0.98, 1.00]], fallback=0.5)
    assert found.measured and found.samples == 6
    assert found.threshold == pytest.approx(K_SIGMA * 1.4826 * 0.01)
    assert case_threshold([[1.0] * 8], fallback=0.5).threshold == FLOOR


def test_too_little_history_keeps_the_fixed_rule():
    found = case_threshold([[1.0, 1.01], [2.0], [1.0, 1.02]], fallback=0.5)
    assert not found.measured and found.threshold == 0.5 and found.samples == 4 < MIN_SAMPLES
    assert "fixed rule: 4 A/A run(s) in its history" in found.text()


def history_tree(root: Path, candidate: float, commits: tuple[str, ...]) -> tuple[Path, Path]:
    """A results tree of reruns (JITTER) of the real kernel_bench file on `commits` (cycled),
    the first filed as the baseline, and a candidate run `candidate` x slower; returns the
    candidate's folder and the registry."""
    registry = root / "registry"
    for night, factor in enumerate(JITTER):
        run = root / "results" / f"night{night}"
        run.mkdir(parents=True)
        copy = Path(shutil.copy(KERNELS / "kernel_bench.h5", run / "kernel_bench.h5"))
        scale_times(copy, factor, {"created_utc": f"2026-01-0{night + 1}T02:00:00Z",
                                   "git_commit": commits[night % len(commits)]})
        if night == 0:
            add_baseline(copy, registry)
    cand = root / "results" / "cand"
    cand.mkdir()
    scale_times(Path(shutil.copy(KERNELS / "kernel_bench.h5", cand / "kernel_bench.h5")),
                candidate, {"created_utc": "2026-01-20T02:00:00Z", "git_commit": "c0ffee000000"})
    return cand, registry


def verdict_line(cand: Path, registry: Path, capsys) -> str:
    capsys.readouterr()
    run_verdict.main([str(cand), "--registry", str(registry)])
    return next(ln for ln in capsys.readouterr().out.splitlines() if "kernel_bench.h5" in ln)


@pytest.mark.parametrize("commits", [("aaaa00000000",), tuple(f"{n:012x}" for n in range(8))])
def test_a_ten_percent_slowdown_is_found_past_the_measured_threshold(tmp_path, capsys, commits):
    """One commit: its A/A runs; a new commit each night and no change point: the whole
    history is one A/A series."""
    cand, registry = history_tree(tmp_path, 1.10, commits)
    line = verdict_line(cand, registry, capsys)
    # JITTER's deviations from its median: |0|, 1, 1, .5, .5, 1, 0, 1 %: median 0.75%;
    # x1.4826 x4: 4.45%
    assert line.split("  ")[-1].startswith("10 regressions"), line
    assert f"judged past x1.04 (measured: {K_SIGMA:g} x the spread of this machine's A/A runs)" \
        in line, line
    quiet, registry = history_tree(tmp_path / "quiet", 1.0, commits)
    assert "no regression (10 cases)" in verdict_line(quiet, registry, capsys)
