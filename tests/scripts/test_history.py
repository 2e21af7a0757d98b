"""history.py: runs ordered by created_utc, case filter, plot."""

from __future__ import annotations

import re

from synthetic_results import group_attrs, ring_cases, run_script, sp_tp_cases

# (file name, created_utc, commit, time scale): names sort differently from times
RUNS = [("a_run.h5", "2025-02-03T08:00:00Z", "commit_third", 1.3),
        ("b_run.h5", "2025-01-01T08:00:00Z", "commit_first", 1.0),
        ("c_run.h5", "2025-01-20T23:59:59Z", "commit_second", 1.1)]


def _write_runs(results_writer):
    return [results_writer(name, "sp_tp", sp_tp_cases(scale=scale), created_utc=when,
                           git_commit=commit) for name, when, commit, scale in RUNS]


def test_runs_ordered_by_time(results_writer, tmp_path):
    _write_runs(results_writer)
    proc = run_script("history.py", tmp_path)
    assert proc.returncode == 0, proc.stderr
    commits = re.findall(r"commit_\w+", proc.stdout)
    first_block = commits[:3]
    assert first_block == ["commit_first", "commit_second", "commit_third"]
    # every case lists its runs in the same order, with the change vs the first run
    block = proc.stdout.split("sp_tp/allreduce_fp32_n1024\n")[1].split("\n\n")[0]
    assert re.findall(r"commit_\w+", block) == first_block
    assert "+10.0%" in block and "+30.0%" in block


def test_case_filter_and_plot(results_writer, tmp_path):
    files = _write_runs(results_writer)
    out = tmp_path / "hist" / "h.png"
    proc = run_script("history.py", *files, "--case", "rs_ag.*n1024$", "--plot", out)
    assert proc.returncode == 0, proc.stderr
    cases = re.findall(r"^sp_tp/\S+$", proc.stdout, flags=re.M)
    assert cases == ["sp_tp/rs_ag_fp32_n1024"]
    assert out.is_file() and out.read_bytes()[:4] == b"\x89PNG"


def test_no_match_exits_1(results_writer, tmp_path):
    _write_runs(results_writer)
    assert run_script("history.py", tmp_path, "--case", "nothing_like_this").returncode == 1


def test_partial_files_only_on_request(results_writer, tmp_path):
    _write_runs(results_writer)
    results_writer("d_run.h5", "sp_tp", sp_tp_cases()[:2], partial=True,
                   created_utc="2025-03-01T00:00:00Z", git_commit="commit_partial")
    assert "commit_partial" not in run_script("history.py", tmp_path).stdout
    proc = run_script("history.py", tmp_path, "--include-partial")
    assert "commit_partial" in proc.stdout and "not complete" in proc.stderr


def test_one_line_per_system_and_flagged_runs(results_writer, tmp_path):
    import json

    runs = [("r1.h5", "2025-01-01T00:00:00Z", "c1", 1.0, "nvlink"),
            ("r2.h5", "2025-01-02T00:00:00Z", "c2", 1.0, "net"),
            ("r3.h5", "2025-01-03T00:00:00Z", "c3", 1.5, "nvlink")]
    for name, when, commit, scale, link in runs:
        results_writer(name, "sp_tp", sp_tp_cases(scale=scale), created_utc=when,
                       git_commit=commit, file_attrs={"link": link})
    (tmp_path / "r3.compare.json").write_text(json.dumps(
        {"verdict": "regression", "regressions": ["sp_tp/allreduce_fp32_n1024"],
         "check_failures": []}))
    out = tmp_path / "h.png"
    proc = run_script("history.py", tmp_path, "--case", "allreduce_fp32_n1024$", "--plot", out)
    assert proc.returncode == 0, proc.stderr
    assert "[compare: regression]" in proc.stdout
    block = proc.stdout.split("sp_tp/allreduce_fp32_n1024\n")[1]
    systems = re.findall(r"system (\S+)", block)
    assert systems == ["cpu_x4_nvlink_mpi_cpu_fp32", "cpu_x4_net_mpi_cpu_fp32"]
    nvlink = block.split("system cpu_x4_net")[0]
    assert re.search(r"c3 .*\+50\.0%  FLAGGED", nvlink) and nvlink.count("FLAGGED") == 1
    assert out.read_bytes()[:4] == b"\x89PNG"
    proc = run_script("history.py", tmp_path, "--metric", "busbw_GBps", "--case", "n1024$")
    assert proc.returncode == 0 and "(busbw_GBps)" in proc.stdout


def test_bench_filter_skips_other_benches(results_writer, tmp_path):
    _write_runs(results_writer)
    results_writer("ring.h5", "ring_attention", ring_cases(4, world_size=4),
                   git_commit="commit_ring")
    proc = run_script("history.py", tmp_path, "--bench", "sp_tp")
    assert proc.returncode == 0, proc.stderr
    assert "commit_ring" not in proc.stdout and "ring_attention/" not in proc.stdout
    assert "skipped 1 run(s) of another bench than sp_tp (1 of ring_attention)" in proc.stderr
    proc = run_script("history.py", tmp_path, "--bench", "moe")
    assert proc.returncode == 1 and "no results files of bench moe" in proc.stderr


def test_group_and_params_split_the_lines(results_writer, tmp_path):
    # ring_attention: --cp 1 and --cp 2 on 2 ranks share case names; an older run without the
    # group attributes is one group of 2; one run picked another attention kernel.
    runs = [("r1.h5", "2025-01-01T00:00:00Z", "c1", 1.0, 2, None),
            ("r2.h5", "2025-01-02T00:00:00Z", "c2", 3.0, 1, None),
            ("r3.h5", "2025-01-03T00:00:00Z", "c3", 1.1, 2, None),
            ("r4.h5", "2025-01-04T00:00:00Z", "c4", 5.0, 2, "suite")]
    for name, when, commit, scale, n_c, kernel in runs:
        extra = {"attn_kernel_choice": kernel} if kernel else None
        results_writer(name, "ring_attention", ring_cases(n_c, scale=scale, extra_params=extra),
                       world_size=2, created_utc=when, git_commit=commit,
                       file_attrs=group_attrs(n_c, 2) if commit != "c1" else None)
    proc = run_script("history.py", tmp_path, "--case", "c1024")
    assert proc.returncode == 0, proc.stderr
    block = proc.stdout.split("ring_attention/ring_contiguous_causal_fp32_c1024_a8_d64\n")[1]
    systems = re.findall(r"system (.+) \(time_median_s\)", block)
    assert systems == [
        "cpu_x2_loopback_mpi_cpu_fp32 [attn_kernel_choice=(absent)]",
        "cpu_x2_loopback_mpi_cpu_fp32 [attn_kernel_choice='suite']",
        "cpu_x2_g1x2_loopback_mpi_cpu_fp32"]
    # changes only within a line: c3 against c1 (+10%); c2 and c4 each start their own line
    assert re.search(r"c3 .*\+10\.0%$", block, flags=re.M)
    assert re.search(r"c2 .*\+0\.0%$", block, flags=re.M)
    assert re.search(r"c4 .*\+0\.0%$", block, flags=re.M)
    assert "+200.0%" not in block and "+400.0%" not in block
    assert "groups 1x2" in proc.stdout
