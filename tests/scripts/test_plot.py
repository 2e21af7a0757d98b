"""plot.py: the figures for sp_tp, harness_overhead, the generic fallback, per-rank."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from synthetic_results import generic_cases, harness_cases, run_script, sp_tp_cases

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _written(proc) -> set[str]:
    assert proc.returncode == 0, proc.stderr
    paths = [Path(line) for line in proc.stdout.splitlines() if line.strip()]
    for p in paths:
        assert p.is_file() and p.stat().st_size > 1000, p
        assert p.read_bytes()[:8] == PNG_MAGIC, p
    return {p.name for p in paths}


def test_sp_tp_figures(results_writer, tmp_path):
    path = results_writer("sp.h5", "sp_tp", sp_tp_cases(straggler_case="allreduce_fp32_n16384"))
    out = tmp_path / "figs"
    proc = run_script("plot.py", path, "--out", out)
    names = _written(proc)
    assert names == {"sp_tp_time.png", "sp_tp_busbw.png", "sp_tp_bytes.png",
                     "per_rank_sp_tp_allreduce_fp32_n16384.png"}
    assert {p.name for p in out.iterdir()} == names
    assert proc.stderr == ""  # a complete, well-formed file: no warnings


def test_harness_overhead_figures(results_writer, tmp_path):
    path = results_writer("ho.h5", "harness_overhead", harness_cases())
    names = _written(run_script("plot.py", path, "--out", tmp_path / "o"))
    assert "harness_overhead_ratio.png" in names
    assert "harness_overhead_time_median.png" not in names  # not the generic fallback
    assert sum(n.startswith("per_rank_") for n in names) == 1


def test_generic_fallback(results_writer, tmp_path):
    path = results_writer("ring.h5", "ring_attention", generic_cases())
    names = _written(run_script("plot.py", path, "--out", tmp_path / "o",
                                "--rank-case", "zigzag_c4096"))
    assert names == {"ring_attention_time_median.png",
                     "ring_attention_pred_bytes_sent_per_rank.png",
                     "ring_attention_pred_max_work_pairs.png",
                     "per_rank_ring_attention_zigzag_c4096.png"}


def test_default_out_dir_beside_file(results_writer):
    path = results_writer("sp.h5", "sp_tp", sp_tp_cases())
    names = _written(run_script("plot.py", path))
    assert (path.parent / "sp_plots" / "sp_tp_time.png").is_file()
    assert "sp_tp_time.png" in names


def test_partial_file_plots_with_warning(results_writer, tmp_path):
    path = results_writer("sp.h5", "sp_tp", sp_tp_cases()[:3], partial=True)
    proc = run_script("plot.py", path, "--out", tmp_path / "o")
    assert "warning:" in proc.stderr and "not complete" in proc.stderr
    assert "sp_tp_time.png" in _written(proc)


def test_unknown_rank_case_is_an_error(results_writer, tmp_path):
    path = results_writer("sp.h5", "sp_tp", sp_tp_cases())
    proc = run_script("plot.py", path, "--out", tmp_path / "o", "--rank-case", "nope")
    assert proc.returncode != 0 and "no case 'nope'" in proc.stderr


def test_help_documents_flags():
    proc = run_script("plot.py", "--help")
    assert proc.returncode == 0
    assert "--out" in proc.stdout and "--rank-case" in proc.stdout


def test_sp_tp_time_figure_content(sp_tp_figures):
    """Both ops on one log2 axis, each with a p10-p90 band; the title names the setup."""
    _, captured = sp_tp_figures("sp.h5", sp_tp_cases())
    ax = captured["sp_tp_time.png"].axes[0]
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels == ["all-reduce", "reduce-scatter + all-gather"]  # legend title: median of each
    assert len(ax.collections) == 2  # the two bands
    assert ax.get_xscale() == "log" and ax.xaxis.get_transform().base == 2
    xs = ax.get_lines()[0].get_xdata()
    assert list(xs) == [1024, 16384, 262144, 4194304]
    title = ax.get_title()
    for word in ("sp_tp", "cpu", "mpi", "loopback", "4 ranks"):
        assert word in title
    bytes_ax = captured["sp_tp_bytes.png"].axes[0]
    assert len(bytes_ax.get_lines()) == 4  # predicted + measured per op


def test_sp_tp_lines_are_named_in_their_legends(results_writer, monkeypatch):
    """Each line of the collectives figures is named by its op (the activation-sized case as
    such); the time figure's p10-p90 bands share one entry, and the bytes figure pairs each
    line's measured markers with its predicted dashes in one entry."""
    from scripts.plots import plot
    from synthetic_results import rank_times

    cases = sp_tp_cases(mode="collectives")
    for op in ("allreduce", "rs_ag"):
        n = 1024 * 1024 * 4
        cases.append({"name": f"{op}_fp32_act_s1024_b1_h1024",
                      "params": {"mode": "collectives", "op": op, "dtype": "fp32", "n_bytes": n,
                                 "s": 1024, "b": 1, "h": 1024},
                      "attrs": {"bytes_sent_per_rank": 1.5 * n, "pred_bytes_sent_per_rank": 1.5 * n,
                                "busbw_GBps": 1.0},
                      "time_s": rank_times(1e-3)})
    path = results_writer("sp.h5", "sp_tp", cases)
    figures = {}
    monkeypatch.setattr(plot, "_save", lambda fig, p, written: figures.__setitem__(p.name, fig))
    plot.make_plots(path, path.parent / "figs")
    lines = ["all-reduce", "all-reduce, activation case s=1024 b=1 h=1024",
             "reduce-scatter + all-gather",
             "reduce-scatter + all-gather, activation case s=1024 b=1 h=1024"]

    def legend(name):
        box = figures[name].axes[0].get_legend()
        return sorted(t.get_text() for t in box.get_texts()), box.get_title().get_text()

    assert legend("sp_tp_time.png") == (sorted(lines + ["p10-p90 band"]), "median of each")
    assert legend("sp_tp_busbw.png") == (sorted(lines), "")
    assert legend("sp_tp_bytes.png") == (sorted(lines), "marker: measured, dashes: predicted")
    # the run's description wraps rather than running off the figure
    title = figures["sp_tp_time.png"].axes[0].get_title()
    assert all(len(line) <= 80 for line in title.splitlines()), title


def test_ulysses_step_bytes_add_the_backward():
    """The bytes above a training step's bar are both passes': 131072 per rank, as the transport
    counted them (bytes_sent) in a 2-rank u=2 fwd_bwd run at s=128, a=2, d=64, fp32."""
    from scripts.plots import plot_ulysses

    step = SimpleNamespace(attrs={"pass": "fwd_bwd", "bytes_sent_per_rank": 65536.0,
                                  "bwd_bytes_sent_per_rank": 65536.0})
    assert plot_ulysses._step_bytes(step) == 131072
    fwd = SimpleNamespace(attrs={"bytes_sent_per_rank": 65536.0, "bwd_bytes_sent_per_rank": 1.0})
    assert plot_ulysses._step_bytes(fwd) == 65536
