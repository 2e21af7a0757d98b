"""compare.py against the registry, and regressions judged against the per-iteration noise."""

from __future__ import annotations

import json

import numpy as np

from synthetic_results import run_script, sp_tp_cases


def _noisy_cases(spread: float, scale: float = 1.0, seed: int = 0, iterations: int = 40):
    """Two cases whose per-iteration step times spread uniformly over +-spread around
    `scale` ms."""
    rng = np.random.default_rng(seed)
    cases = []
    for name in ("allreduce_fp32_n1K", "rs_ag_fp32_n1K"):
        step = scale * 1e-3 * (1 + spread * (2 * rng.random(iterations) - 1))
        time_s = np.repeat(step[:, None], 4, axis=1) * np.array([1.0, 0.99, 0.98, 0.97])
        cases.append({"name": name, "params": {"op": name.split("_")[0], "n_bytes": 1024},
                      "time_s": time_s})
    return cases


def test_slowdown_outside_the_noise_is_a_regression(results_writer, tmp_path):
    base = results_writer("base.h5", "sp_tp", _noisy_cases(0.02))
    cand = results_writer("cand.h5", "sp_tp", _noisy_cases(0.02, scale=1.2, seed=1))
    verdict = tmp_path / "v.json"
    proc = run_script("compare.py", base, cand, "--verdict", verdict)
    assert proc.returncode == 1, proc.stdout
    assert proc.stdout.count("REGRESSION") == 2 and "verdict: regression" in proc.stdout
    v = json.loads(verdict.read_text())
    assert v["verdict"] == "regression" and len(v["regressions"]) == 2
    assert all(0.005 < c["noise"] < 0.03 and 1.15 < c["ratio"] < 1.25 for c in v["cases"])


def test_same_slowdown_inside_the_noise_is_not(results_writer, tmp_path):
    # +-60% per-iteration spread: p10..p90 half-width about 48%, above the 20% slowdown.
    base = results_writer("base.h5", "sp_tp", _noisy_cases(0.6))
    cand = results_writer("cand.h5", "sp_tp", _noisy_cases(0.6, scale=1.2, seed=0))
    proc = run_script("compare.py", base, cand)
    assert proc.returncode == 0, proc.stdout
    assert "REGRESSION" not in proc.stdout
    assert proc.stdout.count("slower (noise)") == 2 and "2 within noise" in proc.stdout
    # a bigger slowdown clears the same noise
    worse = results_writer("worse.h5", "sp_tp", _noisy_cases(0.6, scale=3.0, seed=0))
    assert run_script("compare.py", base, worse).returncode == 1
    # --noise-k 0 judges by the threshold alone
    assert run_script("compare.py", base, cand, "--noise-k", "0").returncode == 1


def test_registry_picks_the_baseline(results_writer, tmp_path):
    reg = tmp_path / "reg"
    reg.mkdir()
    results_writer("reg/other.h5", "sp_tp", sp_tp_cases(scale=0.1), file_attrs={"link": "net"})
    base = results_writer("reg/base.h5", "sp_tp", sp_tp_cases())
    cand = results_writer("cand.h5", "sp_tp", sp_tp_cases(scale=1.2))
    verdict = tmp_path / "cand.compare.json"
    proc = run_script("compare.py", cand, "--registry", reg, "--verdict", verdict)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"baseline:  {base}" in proc.stdout and "cpu_x4_loopback_mpi_cpu_fp32" in proc.stdout
    v = json.loads(verdict.read_text())
    assert v["baseline"] == str(base) and v["system"] == "cpu_x4_loopback_mpi_cpu_fp32"
    assert proc.stdout.count("REGRESSION") == 8


def test_no_matching_baseline(results_writer, tmp_path):
    (tmp_path / "reg").mkdir()
    cand = results_writer("cand.h5", "sp_tp", sp_tp_cases())
    verdict = tmp_path / "v.json"
    proc = run_script("compare.py", cand, "--registry", tmp_path / "reg", "--verdict", verdict)
    assert proc.returncode == 0 and "no baseline" in proc.stdout
    assert json.loads(verdict.read_text())["verdict"] == "no-baseline"
    proc = run_script("compare.py", cand, "--registry", tmp_path / "reg", "--require-baseline")
    assert proc.returncode == 2


def test_new_and_missing_cases_are_listed_not_fatal(results_writer, tmp_path):
    reg = tmp_path / "reg"
    reg.mkdir()
    results_writer("reg/base.h5", "sp_tp", sp_tp_cases()[:6])
    cand = results_writer("cand.h5", "sp_tp", sp_tp_cases()[2:])
    proc = run_script("compare.py", cand, "--registry", reg)
    assert proc.returncode == 0, proc.stdout
    assert "only in baseline:  sp_tp/allreduce_fp32_n1024" in proc.stdout
    assert "only in candidate: sp_tp/rs_ag_fp32_n4194304" in proc.stdout
