"""compare.py: exit status and verdicts."""

from __future__ import annotations

from synthetic_results import run_script, sp_tp_cases


def test_identical_files_pass(results_writer):
    a = results_writer("a.h5", "sp_tp", sp_tp_cases())
    b = results_writer("b.h5", "sp_tp", sp_tp_cases())
    proc = run_script("compare.py", a, b)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "REGRESSION" not in proc.stdout
    assert "8 compared, 0 regression(s)" in proc.stdout
    assert proc.stdout.count("1.000") == 8


def test_twenty_percent_slowdown_fails(results_writer):
    a = results_writer("a.h5", "sp_tp", sp_tp_cases())
    b = results_writer("b.h5", "sp_tp", sp_tp_cases(scale=1.2))
    proc = run_script("compare.py", a, b)
    assert proc.returncode == 1
    assert proc.stdout.count("REGRESSION") == 8
    assert "1.200" in proc.stdout


def test_threshold_flag(results_writer):
    a = results_writer("a.h5", "sp_tp", sp_tp_cases())
    b = results_writer("b.h5", "sp_tp", sp_tp_cases(scale=1.2))
    assert run_script("compare.py", a, b, "--threshold", "0.25").returncode == 0
    assert run_script("compare.py", a, b, "--threshold", "-1").returncode == 2


def test_speedup_is_an_improvement(results_writer):
    a = results_writer("a.h5", "sp_tp", sp_tp_cases())
    b = results_writer("b.h5", "sp_tp", sp_tp_cases(scale=0.8))
    proc = run_script("compare.py", a, b)
    assert proc.returncode == 0
    assert proc.stdout.count("improvement") >= 8


def test_check_turned_to_zero_fails(results_writer):
    a = results_writer("a.h5", "sp_tp", sp_tp_cases(check=1))
    b = results_writer("b.h5", "sp_tp", sp_tp_cases(check=0))
    proc = run_script("compare.py", a, b)
    assert proc.returncode == 1
    assert "pass -> FAIL  CHECK FAILED" in proc.stdout
    assert "0 regression(s)" in proc.stdout and "8 check failure(s)" in proc.stdout


def test_check_off_is_not_a_failure(results_writer):
    a = results_writer("a.h5", "sp_tp", sp_tp_cases(check=1))
    b = results_writer("b.h5", "sp_tp", sp_tp_cases(check=-1))
    assert run_script("compare.py", a, b).returncode == 0


def test_cases_in_one_file_only_and_config_warning(results_writer):
    a = results_writer("a.h5", "sp_tp", sp_tp_cases()[:6])
    b = results_writer("b.h5", "sp_tp", sp_tp_cases()[2:],
                       file_attrs={"world_size": 8, "transport": "nccl"})
    proc = run_script("compare.py", a, b)
    assert proc.returncode == 0
    assert "only in baseline:  sp_tp/allreduce_fp32_n1024" in proc.stdout
    assert "only in candidate: sp_tp/rs_ag_fp32_n4194304" in proc.stdout
    assert "world_size: 4 != 8" in proc.stderr and "transport" in proc.stderr


def test_partial_candidate_warns(results_writer):
    a = results_writer("a.h5", "sp_tp", sp_tp_cases())
    b = results_writer("b.h5", "sp_tp", sp_tp_cases()[:2], partial=True)
    proc = run_script("compare.py", a, b)
    assert proc.returncode == 0
    assert "not complete" in proc.stderr
