"""blas_core_rates.py: the table of kernel_bench's rates over numpy's, on hand-made figures."""

from __future__ import annotations

from scripts.studies.blas_core_rates import main, table


def test_each_rate_over_numpys_gemm_first():
    runs = {"library's pick": ("Prescott", {"attention_cpu_fp32_a": 14e9, "gemm_cpu_fp32_n1024": 28e9}),
            "suite's choice": ("SkylakeX", {"attention_cpu_fp32_a": 70e9, "gemm_cpu_fp32_n1024": 133e9})}
    lines = table(140e9, "numpy 2.1.3 scipy-openblas 0.3.27", runs).splitlines()
    assert lines[0] == "numpy single-thread SGEMM n=1024: 140.0 GFLOP/s (numpy 2.1.3 scipy-openblas 0.3.27)"
    rows = [line.split() for line in lines[3:]]
    assert [(r[0], r[1], r[-2], r[-1]) for r in rows] == [
        ("gemm_cpu_fp32_n1024", "Prescott", "28.0", "0.20"),
        ("attention_cpu_fp32_a", "Prescott", "14.0", "0.10"),
        ("gemm_cpu_fp32_n1024", "SkylakeX", "133.0", "0.95"),
        ("attention_cpu_fp32_a", "SkylakeX", "70.0", "0.50")]


def test_rounds_below_one_refused(capsys):
    assert main(["--rounds", "0"]) == 2
    assert "--rounds 0" in capsys.readouterr().err
