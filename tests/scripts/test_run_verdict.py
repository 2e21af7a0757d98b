"""A whole run against its baselines: every file filed at once (`baselines.py add <folder>`),
found again file by file, and the verdict `make run` ends with (run_verdict.py), on its page
(report_page.py) and in the history."""

from __future__ import annotations

import json
import shutil

from synthetic_results import NEW_CASE, SLOWED_CASE, run_script, write_run

FILES = ("ring_attention.h5", "ring_docs.h5", "sp_tp.h5")
# A run with one run before it has too little history for measured thresholds (noise.py).
FIXED_RULE = "; judged past x1.5 (fixed rule: too little A/A history)"


def _verdict_lines(stdout: str) -> dict[str, str]:
    """{file: its verdict} from run_verdict.py's lines."""
    lines = {}
    for line in stdout.splitlines():
        name, _, rest = line.strip().partition("  ")
        if name.endswith(".h5"):
            lines[name] = rest.strip()
    return lines


def test_every_file_of_a_run_is_filed_and_judged_no_regression(tmp_path):
    run = write_run(tmp_path / "run1")
    registry = tmp_path / "reg"
    proc = run_script("baselines.py", "add", run, "--registry", registry)
    assert proc.returncode == 0, proc.stderr
    stored = sorted(p.name for p in registry.rglob("*.h5"))
    # ring_attention.h5 and ring_docs.h5 hold one bench: both are baselines, neither replaced
    assert stored == list(FILES), stored
    again = run_script("baselines.py", "add", run, "--registry", registry)
    assert again.returncode == 2 and again.stderr.count("--force replaces it") == 3
    second = shutil.copytree(run, tmp_path / "run2")
    proc = run_script("run_verdict.py", second, "--registry", registry)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = _verdict_lines(proc.stdout)
    assert sorted(lines) == list(FILES)
    assert lines["sp_tp.h5"] == f"no regression (8 cases){FIXED_RULE}"
    assert lines["ring_attention.h5"] == f"no regression (2 cases){FIXED_RULE}"
    assert lines["ring_docs.h5"] == f"no regression (3 cases){FIXED_RULE}"
    # each found its own baseline, the one of its name
    for name in FILES:
        record = json.loads((second / name.replace(".h5", ".compare.json")).read_text())
        assert record["baseline"].endswith("/" + name) and record["verdict"] == "ok"


def test_a_slowed_case_is_flagged_in_terminal_verdict_file_and_page(tmp_path):
    registry = tmp_path / "reg"
    run_script("baselines.py", "add", write_run(tmp_path / "base"), "--registry", registry)
    cand = write_run(tmp_path / "cand", slowed=2.0, created_utc="2025-01-16T10:00:00Z")
    proc = run_script("run_verdict.py", cand, "--registry", registry)
    assert proc.returncode == 0, proc.stdout  # a regression fails only with --strict
    lines = _verdict_lines(proc.stdout)
    assert lines["sp_tp.h5"] == (f"1 regression (worst {SLOWED_CASE} x2.00){FIXED_RULE}; 1 case "
                                 f"not in the baseline (listed, not judged): {NEW_CASE}")
    assert list(lines)[0] == "sp_tp.h5", "the regressed file comes first"
    record = json.loads((cand / "sp_tp.compare.json").read_text())
    assert record["verdict"] == "regression" and record["regressions"] == [SLOWED_CASE]
    assert record["only_in_candidate"] == [NEW_CASE]
    assert run_script("run_verdict.py", cand, "--registry", registry,
                      "--strict").returncode == 1
    page = run_script("report_page.py", cand, "--registry", registry)
    assert page.returncode == 0, page.stderr
    html = (cand / "index.html").read_text()
    regressed = html[html.index("Regressed cases"):]
    assert SLOWED_CASE in regressed.split("</table>")[0] and "x2.00" in regressed
    history = run_script("history.py", tmp_path / "base", cand, "--case", "n4194304")
    assert "FLAGGED" in history.stdout


def test_thresholds_with_a_core_per_rank_and_with_more_ranks_than_cores(tmp_path):
    """A core per rank: past 1.5x is a regression (1.6x is, 1.3x not). More ranks than cores
    (`oversubscribed` = 1), where two quiet runs differed by up to 3.4x: past 3.5x."""
    shared = {"oversubscribed": 1}
    for name, attrs, cases in (("own", None, ((1.6, "1 regression"), (1.3, "no regression"))),
                               ("shared", shared, ((4.0, "1 regression"),
                                                   (3.0, "no regression")))):
        registry = tmp_path / f"reg_{name}"
        base = write_run(tmp_path / f"base_{name}", file_attrs=attrs)
        run_script("baselines.py", "add", base, "--registry", registry)
        for slowed, expected in cases:
            cand = write_run(tmp_path / f"cand_{name}{slowed}", slowed=slowed, file_attrs=attrs)
            line = _verdict_lines(run_script("run_verdict.py", cand, "--registry",
                                             registry).stdout)["sp_tp.h5"]
            assert line.startswith(expected), (name, slowed, line)
    assert "judged past x3.5 (fixed rule: more ranks than cores, too little A/A history)" in line


def test_no_baseline_says_which_command_makes_one(tmp_path):
    (tmp_path / "reg").mkdir()
    run = write_run(tmp_path / "run")
    proc = run_script("run_verdict.py", run, "--registry", tmp_path / "reg")
    assert proc.returncode == 0
    for line in _verdict_lines(proc.stdout).values():
        assert line == "no baseline (`make baseline` files this run as one)"
    assert json.loads((run / "sp_tp.compare.json").read_text())["verdict"] == "no-baseline"


def test_a_busy_machine_slowdown_is_not_judged(tmp_path):
    registry = tmp_path / "reg"
    run_script("baselines.py", "add", write_run(tmp_path / "base"), "--registry", registry)
    cand = write_run(tmp_path / "cand", slowed=3.0,
                     file_attrs={"host_other_cores": 1.3, "host_cores": 2})
    proc = run_script("run_verdict.py", cand, "--registry", registry, "--strict")
    assert proc.returncode == 0, proc.stdout
    line = _verdict_lines(proc.stdout)["sp_tp.h5"]
    assert line.startswith("not judged: 1 case(s) slower, but other processes took 1.3 of 2 "
                           "cores during this run"), line
    # a quiet candidate against a busy baseline is judged
    registry2 = tmp_path / "reg2"
    busy_base = write_run(tmp_path / "busy_base",
                          file_attrs={"host_other_cores": 1.0, "host_cores": 2})
    filed = run_script("baselines.py", "add", busy_base, "--registry", registry2)
    assert filed.stderr.count("other processes took 1.0 of 2 cores while it ran") == 3
    quiet = write_run(tmp_path / "quiet", slowed=3.0,
                      file_attrs={"host_other_cores": 0.0, "host_cores": 2})
    line = _verdict_lines(run_script("run_verdict.py", quiet, "--registry",
                                     registry2).stdout)["sp_tp.h5"]
    assert line.startswith("1 regression"), line


def test_an_older_registry_keyed_by_bench_and_mode_still_serves(tmp_path):
    registry = tmp_path / "reg"
    base = write_run(tmp_path / "base")
    run_script("baselines.py", "add", base / "sp_tp.h5", "--registry", registry)
    stored = next(registry.rglob("sp_tp.h5"))
    stored.rename(stored.with_name("sp_tp_collectives.h5"))  # the name the registry once used
    cand = write_run(tmp_path / "cand", slowed=2.0)
    line = _verdict_lines(run_script("run_verdict.py", cand, "--registry",
                                     registry).stdout)["sp_tp.h5"]
    assert line.startswith(f"1 regression (worst {SLOWED_CASE}"), line
