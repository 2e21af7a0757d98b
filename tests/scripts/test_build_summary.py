"""The build summary that every configure prints (build_summary.txt in the build folder): each
dependency the build found, by its CMake cache, has its row, with the version that the
dependency itself reports (its compiler driver, its config-version file, its header) and where
it was found; and bin/suite_features.txt says what the cache says the build has."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

BIN_DIR = Path(os.environ.get("SUITE_BIN_DIR", "build/bin"))
BUILD = BIN_DIR.parent


def _cache() -> dict[str, str]:
    entries = {}
    for line in (BUILD / "CMakeCache.txt").read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_]+):[A-Z]+=(.*)$", line)
        if m:
            entries[m.group(1)] = m.group(2)
    return entries


def _found(value: str | None) -> bool:
    return bool(value) and not value.endswith("NOTFOUND")


def _output(*cmd: str) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    return proc.stdout + proc.stderr


def _config_version(config_dir: str) -> str:
    """PACKAGE_VERSION from a CMake package's *ConfigVersion.cmake (or *-config-version.cmake)."""
    for path in Path(config_dir).glob("*[Vv]ersion.cmake"):
        m = re.search(r'set *\(PACKAGE_VERSION "([^"]+)"\)', path.read_text(), flags=re.I)
        if m:
            return m.group(1)
    raise AssertionError(f"no version file in {config_dir}")


def _header_version(header: Path, *macros: str) -> str:
    text = header.read_text()
    return ".".join(re.search(rf"#define {m} +(\d+)", text).group(1) for m in macros)


def _expected(cache: dict[str, str]) -> list[tuple[str, str, str]]:
    """(row name, version, a path the row must show) of every dependency the cache says was
    found, each version asked of the dependency itself."""
    rows = []
    cxx = cache["CMAKE_CXX_COMPILER"]
    rows.append(("C++ compiler", _output(cxx, "-dumpfullversion").strip(), cxx))
    cmake = cache["CMAKE_COMMAND"]
    rows.append(("CMake", re.search(r"cmake version (\S+)", _output(cmake, "--version")).group(1), cmake))
    if _found(cache.get("MPI_C_COMPILER")) and _found(cache.get("MPIEXEC_EXECUTABLE")):
        mpirun = _output(cache["MPIEXEC_EXECUTABLE"], "--version")
        version = re.search(r"(\d+\.\d+\.\d+)", mpirun)
        rows.append(("MPI", version.group(1) if version else "", cache["MPI_C_COMPILER"]))
    if _found(cache.get("HDF5_C_COMPILER_EXECUTABLE")):
        h5cc = cache["HDF5_C_COMPILER_EXECUTABLE"]
        version = re.search(r"HDF5 Version: (\S+)", _output(h5cc, "-showconfig")).group(1)
        include = re.search(r"-I(\S+)", _output(h5cc, "-show")).group(1)
        rows.append(("HDF5", version, include))
    for name, key in (("Google Benchmark", "benchmark_DIR"), ("OpenBLAS", "OpenBLAS_DIR"),
                      ("GoogleTest", "GTest_DIR"), ("CLI11", "CLI11_DIR")):
        if _found(cache.get(key)):
            rows.append((name, _config_version(cache[key]), cache[key]))
    if _found(cache.get("CMAKE_CUDA_COMPILER")):
        nvcc = cache["CMAKE_CUDA_COMPILER"]
        rows.append(("CUDA", re.search(r", V(\S+)", _output(nvcc, "--version")).group(1), nvcc))
    if _found(cache.get("NCCL_LIBRARY")) and _found(cache.get("NCCL_INCLUDE_DIR")):
        version = _header_version(Path(cache["NCCL_INCLUDE_DIR"]) / "nccl.h",
                                  "NCCL_MAJOR", "NCCL_MINOR", "NCCL_PATCH")
        rows.append(("NCCL", version, cache["NCCL_LIBRARY"]))
    if cache.get("SUITE_HAVE_CUDNN_FOUND") == "ON":
        version = _header_version(Path(cache["CUDNN_INCLUDE_DIR"]) / "cudnn_version.h",
                                  "CUDNN_MAJOR", "CUDNN_MINOR", "CUDNN_PATCHLEVEL")
        rows.append(("cuDNN", version, cache["CUDNN_LIBRARY"]))
    if _found(cache.get("SUITE_SMPICXX")):
        version = _output(cache["SUITE_SMPICXX"].replace("smpicxx", "smpirun"), "-version")
        rows.append(("SimGrid (make sim)", re.search(r"SimGrid version (\d+\.\d+)", version).group(1),
                     cache["SUITE_SMPICXX"]))
    python = cache.get("SUITE_PYTHON", "")
    if Path(python).exists():
        rows.append(("Python (tests, scripts)", _output(python, "--version").split()[1], python))
    return rows


@pytest.fixture(scope="module")
def build() -> tuple[str, dict[str, str]]:
    if not (BUILD / "build_summary.txt").exists():
        pytest.skip(f"no configured build at {BUILD} (SUITE_BIN_DIR)")
    return (BUILD / "build_summary.txt").read_text(), _cache()


def test_every_dependency_found_has_its_row_with_version_and_place(build):
    summary, cache = build
    expected = _expected(cache)
    assert len(expected) >= 7  # compiler, CMake, MPI, HDF5, Benchmark, OpenBLAS, CLI11 at least
    for name, version, where in expected:
        row = re.search(rf"^  {re.escape(name)}  +(.*)$", summary, flags=re.M)
        assert row, f"no row for {name} in\n{summary}"
        assert version and version in row.group(1), f"{name}: {version} not in {row.group(0)!r}"
        assert where in row.group(1), f"{name}: {where} not in {row.group(0)!r}"


def test_the_features_file_says_what_the_cache_says(build):
    _, cache = build
    lines = (BIN_DIR / "suite_features.txt").read_text().splitlines()
    features = dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))
    cuda = _found(cache.get("CMAKE_CUDA_COMPILER")) and cache.get("SUITE_ENABLE_CUDA") != "OFF"
    nccl = cuda and _found(cache.get("NCCL_LIBRARY")) and _found(cache.get("NCCL_INCLUDE_DIR"))
    assert features["cuda"] == ("ON" if cuda else "OFF")
    assert features["nccl"] == ("ON" if nccl else "OFF")
    assert features["transports"] == ("mpi,nccl" if nccl else "mpi")
    if not cuda:
        assert "--cpu" in features["cuda_off"]
    elif not nccl:
        assert "--transport mpi" in features["nccl_off"]
