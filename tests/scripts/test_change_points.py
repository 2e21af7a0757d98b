"""Change points (scripts/results/change_points.py) over a history made of a real run's file,
copied night after night with its times unchanged (as SMPI's deterministic runs give them) and,
from one night on, 2% slower: the step is found at that night, with its size, its commits and
the environment field that changed there; a flat history has none."""

from __future__ import annotations

import re

import pytest

from scripts.results import change_points, history
from synthetic_results import REPO, STEP_AT, nightly_history

CASE = "allreduce_fp32_act_s1024_b1_h1024"


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


def test_the_history_page_marks_the_step(tmp_path, capsys):
    page = tmp_path / "history.html"
    assert history.main([str(nightly_history(tmp_path, 1.02)), "--case", f"{CASE}$",
                         "--html", str(page)]) == 0
    html = page.read_text()
    assert html.count('class="step"') == 1
    assert re.search(rf'class="step-point">run {STEP_AT}: [^<]*\+2\.00%', html)


def test_sensitivity_finds_two_percent_and_nothing_at_zero(capsys):
    """SMPI's modeled compute is deterministic: a 2% slower rate is found in every case at the
    first slowed run, 0% gives no change point (needs `make sim`)."""
    from scripts.results import sensitivity

    build = REPO / "build-sim"
    if not (build / "bin" / "ring_attention").exists():
        pytest.skip("no SMPI build (make sim)")
    assert sensitivity.main(["--nights", "2", "--slowdowns", "0,0.02", "--build", str(build)]) == 0
    rows = [ln.split(" | ") for ln in capsys.readouterr().out.splitlines()[2:]]
    assert len(rows) == 2 * len(sensitivity.BENCHES)
    for _, _, slowdown, cases, found, elsewhere in rows:
        assert elsewhere == "0 |" and found == ("-" if slowdown == "0.0%" else cases), rows


def test_sensitivity_bad_input(capsys):
    from scripts.results import sensitivity

    assert sensitivity.main(["--nights", "1"]) == 2
    assert capsys.readouterr().err.startswith("error: --nights 1")
