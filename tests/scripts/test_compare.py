"""compare.py: exit status and verdicts."""

from __future__ import annotations

import json

from synthetic_results import group_attrs, ring_cases, run_script, sp_tp_cases


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


def test_same_name_other_params_are_not_compared(results_writer, tmp_path):
    # ring_attention with --cp 1 (two groups of one rank) and without (one group of 2): the
    # case names are the same, n_c is only a parameter. Twice as slow must not be a verdict.
    base = results_writer("cp1.h5", "ring_attention", ring_cases(1), world_size=2,
                          file_attrs=group_attrs(1, 2))
    cand = results_writer("cp2.h5", "ring_attention", ring_cases(2, scale=2.0), world_size=2,
                          file_attrs=group_attrs(2, 2))
    verdict = tmp_path / "v.json"
    proc = run_script("compare.py", base, cand, "--verdict", verdict)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "REGRESSION" not in proc.stdout and "2.000" not in proc.stdout
    assert ("not comparable:    ring_attention/ring_contiguous_causal_fp32_c1024_a8_d64 "
            "(parameters differ, baseline != candidate: s: 1024 != 2048; n_c: 1 != 2; "
            "cp_groups: 2 != 1)") in proc.stdout
    assert "0 compared" in proc.stdout and "2 not comparable" in proc.stdout
    assert "group_size: 1 != 2" in proc.stderr and "group_count: 2 != 1" in proc.stderr
    assert "no case of the two runs could be compared" in proc.stderr
    v = json.loads(verdict.read_text())
    assert v["cases"] == [] and v["regressions"] == []
    assert [c["case"] for c in v["not_comparable"]] == [
        "ring_attention/ring_contiguous_causal_fp32_c1024_a8_d64",
        "ring_attention/ring_contiguous_causal_fp32_c4096_a8_d64"]
    assert "n_c: 1 != 2" in v["not_comparable"][0]["differences"]


def test_a_parameter_one_file_lacks_makes_a_case_not_comparable(results_writer):
    base = results_writer("old.h5", "ring_attention", ring_cases(2), world_size=2)
    cand = results_writer("new.h5", "ring_attention",
                          ring_cases(2, scale=2.0, extra_params={"attn_kernel_choice": "auto"}),
                          world_size=2, file_attrs=group_attrs(2, 2))
    proc = run_script("compare.py", base, cand)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "attn_kernel_choice: (absent) != 'auto'" in proc.stdout
    assert "REGRESSION" not in proc.stdout and "2 not comparable" in proc.stdout
    # no group attributes in the older file: one group of world_size, same as the newer one
    assert "group_size" not in proc.stderr
    # the user may let a parameter differ
    proc = run_script("compare.py", base, cand, "--ignore-param", "attn_kernel_choice")
    assert proc.returncode == 1 and proc.stdout.count("REGRESSION") == 2
    assert "0 not comparable" in proc.stdout


def test_not_comparable_case_failing_its_check_is_a_failure(results_writer):
    base = results_writer("cp1.h5", "ring_attention", ring_cases(1), world_size=2,
                          file_attrs=group_attrs(1, 2))
    cand = results_writer("cp2.h5", "ring_attention", ring_cases(2, check=0), world_size=2,
                          file_attrs=group_attrs(2, 2))
    proc = run_script("compare.py", base, cand)
    assert proc.returncode == 1 and "2 check failure(s)" in proc.stdout
    assert proc.stdout.count("CHECK FAILED") == 2


def test_different_benches_exit_2(results_writer, tmp_path):
    sp_tp = results_writer("sp_tp.h5", "sp_tp", sp_tp_cases(), world_size=4)
    ring = results_writer("ring.h5", "ring_attention", ring_cases(4, world_size=4))
    verdict = tmp_path / "v.json"
    proc = run_script("compare.py", sp_tp, ring, "--verdict", verdict)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "sp_tp" in errors[0] and "ring_attention" in errors[0]
    assert "verdict" not in proc.stdout and not verdict.exists()
