"""The environment fingerprint (scripts/results/fingerprint.py) and its difference from the
baseline's on each verdict line."""

from __future__ import annotations

import shutil
from pathlib import Path

import h5py

from scripts.results import run_verdict
from scripts.results.baselines import add_baseline
from scripts.results.fingerprint import fingerprint, fingerprint_diff
from scripts.results.suite_results import read_results
from synthetic_results import REPO

ULYSSES = (REPO / "results" / "baselines" / "Intel-Xeon-Processor-2-cores_x4_loopback_mpi_cpu_fp32"
           / "ulysses.h5")


def copy_with(path: Path, attrs: dict) -> Path:
    """A copy of a real results file with some file attributes set."""
    shutil.copy(ULYSSES, path)
    with h5py.File(path, "r+") as f:
        for name, value in attrs.items():
            f.attrs[name] = value
    return path


def test_the_fields_that_differ_are_named_and_absent_ones_are_not(tmp_path):
    base = read_results(copy_with(tmp_path / "a.h5", {"hostnames": "n1,n2"}),
                        load_datasets=False)
    cand = read_results(copy_with(tmp_path / "b.h5", {
        "hostnames": "n1,n3", "nccl_version": "2.21.5", "git_commit": "0123456789ab",
        "cpu_model": "Intel Xeon", "cpu_flags": "sse avx2 avx512f"}), load_datasets=False)
    assert fingerprint(base)["node_count"] == 2  # from hostnames: the file predates node_count
    assert fingerprint_diff(base, cand) == [
        "NCCL: none -> 2.21.5", "hosts: +n3 -n2", "commit: cf8f23ac3750 -> 0123456789ab"]


def test_each_verdict_line_names_what_differs_from_the_baseline(tmp_path, capsys):
    registry, run = tmp_path / "registry", tmp_path / "run"
    run.mkdir()
    add_baseline(copy_with(tmp_path / "ulysses.h5", {}), registry)
    copy_with(run / "ulysses.h5", {"mpi_version": "Open MPI v5.0.3", "git_commit": "feedbeef0000"})
    assert run_verdict.main([str(run), "--registry", str(registry)]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "ulysses.h5" in ln)
    assert line.endswith("differs from the baseline in MPI: Open MPI v4.1.4 -> Open MPI v5.0.3, "
                         "commit: cf8f23ac3750 -> feedbeef0000"), line
