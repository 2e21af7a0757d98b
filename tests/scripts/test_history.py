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
    # one figure per system, beside the name asked for
    assert not out.exists()
    for system in systems:
        assert (tmp_path / f"h_{system}.png").read_bytes()[:4] == b"\x89PNG"
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


# The figures: one per system, each line or panel named by its case, regressions where the
# compare step flagged them, commit and date on the axis, software changes marked.

def _figures(tmp_path, case_regex=None):
    from scripts.results import history
    from scripts.results.suite_results import cli_warnings

    cli_warnings()
    runs = history.load_runs([str(tmp_path)], include_partial=False)
    table = history.case_history(runs, re.compile(case_regex) if case_regex else None)
    return history.history_figures(runs, table)


def _many_cases(n: int, scale: float, slow: frozenset = frozenset()):
    """`n` all-reduce cases (sizes 1K, 2K, ...); those whose index is in `slow` 30% slower."""
    from synthetic_results import rank_times

    return [{"name": f"allreduce_fp32_n{2 ** (10 + k)}",
             "params": {"op": "allreduce", "dtype": "fp32", "n_bytes": 2 ** (10 + k)},
             "time_s": rank_times(scale * (1.3 if k in slow else 1.0) * (5e-6 + 2 ** (10 + k) / 2e10),
                                  seed=k)} for k in range(n)]


CPU = "Intel(R) Xeon(R) Processor (2 cores)"


def _write_day(results_writer, tmp_path, n_cases: int):
    """Five runs on one system (the fourth flagged for cases 2 and 5, OpenBLAS upgraded before
    the third), two on another link."""
    import json

    runs = [("r1", "2026-11-30T09:10:00Z", "aaaa111122", 1.00, "loopback", "0.3.21", ()),
            ("r2", "2026-11-30T11:40:00Z", "bbbb222233", 1.02, "loopback", "0.3.21", ()),
            ("r3", "2026-11-30T14:05:00Z", "cccc333344", 0.99, "loopback", "0.3.26", ()),
            ("r4", "2026-11-30T16:30:00Z", "dddd444455", 1.00, "loopback", "0.3.26", (2, 5)),
            ("r5", "2026-11-30T18:00:00Z", "eeee555566", 1.01, "loopback", "0.3.26", ()),
            ("t1", "2026-11-30T10:00:00Z", "ffff666677", 3.00, "tcp", "0.3.21", ()),
            ("t2", "2026-11-30T15:00:00Z", "gggg777788", 3.10, "tcp", "0.3.21", ())]
    for name, when, commit, scale, link, blas, slow in runs:
        results_writer(f"{name}.h5", "sp_tp", _many_cases(n_cases, scale, frozenset(slow)),
                       created_utc=when, git_commit=commit,
                       file_attrs={"link": link, "device_names": CPU,
                                   "gemm_library": f"OpenBLAS {blas} SkylakeX, 1 thread"})
        if slow:
            (tmp_path / f"{name}.compare.json").write_text(json.dumps(
                {"verdict": "regression", "check_failures": [],
                 "regressions": [f"sp_tp/allreduce_fp32_n{2 ** (10 + k)}" for k in slow]}))


LOOPBACK = "Intel-Xeon-Processor-2-cores_x4_loopback_mpi_cpu_fp32"
TCP = "Intel-Xeon-Processor-2-cores_x4_tcp_mpi_cpu_fp32"


def _red_crosses(ax) -> list[tuple[float, float]]:
    return [tuple(xy) for coll in ax.collections if coll.get_label() == "_regression"
            for xy in coll.get_offsets()]


def test_thirteen_cases_get_a_panel_each_per_system(results_writer, tmp_path):
    _write_day(results_writer, tmp_path, 13)
    figures = _figures(tmp_path, "allreduce")
    assert list(figures) == [LOOPBACK, TCP]  # two systems, two figures, never mixed
    fig = figures[LOOPBACK]
    assert fig.get_suptitle().startswith(LOOPBACK + "\n")
    panels = [ax for ax in fig.axes if ax.get_visible()]
    titles = [ax.get_title() for ax in panels]
    assert titles == [f"allreduce_fp32_n{2 ** (10 + k)}" for k in range(13)]
    # each panel holds its case's five runs; red crosses on the fourth run (x = 3) of the
    # flagged cases only, at the flagged value
    for k, ax in enumerate(panels):
        assert len(ax.lines[0].get_xdata()) == 5
        crosses = _red_crosses(ax)
        if k in (2, 5):
            y = ax.lines[0].get_ydata()[3]
            assert crosses == [(3.0, y)], (k, crosses)
        else:
            assert crosses == [], k
    # commit and date of each run under the bottom panels; the tcp runs are not on this axis
    labels = [t.get_text() for t in panels[-1].get_xticklabels()]
    assert labels == ["aaaa111122\n2026-11-30 09:10", "bbbb222233\n2026-11-30 11:40",
                      "cccc333344\n2026-11-30 14:05", "dddd444455\n2026-11-30 16:30",
                      "eeee555566\n2026-11-30 18:00"]
    # the OpenBLAS upgrade between the second and third runs: a vertical in every panel and
    # the change written on the figure
    assert all(any(list(l.get_xdata()) == [1.5, 1.5] for l in ax.lines) for ax in panels)
    notes = " ".join(t.get_text() for t in fig.texts)
    assert ("GEMM/BLAS: OpenBLAS 0.3.21 SkylakeX, 1 thread -> OpenBLAS 0.3.26 SkylakeX, 1 thread"
            in notes)
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == ["regression (compare step)", "software changed"]
    tcp = [ax for ax in figures[TCP].axes if ax.get_visible()]
    assert len(tcp) == 13 and all(len(ax.lines[0].get_xdata()) == 2 for ax in tcp)


def test_few_cases_share_one_panel_with_a_legend_of_cases(results_writer, tmp_path):
    _write_day(results_writer, tmp_path, 4)
    figures = _figures(tmp_path)
    fig = figures[LOOPBACK]
    (ax,) = fig.axes
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == [f"allreduce_fp32_n{2 ** (10 + k)}" for k in range(4)] + [
        "regression (compare step)", "software changed"]
    assert ax.get_ylabel() == "median step time (us)"
    crosses = _red_crosses(ax)
    assert len(crosses) == 1 and crosses[0][0] == 3.0  # case 2 of 4 flagged; case 5 absent
    # written as one file per system when asked for a plot
    out = tmp_path / "plots" / "hist.png"
    proc = run_script("history.py", tmp_path, "--case", "allreduce", "--plot", out)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.parent.iterdir()) == [f"hist_{LOOPBACK}.png",
                                                            f"hist_{TCP}.png"]
    assert "software changed since [2]: GEMM/BLAS: OpenBLAS 0.3.21" in proc.stdout


def test_one_system_writes_the_file_named(results_writer, tmp_path):
    _write_runs(results_writer)
    out = tmp_path / "one.png"
    proc = run_script("history.py", tmp_path, "--plot", out)
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes()[:4] == b"\x89PNG"
