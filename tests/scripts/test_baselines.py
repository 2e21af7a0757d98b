"""baselines.py: registry keyed by system; the baseline picked for a run."""

from __future__ import annotations

import filecmp
import shutil
import subprocess
import sys
from pathlib import Path

from scripts.results import baselines
from scripts.results.suite_results import read_results
from synthetic_results import (REPO, group_attrs, ring_cases, run_script, sp_tp_cases, write_results,
                               write_run)


def _read(path):
    return read_results(path, load_datasets=False, warn=False)


def test_add_stores_under_the_system_key(results_writer, tmp_path):
    run = results_writer("run.h5", "sp_tp", sp_tp_cases(mode="collectives"),
                         file_attrs={"link": "nvlink", "dtype": "fp32"})
    registry = tmp_path / "reg"
    proc = run_script("baselines.py", "add", run, "--registry", registry)
    assert proc.returncode == 0, proc.stderr
    stored = registry / "cpu_x4_nvlink_mpi_cpu_fp32" / "run.h5"  # the results file's own name
    assert proc.stdout.strip() == str(stored) and stored.is_file()
    # a second add of the same system needs --force
    assert run_script("baselines.py", "add", run, "--registry", registry).returncode == 2
    assert run_script("baselines.py", "add", run, "--registry", registry, "--force").returncode == 0
    listing = run_script("baselines.py", "list", "--registry", registry).stdout
    assert "cpu_x4_nvlink_mpi_cpu_fp32" in listing and "sp_tp" in listing


def test_incomplete_run_is_not_a_baseline(results_writer, tmp_path):
    run = results_writer("run.h5", "sp_tp", sp_tp_cases()[:2], partial=True)
    proc = run_script("baselines.py", "add", run, "--registry", tmp_path / "reg")
    assert proc.returncode == 2 and "not a complete run" in proc.stderr


def test_find_matches_system_bench_and_cases(results_writer, tmp_path):
    reg = tmp_path / "reg"
    reg.mkdir()
    cases = sp_tp_cases()
    # Same bench, other systems: another link, another world size, another dtype.
    results_writer("reg/other_link.h5", "sp_tp", cases, file_attrs={"link": "net"})
    results_writer("reg/other_ws.h5", "sp_tp", sp_tp_cases(world_size=8), world_size=8)
    results_writer("reg/other_dtype.h5", "sp_tp", cases, file_attrs={"dtype": "fp64"})
    # Same system: one sharing 2 cases, an older and a newer one sharing all 8.
    results_writer("reg/few.h5", "sp_tp", cases[:2], created_utc="2025-03-01T00:00:00Z")
    results_writer("reg/old.h5", "sp_tp", cases, created_utc="2025-01-01T00:00:00Z")
    newest = results_writer("reg/new.h5", "sp_tp", cases, created_utc="2025-02-01T00:00:00Z")
    run = results_writer("run.h5", "sp_tp", cases, created_utc="2025-04-01T00:00:00Z")
    choice = baselines.find_baseline(_read(run), reg)
    assert choice is not None and choice.path == newest and choice.shared_cases == 8
    assert run_script("baselines.py", "find", run, "--registry", reg).stdout.strip() == str(newest)
    other = results_writer("run_tcp.h5", "sp_tp", cases, file_attrs={"link": "tcp"})
    assert baselines.find_baseline(_read(other), reg) is None
    assert run_script("baselines.py", "find", other, "--registry", reg).returncode == 1


def test_system_key_uses_case_dtype_for_older_files(results_writer):
    run = results_writer("old.h5", "sp_tp", sp_tp_cases())  # no file attribute dtype
    assert baselines.system_of(_read(run))["dtype"] == "fp32"


def _tp_cases(t: int, world_size: int = 8):
    """sp_tp collectives on TP groups of t ranks: the name omits t, the params hold it."""
    cases = sp_tp_cases(world_size=world_size, mode="collectives")
    for case in cases:
        case["params"]["t"] = t
    return cases


def test_group_is_part_of_the_system(results_writer, tmp_path):
    reg = tmp_path / "reg"
    reg.mkdir()
    tp8 = results_writer("reg/tp8.h5", "sp_tp", _tp_cases(8), world_size=8,
                         file_attrs=group_attrs(8, 8), created_utc="2025-03-01T00:00:00Z")
    run = results_writer("run.h5", "sp_tp", _tp_cases(4), world_size=8,
                         file_attrs=group_attrs(4, 8), created_utc="2025-04-01T00:00:00Z")
    assert baselines.system_key(_read(run)) == "cpu_x8_g4x2_loopback_mpi_cpu_fp32"
    assert baselines.system_key(_read(tp8)) == "cpu_x8_loopback_mpi_cpu_fp32"
    assert baselines.system_of(_read(run)) != baselines.system_of(_read(tp8))
    # a baseline for TP=8 is never picked for TP=4, though every case name matches
    assert baselines.find_baseline(_read(run), reg) is None
    proc = run_script("compare.py", run, "--registry", reg)
    assert proc.returncode == 0 and "no baseline" in proc.stdout and "g4x2" in proc.stdout
    tp4 = results_writer("reg/tp4.h5", "sp_tp", _tp_cases(4), world_size=8,
                         file_attrs=group_attrs(4, 8), created_utc="2025-01-01T00:00:00Z")
    choice = baselines.find_baseline(_read(run), reg)
    assert choice is not None and choice.path == tp4
    # `add` files it under its own key, beside the TP=8 one
    proc = run_script("baselines.py", "add", run, "--registry", tmp_path / "reg2")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("cpu_x8_g4x2_loopback_mpi_cpu_fp32/run.h5")


def test_older_baselines_without_group_attributes_still_match(results_writer, tmp_path):
    reg = tmp_path / "reg"
    (reg / "cpu_x2_loopback_mpi_cpu_fp32").mkdir(parents=True)
    old = results_writer("reg/cpu_x2_loopback_mpi_cpu_fp32/ring_attention.h5", "ring_attention",
                         ring_cases(2), world_size=2)  # written before the group attributes
    whole = results_writer("whole.h5", "ring_attention", ring_cases(2), world_size=2,
                           file_attrs=group_attrs(2, 2))
    assert baselines.system_key(_read(old)) == baselines.system_key(_read(whole))
    choice = baselines.find_baseline(_read(whole), reg)
    assert choice is not None and choice.path == old and choice.shared_cases == 2
    # `--cp 1` on the same 2 ranks is another system
    cp1 = results_writer("cp1.h5", "ring_attention", ring_cases(1), world_size=2,
                         file_attrs=group_attrs(1, 2))
    assert baselines.system_key(_read(cp1)) == "cpu_x2_g1x2_loopback_mpi_cpu_fp32"
    assert baselines.find_baseline(_read(cp1), reg) is None


def test_find_counts_only_cases_with_the_same_params(results_writer, tmp_path):
    reg = tmp_path / "reg"
    reg.mkdir()
    same = results_writer("reg/same.h5", "ring_attention", ring_cases(2), world_size=2,
                          created_utc="2025-01-01T00:00:00Z")
    results_writer("reg/other_kernel.h5", "ring_attention",
                   ring_cases(2, extra_params={"attn_kernel_choice": "suite"}), world_size=2,
                   created_utc="2025-02-01T00:00:00Z")
    run = results_writer("run.h5", "ring_attention", ring_cases(2), world_size=2)
    choice = baselines.find_baseline(_read(run), reg)
    assert choice is not None and choice.path == same and choice.shared_cases == 2


# The CPU backend's device name is the CPU model and its cores: a run on another CPU is
# another system, and software versions are not part of a system.

XEON = "Intel(R) Xeon(R) Processor (2 cores)"
EPYC = "AMD EPYC 7763 64-Core Processor (64 cores, 128 threads)"


def test_cpu_model_is_part_of_the_system_key(results_writer, tmp_path):
    reg = tmp_path / "reg"
    reg.mkdir()
    xeon = results_writer("reg/xeon.h5", "sp_tp", sp_tp_cases(), file_attrs={"device_names": XEON})
    assert baselines.system_key(_read(xeon)) == "Intel-Xeon-Processor-2-cores_x4_loopback_mpi_cpu_fp32"
    epyc = results_writer("epyc.h5", "sp_tp", sp_tp_cases(), file_attrs={"device_names": EPYC})
    assert (baselines.system_key(_read(epyc))
            == "AMD-EPYC-7763-64-Core-Processor-64-cores-128-threads_x4_loopback_mpi_cpu_fp32")
    # the EPYC run is not compared with the Xeon's baseline
    assert baselines.find_baseline(_read(epyc), reg) is None
    proc = run_script("compare.py", epyc, "--registry", reg)
    assert proc.returncode == 0 and "no baseline" in proc.stdout
    # another Xeon run of the same model is, whatever its MPI and BLAS
    other = results_writer("x2.h5", "sp_tp", sp_tp_cases(),
                           file_attrs={"device_names": XEON, "mpi_version": "Open MPI v5.0.3",
                                       "gemm_library": "OpenBLAS 0.3.26 SkylakeX, 1 thread"})
    choice = baselines.find_baseline(_read(other), reg)
    assert choice is not None and choice.path == xeon


def test_rekey_refiles_this_hosts_legacy_cpu_baselines(results_writer, tmp_path):
    import h5py

    reg = tmp_path / "reg"
    legacy = reg / "cpu_x4_loopback_mpi_cpu_fp32"
    legacy.mkdir(parents=True)
    mine = results_writer("reg/cpu_x4_loopback_mpi_cpu_fp32/sp_tp.h5", "sp_tp", sp_tp_cases(),
                          file_attrs={"hostnames": "vm"})
    theirs = results_writer("reg/cpu_x4_loopback_mpi_cpu_fp32/moe.h5", "moe", sp_tp_cases(),
                            file_attrs={"hostnames": "elsewhere"})
    assert run_script("baselines.py", "rekey", "--registry", reg).returncode == 2
    proc = run_script("baselines.py", "rekey", "--registry", reg, "--device-names", XEON,
                      "--host", "vm")
    assert proc.returncode == 0, proc.stderr
    moved = reg / "Intel-Xeon-Processor-2-cores_x4_loopback_mpi_cpu_fp32" / "sp_tp.h5"
    assert proc.stdout.strip() == f"{mine} -> {moved}"
    assert not mine.exists() and theirs.exists()  # another host's file stays as it was
    with h5py.File(moved) as f:
        assert f.attrs["device_names"] == XEON
        assert [d.decode() for d in f["ranks/device"][()]] == [XEON] * 4
        assert "was `cpu`" in f.attrs["device_names_rekeyed"]
    # a new run on that CPU finds it
    run = results_writer("run.h5", "sp_tp", sp_tp_cases(), file_attrs={"device_names": XEON})
    choice = baselines.find_baseline(_read(run), reg)
    assert choice is not None and choice.path == moved


def _make_baseline(tree: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["make", "--no-print-directory", "baseline", *args], cwd=tree,
                          capture_output=True, text=True, timeout=120)


def _filed(registry: Path) -> dict[str, Path]:
    """The registry's files as `<system key>/<name>`."""
    return {str(p.relative_to(registry)): p for p in sorted(registry.rglob("*.h5"))}


def test_make_baseline_files_a_whole_run(tmp_path):
    """`make baseline` as a user runs it, in a copy of the suite's Makefile and scripts/ with a
    results tree of its own (its registry: results/baselines beside those scripts): without RUN
    it files every complete results file of the latest run folder, each under its system's key
    and its own name, byte for byte, and nothing of the older run or of a killed file;
    RUN=<folder> files that run instead, replacing those baselines; with no run under
    results/ it says so and fails."""
    tree = tmp_path / "suite"
    shutil.copytree(REPO / "scripts", tree / "scripts", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "Makefile", tree / "Makefile")
    (tree / ".venv").symlink_to(Path(sys.prefix))  # the recipe runs .venv/bin/python
    registry = tree / "results" / "baselines"

    proc = _make_baseline(tree)
    assert proc.returncode == 2 and "no run under results/" in proc.stderr, proc.stderr
    assert not registry.exists()

    older = write_run(tree / "results" / "20250115T100000Z", created_utc="2025-01-15T10:00:00Z")
    latest = write_run(tree / "results" / "20250116T090000Z", slowed=2.0, created_utc="2025-01-16T09:00:00Z")
    write_results(latest / "moe.h5", "sp_tp", sp_tp_cases()[:2], partial=True)  # a killed run's file
    names = ("sp_tp.h5", "ring_attention.h5", "ring_docs.h5")

    def expected(run: Path) -> dict[str, Path]:
        return {f"{baselines.system_key(read_results(run / n, load_datasets=False, warn=False))}/{n}": run / n
                for n in names}

    proc = _make_baseline(tree)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[0] == "filing results/20250116T090000Z/ as the baselines of this machine:"
    filed = _filed(registry)
    assert sorted(filed) == sorted(expected(latest)), filed
    for key, src in expected(latest).items():
        assert filecmp.cmp(filed[key], src, shallow=False), key
        assert str(filed[key]) in proc.stdout

    proc = _make_baseline(tree, f"RUN={older.relative_to(tree)}/")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    filed = _filed(registry)
    assert sorted(filed) == sorted(expected(older)), filed
    for key, src in expected(older).items():
        assert filecmp.cmp(filed[key], src, shallow=False), key
