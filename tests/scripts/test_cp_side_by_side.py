"""cp_side_by_side.py --tables-only: one row per method from the files of a run, each cell the
busiest rank's bytes (MiB), work max/mean and efficiency of that case, Ulysses marked where the
heads cannot cover the ranks, a method with no case `not run`; bad places refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from synthetic_results import run_script, write_results


def case(name: str, params: dict, sent: float, work: float, eff: float, key: str) -> dict:
    return {"name": name, "params": params, "time_s": np.full((2, 4), 1e-3),
            "attrs": {key: sent, "work_max_over_mean": work, "efficiency_vs_ideal_fwd": eff}}


def test_table_from_the_runs_files(tmp_path: Path) -> None:
    ring_key, uly_key = "bytes_sent_per_rank_per_layer", "bytes_sent_per_rank"
    write_results(tmp_path / "ring_sim64_lognormal-256-1.h5", "ring_attention", [
        case("ring_x", {"variant": "ring"}, 2**30, 1.0, 0.0039, ring_key),
        case("allgather_x", {"variant": "allgather"}, 2**30, 1.0, 0.0038, ring_key),
        case("groupcast_x", {"variant": "groupcast"}, 3 * 2**20, 1.03, 0.967, ring_key)])
    write_results(tmp_path / "ulysses_sim64_lognormal-256-1.h5", "ulysses", [
        case("hyb_ring", {"method": "hybrid", "ring_variant": "ring"}, 5 * 2**20, 1.0, 0.03,
             uly_key)])
    proc = run_script("cp_side_by_side.py", "--where", "sim64", "--docs", "lognormal:256:1",
                      "--out", tmp_path, "--tables-only")
    assert proc.returncode == 0, proc.stderr
    rows = {line.split(" | ")[0].lstrip("| "): line for line in proc.stdout.splitlines()
            if line.startswith("| ")}
    assert "1 GiB · 1.00 · 0.0039" in rows["ring"]
    assert "1 GiB · 1.00 · 0.0038" in rows["all-gather (Llama 3)"]
    assert "3 MiB · 1.03 · 0.967" in rows["group-cast"]
    assert "32 heads < 64 ranks" in rows["Ulysses"]
    assert "5 MiB · 1.00 · 0.03" in rows["hybrid, ring part: ring"]
    assert "not run" in rows["hybrid, ring part: group-cast"]


def test_bad_place(tmp_path: Path) -> None:
    proc = run_script("cp_side_by_side.py", "--where", "gpu8", "--out", tmp_path, "--tables-only")
    assert proc.returncode == 2 and proc.stderr.startswith("error:")
