"""Change points (scripts/results/change_points.py) over a history made of a real run's file,
copied night after night with its times unchanged (as SMPI's deterministic runs give them) and,
from one night on, 2% slower: the step is found at that night, with its size, its commits and
the environment field that changed there; a flat history has none."""

from __future__ import annotations

import re
from pathlib import Path

from scripts.results import change_points
from scripts.results.history_scale import make_copies
from synthetic_results import REPO, scale_times

SOURCE = REPO / "results" / "baselines" / "Intel-Xeon-Processor-2-cores_x4_loopback_mpi_cpu_fp32"
FILE = "sp_tp_collectives.h5"
CASE = "allreduce_fp32_act_s1024_b1_h1024"
NIGHTS, STEP_AT = 24, 16


def nightly_history(root: Path, slowdown: float) -> Path:
    """NIGHTS copies of one real file, each its own commit; from night STEP_AT on, every
    case's time is `slowdown` x longer and NCCL is another version."""
    source = root / "source"
    source.mkdir(parents=True)
    (source / FILE).write_bytes((SOURCE / FILE).read_bytes())
    for copy in make_copies(source, root / "results", NIGHTS):
        night = int(copy.parent.name.split("_")[1])
        if night < STEP_AT:
            continue
        scale_times(copy, slowdown, {"nccl_version": "2.21.5"})
    return root / "results"


def test_detect_on_plain_series():
    assert [(i, round(size, 4)) for i, size, _ in change_points.detect([1.0] * 10 + [1.02] * 8)] \
        == [(10, 0.02)]
    assert change_points.detect([1.0] * 18) == []


def test_a_two_percent_step_is_found_at_its_run(tmp_path, capsys):
    results = nightly_history(tmp_path, 1.02)
    assert change_points.main([str(results), "--case", f"{CASE}$"]) == 0
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if ln.startswith("  ")]
    assert len(lines) == 1, out
    assert re.search(rf"at run \[{STEP_AT}\] 2026-01-{STEP_AT + 1}T02:00:00Z: \+2\.00%", lines[0])
    assert f"commits {STEP_AT - 1:012x} -> {STEP_AT:012x}" in lines[0]
    assert "environment changed: NCCL: none -> 2.21.5" in lines[0]


def test_a_flat_history_has_none(tmp_path, capsys):
    results = nightly_history(tmp_path, 1.0)
    assert change_points.main([str(results), "--case", "allreduce"]) == 0
    assert "\n0 change point(s)" in capsys.readouterr().out
