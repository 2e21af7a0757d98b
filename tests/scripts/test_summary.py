"""summary.py: one line per case with the verdict, key figures and measured/predicted pairs."""

from __future__ import annotations

from pathlib import Path

from synthetic_results import rank_times, run_script, write_results


def ring_case(name: str, check: int) -> dict:
    return {"name": name, "params": {"c": 1024, "layout": "zigzag"},
            "time_s": rank_times(2e-3, world_size=2),
            "attrs": {"check_passed": check, "attn_kernel": "cudnn", "measured_F_flops": 4.5e14,
                      "measured_W_Bps": 2.5e10, "c_star_tokens": 36000.0,
                      "overlapped_over_compute_only": 1.25,
                      "bytes_sent_per_rank_per_layer": 100.0,
                      "pred_bytes_sent_per_rank_per_layer": 100.0}}


def test_ring_key_figures_and_pairs(tmp_path: Path) -> None:
    path = write_results(tmp_path / "ring.h5", "ring_attention", [ring_case("ring_a", 1)], world_size=2)
    proc = run_script("summary.py", path)
    assert proc.returncode == 0, proc.stderr
    line = next(l for l in proc.stdout.splitlines() if l.strip().startswith("ring_a "))
    for text in ("ok", "kernel=cudnn", "F=4.5e+14FLOP/s", "W=2.5e+10B/s", "c*=36000",
                 "overlapped/compute=1.25", "bytes_sent_per_rank_per_layer=100/100"):
        assert text in line, f"{text!r} not in {line!r}"


def test_training_step_shows_its_backward_first(tmp_path: Path) -> None:
    case = ring_case("ring_a_fwd_bwd", 1)
    case["params"]["pass"] = "fwd_bwd"
    case["attrs"].update({"pass": "fwd_bwd", "bwd_measured_F_flops": 9e14, "bwd_c_star_tokens": 40000.0,
                          "bwd_overlapped_over_compute_only": 1.5,
                          "bwd_bytes_sent_per_rank_per_layer": 200.0,
                          "pred_bwd_bytes_sent_per_rank_per_layer": 200.0})
    path = write_results(tmp_path / "ring.h5", "ring_attention", [case], world_size=2)
    proc = run_script("summary.py", path, "--pairs", "1")
    assert proc.returncode == 0, proc.stderr
    line = next(l for l in proc.stdout.splitlines() if l.strip().startswith("ring_a_fwd_bwd "))
    for text in ("F_b=9e+14FLOP/s", "c*_bwd=40000", "bwd overlapped/compute=1.50",
                 "bwd_bytes_sent_per_rank_per_layer=200/200"):
        assert text in line, f"{text!r} not in {line!r}"
    assert "=100/100" not in line  # one pair asked for: the backward's


def test_ring_efficiency_and_its_factors(tmp_path: Path) -> None:
    case = ring_case("ring_docs", 1)
    case["attrs"].update({"efficiency_vs_ideal_fwd": 0.5, "eff_balance": 0.8, "eff_pair_rate": 0.78125,
                          "eff_exchange": 0.8})
    path = write_results(tmp_path / "ring.h5", "ring_attention", [case], world_size=2)
    proc = run_script("summary.py", path)
    assert proc.returncode == 0, proc.stderr
    line = next(l for l in proc.stdout.splitlines() if l.strip().startswith("ring_docs "))
    assert "eff_ideal=0.50 = balance 0.80 x pair rate 0.78 x exchange 0.80" in line, line


def test_failed_check_sets_exit_status(tmp_path: Path) -> None:
    path = write_results(tmp_path / "ring.h5", "ring_attention", [ring_case("ring_bad", 0)], world_size=2)
    proc = run_script("summary.py", path)
    assert proc.returncode == 1
    assert "FAIL" in next(l for l in proc.stdout.splitlines() if l.strip().startswith("ring_bad "))


def test_software_is_listed_under_each_file(tmp_path: Path) -> None:
    path = write_results(tmp_path / "ring.h5", "ring_attention", [ring_case("ring_a", 1)],
                         world_size=2, file_attrs={"gemm_library": "OpenBLAS 0.3.21 SkylakeX, 1 thread"})
    proc = run_script("summary.py", path)
    assert ("  software: MPI Open MPI v4.1.4; NCCL none; CUDA none; GEMM/BLAS OpenBLAS 0.3.21 "
            "SkylakeX, 1 thread; cuDNN none") in proc.stdout.splitlines()


def test_csv_and_json_hold_every_case_without_h5py(tmp_path: Path) -> None:
    path = write_results(tmp_path / "ring.h5", "ring_attention",
                         [ring_case("ring_a", 1), ring_case("ring_b", 0)], world_size=2)
    out_csv, out_json = tmp_path / "s.csv", tmp_path / "s.json"
    proc = run_script("summary.py", path, "--csv", out_csv, "--json", out_json)
    assert proc.returncode == 1, "a failed check is the exit status, as in the text table"
    import csv
    import json

    rows = list(csv.DictReader(out_csv.open()))
    assert [r["case"] for r in rows] == ["ring_a", "ring_b"]
    assert [r["check"] for r in rows] == ["ok", "FAIL"]
    assert rows[0]["bytes_sent_per_rank_per_layer"] == "100.0"
    assert rows[0]["pred_bytes_sent_per_rank_per_layer"] == "100.0"
    assert rows[0]["params"] == "c=1024;layout=zigzag"
    # the median written by the writer: rank_times(2e-3) spreads 0-5% above 2 ms
    assert 2e-3 <= float(rows[0]["median_s"]) <= 2.1e-3
    data = json.loads(out_json.read_text())  # strict JSON: NaN would not parse in browsers
    case = data["files"][0]["cases"][0]
    assert case["predictions"]["bytes_sent_per_rank_per_layer"] == {"measured": 100.0,
                                                                   "predicted": 100.0}
    assert len(case["step_times_s"]) == 20 and case["attrs"]["attn_kernel"] == "cudnn"
    assert data["files"][0]["attrs"]["bench"] == "ring_attention"
    stdout = run_script("summary.py", path, "--csv", "-").stdout
    assert stdout.splitlines()[0].startswith("file,bench,case,params,check,median_s")
