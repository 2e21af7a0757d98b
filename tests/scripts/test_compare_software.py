"""compare.py: the software a verdict was reached with (MPI, NCCL, CUDA, cuDNN, GEMM/BLAS and a
case's own library) printed beside it, and a change between baseline and run named next to
the regressions."""

from __future__ import annotations

import json

from synthetic_results import ring_cases, run_script, sp_tp_cases

CPU = "Intel(R) Xeon(R) Processor (2 cores)"
OLD = {"device_names": CPU, "mpi_version": "Open MPI v4.1.4",
       "gemm_library": "OpenBLAS 0.3.21 SkylakeX, 1 thread"}
NEW = {**OLD, "mpi_version": "Open MPI v5.0.3"}


def test_unchanged_software_is_shown_beside_every_verdict(results_writer):
    a = results_writer("a.h5", "sp_tp", sp_tp_cases(), file_attrs=OLD)
    b = results_writer("b.h5", "sp_tp", sp_tp_cases(scale=1.2), file_attrs=OLD)
    proc = run_script("compare.py", a, b)
    assert proc.returncode == 1
    software = proc.stdout.split("software (not part of the system; baseline -> candidate):\n")[1]
    assert software.splitlines()[:5] == [
        "  MPI        Open MPI v4.1.4", "  NCCL       none", "  CUDA       none",
        "  GEMM/BLAS  OpenBLAS 0.3.21 SkylakeX, 1 thread", "  cuDNN      none"]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("sp_tp/")]
    assert len(rows) == 8 and all(r.endswith("REGRESSION  pass -> pass  same") for r in rows)
    assert "CHANGED" not in proc.stdout and "other software" not in proc.stdout
    assert proc.stdout.rstrip().endswith("verdict: regression")


def test_an_mpi_upgrade_is_named_next_to_the_regressions(results_writer, tmp_path):
    a = results_writer("a.h5", "sp_tp", sp_tp_cases(), file_attrs=OLD)
    b = results_writer("b.h5", "sp_tp", sp_tp_cases(scale=1.2), file_attrs=NEW)
    verdict = tmp_path / "v.json"
    proc = run_script("compare.py", a, b, "--verdict", verdict)
    assert proc.returncode == 1, proc.stdout
    assert "  MPI        Open MPI v4.1.4 -> Open MPI v5.0.3  CHANGED" in proc.stdout
    rows = [line for line in proc.stdout.splitlines() if line.startswith("sp_tp/")]
    assert all(r.endswith("REGRESSION  pass -> pass  changed: MPI") for r in rows)
    assert ("8 slower case(s) (8 regression(s)) ran with other software than the baseline:\n"
            "  MPI: Open MPI v4.1.4 -> Open MPI v5.0.3") in proc.stdout
    assert proc.stdout.rstrip().endswith("verdict: regression (software changed: MPI)")
    v = json.loads(verdict.read_text())
    assert v["software"]["changed"] == ["MPI: Open MPI v4.1.4 -> Open MPI v5.0.3"]
    assert v["software"]["baseline"]["MPI"] == "Open MPI v4.1.4"
    assert all(c["software_changed"] == v["software"]["changed"] for c in v["cases"])


def test_a_case_own_library_change_is_named(results_writer):
    # ring attention on the suite's kernel, then on cuDNN: the file's cuDNN and the case's
    # attention library both change; only the slower case is named with it.
    suite = {"attn_library": "suite"}
    cudnn = {"attn_library": "cudnn 9.19.0 (/usr/lib/libcudnn.so.9; built against 9.19.0, "
                             "frontend 1.14.0)"}
    base = ring_cases(2, scale=1.0)
    cand = ring_cases(2, scale=1.0)
    for spec in base:
        spec["attrs"].update(suite)
    cand[0]["attrs"].update(cudnn)
    cand[1]["attrs"].update(suite)
    cand[0]["time_s"] = cand[0]["time_s"] * 1.5
    a = results_writer("a.h5", "ring_attention", base, world_size=2)
    b = results_writer("b.h5", "ring_attention", cand, world_size=2)
    proc = run_script("compare.py", a, b)
    assert proc.returncode == 1, proc.stdout
    assert "  cuDNN      none -> cudnn 9.19.0  CHANGED" in proc.stdout
    rows = {line.split()[0]: line for line in proc.stdout.splitlines()
            if line.startswith("ring_attention/")}
    slow, same = (rows[f"ring_attention/ring_contiguous_causal_fp32_c{c}_a8_d64"]
                  for c in (1024, 4096))
    assert "REGRESSION" in slow and slow.endswith("changed: cuDNN, attention")
    assert "REGRESSION" not in same and same.endswith("changed: cuDNN")
    assert ("REGRESSION: ring_attention/ring_contiguous_causal_fp32_c1024_a8_d64 x1.500, its own "
            "library changed: attention: suite -> cudnn 9.19.0 (/usr/lib/libcudnn.so.9") \
        in proc.stdout


def test_a_version_one_file_did_not_record_is_not_a_change(results_writer):
    older = {k: v for k, v in OLD.items() if k != "gemm_library"}
    a = results_writer("a.h5", "sp_tp", sp_tp_cases(), file_attrs=older)
    b = results_writer("b.h5", "sp_tp", sp_tp_cases(), file_attrs=OLD)
    proc = run_script("compare.py", a, b)
    assert proc.returncode == 0, proc.stdout
    assert ("  GEMM/BLAS  (not recorded) -> OpenBLAS 0.3.21 SkylakeX, 1 thread\n"
            in proc.stdout)
    assert "CHANGED" not in proc.stdout and "software changed" not in proc.stdout


def test_a_cpu_run_from_before_the_cpu_model_is_flagged(results_writer):
    a = results_writer("a.h5", "sp_tp", sp_tp_cases())  # device_names `cpu`
    b = results_writer("b.h5", "sp_tp", sp_tp_cases(), file_attrs={"device_names": CPU})
    proc = run_script("compare.py", a, b)
    assert "warning: the runs differ" not in proc.stderr  # device_names is not a config key
    assert "baseline " in proc.stderr and "device_names is `cpu`" in proc.stderr
    assert "candidate " not in proc.stderr
