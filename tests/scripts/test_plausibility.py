"""Plausibility guards (scripts/results/plausibility.py): the device table agrees with the C++
one; doctored copies of the registry's real files (a FLOP rate past the device's peak, a bus
bandwidth past a simulated link, memory past the device's) are `invalid` with the limit named,
in the verdict `make run` prints, never an improvement; the real files pass."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import h5py

from scripts.results import run_verdict
from scripts.results.baselines import add_baseline
from scripts.results.plausibility import DEVICE_PEAKS, check_limits, device_peak_flops
from scripts.results.suite_results import read_results
from synthetic_results import REPO

REGISTRY = REPO / "results" / "baselines"
KERNELS = REGISTRY / "Intel-Xeon-Processor-2-cores_x1_none_none_cpu_per-case" / "kernel_bench.h5"
COLLECTIVES = REGISTRY / "Intel-Xeon-Processor-2-cores_x4_loopback_mpi_cpu_fp32" / "sp_tp_collectives.h5"
GEMM = "gemm_cpu_fp32_n1024"


def header_rules() -> list[tuple[tuple[tuple[str, ...], ...], float, float]]:
    """gpu_peak_flops()'s rules as written in common/device/device_peak.hpp."""
    text = (REPO / "common" / "device" / "device_peak.hpp").read_text()
    body = text.split("gpu_peak_flops")[1].split("return 0.0;\n}")[0]
    rules = []
    for cond, ret in re.findall(r"if \((.*?)\) return (.*?);", body):
        alternatives = tuple(tuple(re.findall(r'has\("([^"]+)"\)', alt)) for alt in cond.split("||"))
        numbers = re.findall(r"bf16 \? ([0-9.e]+) : fp32 \? ([0-9.e]+)", ret)
        bf16, fp32 = map(float, numbers[0]) if numbers else (0.0, 0.0)
        rules.append((alternatives, bf16, fp32))
    return rules


def test_device_table_mirrors_the_cpp_header():
    assert header_rules() == list(DEVICE_PEAKS)
    assert device_peak_flops("NVIDIA H200", "bf16") == 989e12  # the header's H200 (SXM) figure
    assert device_peak_flops("NVIDIA H100 NVL", "bf16") == 0.0


def test_the_real_files_pass():
    for path in REGISTRY.rglob("*.h5"):
        assert check_limits(read_results(path, load_datasets=False, warn=False)) == [], path


def doctor(path: Path, file_attrs: dict, case: str | None = None,
           case_attrs: dict | None = None) -> Path:
    with h5py.File(path, "r+") as f:
        for name, value in file_attrs.items():
            f.attrs[name] = value
        if case:
            group = f[f.attrs["bench"]][case]
            for name, value in (case_attrs or {}).items():
                group.attrs[name] = value
    return path


def judged(tmp_path: Path, source: Path, file_attrs: dict, case: str,
           case_attrs: dict, capsys) -> tuple[str, dict]:
    """The source doctored into a baseline (file_attrs) and a candidate (file_attrs and the
    case's case_attrs), judged by run-verdict: its line for the candidate, and its record."""
    registry, run = tmp_path / "registry", tmp_path / "run"
    run.mkdir()
    base = doctor(Path(shutil.copy(source, tmp_path / source.name)), file_attrs)
    add_baseline(base, registry)
    cand = doctor(Path(shutil.copy(source, run / source.name)), file_attrs, case, case_attrs)
    capsys.readouterr()
    assert run_verdict.main([str(run), "--registry", str(registry), "--strict"]) == 1
    line = next(ln for ln in capsys.readouterr().out.splitlines() if source.name in ln)
    return line, json.loads(cand.with_name(cand.stem + ".compare.json").read_text())


def test_flops_past_the_device_peak_is_invalid_not_an_improvement(tmp_path, capsys):
    gpu = {"device_names": "NVIDIA H200"}
    with h5py.File(KERNELS) as f:
        median = float(f["kernel_bench"][GEMM].attrs["time_median_s"])
    line, record = judged(tmp_path, KERNELS, gpu, GEMM,
                          {"flops_per_s": 134e12, "time_median_s": median / 4}, capsys)
    assert "1 invalid figure" in line and f"kernel_bench/{GEMM} flops_per_s 1.34e+14" in line
    assert "6.7e+13" in line and "device table: NVIDIA H200 fp32" in line, line
    status = {c["case"]: c["status"] for c in record["cases"]}
    assert status[f"kernel_bench/{GEMM}"] == "INVALID"
    assert record["verdict"] == "invalid"
    assert [f["figure"] for f in record["invalid"]] == ["flops_per_s"]


def test_a_recorded_peak_is_the_limit(tmp_path, capsys):
    line, record = judged(tmp_path, KERNELS, {}, GEMM,
                          {"peak_flops": 20e9, "flops_per_s": 27e9}, capsys)
    assert "past the limit 2e+10: peak_flops recorded with the case" in line, line


def test_busbw_past_a_simulated_link_is_invalid(tmp_path, capsys):
    sim = {"simulated": 1, "sim_platform": "flat", "sim_compute_mode": "modeled",
           "sim_platform_detail": "flat: 4 hosts on a crossbar, links 5e+09 B/s 5e-06 s, "
                                  "speed 1e+10 FLOP/s"}
    case = "allreduce_fp32_act_s1024_b1_h1024"
    line, record = judged(tmp_path, COLLECTIVES, sim, case, {"busbw_GBps": 7.5}, capsys)
    assert f"sp_tp/{case} busbw_GBps 7.5e+09 past the limit 5e+09" in line
    assert "simulated platform's fastest link" in line, line


def test_memory_past_the_device_is_invalid(tmp_path):
    attr = "memory_method_bytes"
    path = doctor(Path(shutil.copy(COLLECTIVES, tmp_path / "c.h5")),
                  {"device_names": "NVIDIA H100 80GB HBM3", "backend": "cuda"},
                  "allreduce_fp32_act_s1024_b1_h1024", {attr: 90e9})
    found = check_limits(read_results(path, load_datasets=False, warn=False))
    assert [(f.figure, f.limit) for f in found] == [(attr, 80 * 2**30)]
