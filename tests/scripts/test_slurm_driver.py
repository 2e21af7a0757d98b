"""slurm/lib/run_bench.sh's choice of transport for GPU jobs, from what the build recorded
(bin/suite_features.txt), with the launcher and the benchmark stubbed: a build without NCCL runs
its jobs on MPI and says why, TRANSPORT=nccl on such a build or a GPU job of a build without
CUDA stops before anything is launched; and a compute node whose Python lacks h5py leaves the
steps that read the results for the login node."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NO_NCCL = "no NCCL here (stand-in line): use mpi"
NO_CUDA = "no CUDA here (stand-in line): SUITE_MODE=cpu"


def _executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _job(tmp_path: Path, features: str | None, python: str = sys.executable,
         **env: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Runs suite_main for sp_tp in GPU mode through a stub mpirun and a stub sp_tp that logs its
    flags and writes its --out file; returns the process and the log."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls"
    _executable(bin_dir / "sp_tp", f'#!/bin/bash\necho "$@" >> {log}\n'
                'while [ $# -gt 0 ]; do [ "$1" = --out ] && : > "$2"; shift; done\n')
    if features is not None:
        (bin_dir / "suite_features.txt").write_text(features)
    tools = tmp_path / "tools"
    tools.mkdir()
    _executable(tools / "mpirun", '#!/bin/bash\nwhile [ "${1:0:1}" != / ]; do shift; done\nexec "$@"\n')
    run_env = dict(os.environ, BIN_DIR=str(bin_dir), RESULTS_ROOT=str(tmp_path / "results"),
                   PYTHON=python, LAUNCHER="mpirun", COMPARE="0", PLOT="0", WIRE="0",
                   SUITE_ROOT=str(ROOT), PATH=f"{tools}:{os.environ['PATH']}")
    for name in ("TRANSPORT", "SUITE_MODE", "SLURM_JOB_ID", "SLURM_ARRAY_TASK_ID"):
        run_env.pop(name, None)
    run_env.update(env)
    proc = subprocess.run(["bash", "-c", "source slurm/lib/run_bench.sh; suite_main sp_tp nvlink"],
                          cwd=ROOT, env=run_env, capture_output=True, text=True, timeout=60)
    return proc, log


def _flag(log: Path, name: str) -> str:
    words = log.read_text().split()
    return words[words.index(name) + 1]


def test_a_build_with_nccl_runs_on_nccl(tmp_path):
    proc, log = _job(tmp_path, "cuda=ON\nnccl=ON\n")
    assert proc.returncode == 0, proc.stderr
    assert _flag(log, "--transport") == "nccl" and _flag(log, "--backend") == "cuda"


def test_a_build_without_nccl_runs_on_mpi_and_says_why(tmp_path):
    proc, log = _job(tmp_path, f"cuda=ON\nnccl=OFF\nnccl_off={NO_NCCL}\n")
    assert proc.returncode == 0, proc.stderr
    assert _flag(log, "--transport") == "mpi"
    assert f"note: {NO_NCCL}" in proc.stderr


@pytest.mark.parametrize("features, env, needle", [
    (f"cuda=ON\nnccl=OFF\nnccl_off={NO_NCCL}\n", {"TRANSPORT": "nccl"}, f"TRANSPORT=nccl, but {NO_NCCL}"),
    (f"cuda=OFF\nnccl=OFF\ncuda_off={NO_CUDA}\n", {}, NO_CUDA),
])
def test_a_job_the_build_cannot_run_stops_before_launching(tmp_path, features, env, needle):
    proc, log = _job(tmp_path, features, **env)
    assert proc.returncode == 2, proc.stderr
    assert needle in proc.stderr and "suite_features.txt" in proc.stderr
    assert not log.exists()


def test_a_build_without_a_record_keeps_the_nccl_default(tmp_path):
    proc, log = _job(tmp_path, None)
    assert proc.returncode == 0, proc.stderr
    assert _flag(log, "--transport") == "nccl"


def test_a_node_without_h5py_leaves_compare_and_plots_to_the_login_node(tmp_path):
    bare = _executable(tmp_path / "python", f"#!/bin/bash\ncase \"$*\" in *'import h5py'*) exit 1;; esac\n"
                       f"exec {sys.executable} \"$@\"\n")
    proc, log = _job(tmp_path, "cuda=ON\nnccl=ON\n", python=str(bare), COMPARE="auto", PLOT="1")
    assert proc.returncode == 0, proc.stderr
    assert "has no h5py here" in proc.stdout and "compare exit status" not in proc.stdout
    (tmp_path / "again").mkdir()
    proc, _ = _job(tmp_path / "again", "cuda=ON\nnccl=ON\n", python=str(bare), COMPARE="1")
    assert proc.returncode == 2 and "COMPARE=1 needs h5py" in proc.stderr
