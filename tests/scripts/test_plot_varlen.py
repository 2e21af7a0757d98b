"""plot_varlen.py on the CSV that `model --section varlen --csv` writes: one figure per
distribution, every layout of the file drawn; a file that is not such a CSV is refused."""

from __future__ import annotations

import csv
import os
import subprocess
from pathlib import Path

import pytest

from synthetic_results import run_script

COLUMNS = ("docs,seed,causal,n_c,u,ring_degree,layout,s,c,documents,longest,padding_fraction,"
           "work_max_over_mean,lockstep_blocks,pred_efficiency_lockstep,pred_efficiency_balance,"
           "bytes_per_rank").split(",")


def write_rows(path: Path) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for n in (4, 8, 16):
            for layout, eff in (("contiguous", 4 / (2 * n)), ("striped", 0.99), ("ulysses", 1.0)):
                w.writerow(["lognormal:64:1", 1234, 1, n, n if layout == "ulysses" else 1, 1, layout,
                            256 * n, 256, 3 * n, 300, 0.0, 1 / eff, 1.0, eff, eff, 1e6])


def test_one_figure_per_distribution(tmp_path: Path) -> None:
    rows = tmp_path / "ln.csv"
    write_rows(rows)
    proc = run_script("plot_varlen.py", rows, "--out", tmp_path / "plots")
    assert proc.returncode == 0, proc.stderr
    png = tmp_path / "plots" / "varlen_lognormal-64-1.png"
    assert png.exists() and png.stat().st_size > 10_000


def test_the_real_model_s_csv(tmp_path: Path) -> None:
    model = Path(os.environ.get("SUITE_BIN_DIR", "build/bin")) / "model"
    if not model.exists():
        pytest.skip(f"{model} is not built")
    rows = tmp_path / "model.csv"
    proc = subprocess.run([str(model), "--section", "varlen", "--docs", "pareto:16:1.2", "--cp-sweep", "2:16:x2",
                           "--tokens-per-rank", "128", "--causal", "--heads", "8", "--kv-heads", "8",
                           "--hidden", "512", "--csv", str(rows)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    with open(rows, newline="") as f:
        got = list(csv.DictReader(f))
    assert {r["layout"] for r in got} == {"contiguous", "zigzag", "striped", "doc_zigzag", "balanced", "ulysses"}
    assert sorted({int(r["n_c"]) for r in got}) == [2, 4, 8, 16]
    proc = run_script("plot_varlen.py", rows, "--out", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "varlen_pareto-16-1.2.png").exists()


def test_a_file_that_is_not_the_model_s_csv_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    proc = run_script("plot_varlen.py", bad, "--out", tmp_path)
    assert proc.returncode != 0 and "is not a CSV of `model --section varlen --csv`" in proc.stderr


def test_measured_points_keep_only_cases_of_the_csv_s_curves(tmp_path: Path) -> None:
    """A ring case with the other mask or another c is no point of the CSV's curves."""
    from scripts.plots.plot_varlen import measured_points, read_rows
    from synthetic_results import rank_times, write_results

    csv_path = tmp_path / "lognormal.csv"
    write_rows(csv_path)  # causal, c = 256, N_c 4..16

    def case(name: str, causal: int, c: int, eff: float) -> dict:
        return {"name": name,
                "params": {"variant": "ring", "layout": "striped", "causal": causal, "c": c, "n_c": 4,
                           "docs": "lognormal:64:1", "dtype": "fp32"},
                "attrs": {"check_passed": 1, "efficiency_vs_ideal_fwd": eff},
                "time_s": rank_times(1e-3)}

    h5 = write_results(tmp_path / "ring.h5", "ring_attention",
                       [case("ring_striped_causal_c256", 1, 256, 0.8),
                        case("ring_striped_full_c256", 0, 256, 0.3),
                        case("ring_striped_causal_c1024", 1, 1024, 0.5)])
    assert measured_points([h5], read_rows(csv_path)) == {"striped": [(4, 0.8)]}
