"""scripts/setup.sh on machines made up from stubs (dpkg-query, apt-get, id, cmake, python): each
make target sets up only what it needs; without root nothing is installed and what only a later
target needs is never a reason to stop (the build summary says it); a missing tool of the target asked stops it
with one list naming the ways to get it without root; a CMake older than the build needs is
replaced by CMake's wheel in .venv, or named with the ways to get one when the wheel cannot be
fetched. The Makefile then uses the wheel's cmake."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# What setup.sh and its stubs call from the system; everything else is a stub or absent.
SYSTEM_TOOLS = ("bash", "sed", "awk", "sort", "head", "tail", "grep", "cmp", "cp", "cat", "ls",
                "mkdir", "chmod", "rm", "env", "dirname", "tr")
PYTHON_STUB = """#!/bin/bash
# python3 stand-in: -m venv makes a venv holding this stub, -m pip install logs its arguments
# (fails where STUB_NO_NETWORK is set) and, for a cmake wheel, leaves a cmake of that version.
case "$1 $2" in
  "-m venv") mkdir -p "$3/bin"; cp "$0" "$3/bin/python"; exit 0 ;;
  "-m pip")
    shift 2
    [ "$1" = install ] || exit 0
    echo "$*" >> "$STUB_LOG/pip"
    if [ -n "${STUB_NO_NETWORK:-}" ]; then
      echo "ERROR: Could not find a version that satisfies the requirement (no network)" >&2; exit 1
    fi
    for a in "$@"; do
      case $a in cmake==*)
        printf '#!/bin/bash\\necho "cmake version %s"\\n' "${a#cmake==}" > .venv/bin/cmake
        chmod +x .venv/bin/cmake ;;
      esac
    done
    exit 0 ;;
esac
[ "$1" = -c ] && exit 0
exit 1
"""


def _executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def machine(tmp_path):
    """A checkout holding the real setup.sh and its inputs, and a PATH of stubs; returns a runner
    `run(*targets, uid=1000, dpkg_missing=(), tools=(...), cmake="3.25.1", **env)`."""
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    (root / "cmake").mkdir()
    for rel in ("scripts/setup.sh", "scripts/requirements.txt", "scripts/requirements-nodeps.txt",
                "pyproject.toml", "cmake/dependencies.txt", "CMakeLists.txt"):
        shutil.copy(ROOT / rel, root / rel)
    system = tmp_path / "system"
    system.mkdir()
    for tool in SYSTEM_TOOLS:
        os.symlink(shutil.which(tool), system / tool)
    log = tmp_path / "log"
    log.mkdir()

    def run(*targets: str, uid: int = 1000, dpkg: bool = True, dpkg_missing: tuple[str, ...] = (),
            tools: tuple[str, ...] = ("c++", "mpicc", "mpirun", "smpicc", "smpicxx", "smpirun"),
            cmake: str = "3.25.1", **env: str) -> subprocess.CompletedProcess[str]:
        stubs = tmp_path / f"stubs-{len(list(tmp_path.glob('stubs-*')))}"
        stubs.mkdir()
        _executable(stubs / "id", f"#!/bin/bash\necho {uid}\n")
        _executable(stubs / "sudo", "#!/bin/bash\nexit 1\n")  # no passwordless sudo
        _executable(stubs / "apt-get", f'#!/bin/bash\necho "$*" >> {log}/apt-get\n')
        _executable(stubs / "cmake", f'#!/bin/bash\necho "cmake version {cmake}"\n')
        _executable(stubs / "python3", PYTHON_STUB)
        if dpkg:
            missing = " ".join(dpkg_missing)
            _executable(stubs / "dpkg-query", "#!/bin/bash\nfor p in " + missing + "; do\n"
                        '  [ "${@: -1}" = "$p" ] && { echo "no packages found matching $p" >&2; exit 1; }\n'
                        'done\nprintf "install ok installed"\n')
        for tool in tools:
            _executable(stubs / tool, "#!/bin/bash\nexit 0\n")
        run_env = {"PATH": f"{stubs}:{system}", "HOME": str(tmp_path), "STUB_LOG": str(log),
                   "CUDA_HOME": str(tmp_path / "no-cuda"), **env}
        return subprocess.run([shutil.which("bash"), str(root / "scripts" / "setup.sh"), *targets],
                              env=run_env, capture_output=True, text=True, timeout=60)

    run.root = root
    run.log = log
    return run


def test_a_non_root_build_is_not_stopped_by_a_later_targets_packages(machine):
    """The bug this came from: `make build` refused, as non-root, because libsimgrid-dev (which
    only `make sim` uses) was missing. Now: nothing installed, nothing said, setup goes on."""
    proc = machine("build", dpkg_missing=("libgtest-dev", "libsimgrid-dev"),
                   tools=("c++", "mpicc", "mpirun"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "setup: ok" and proc.stderr == ""
    assert not (machine.log / "apt-get").exists()
    assert not (machine.root / ".venv").exists()  # make build needs no venv here


def test_without_root_a_missing_library_package_is_left_to_cmake(machine):
    proc = machine("build", dpkg_missing=("libhdf5-dev",))
    assert proc.returncode == 0, proc.stderr
    assert "not root: installing nothing (as root: apt-get install libhdf5-dev)" in proc.stdout
    assert not (machine.log / "apt-get").exists()


def test_a_module_command_counts_where_the_package_is_missing(machine):
    """SimGrid from a module (smpicxx on PATH) is SimGrid, whatever dpkg says."""
    proc = machine("sim", dpkg_missing=("libsimgrid-dev",))
    assert proc.returncode == 0, proc.stderr
    assert "simgrid" not in proc.stdout.lower()


def test_the_target_asked_stops_on_what_it_lacks_with_the_ways_to_get_it(machine):
    proc = machine("sim", dpkg=False, tools=("mpicc", "mpirun"))  # no compiler, no SimGrid
    assert proc.returncode == 2
    assert proc.stderr.count("setup: missing for make sim") == 1
    for needle in ("C++20 compiler: no c++ on PATH", "module load gcc", "conda install -c conda-forge cxx-compiler",
                   "SimGrid (smpicc, smpicxx, smpirun): smpicc, smpicxx and smpirun are not all on PATH",
                   "spack install simgrid", "conda install -c conda-forge simgrid"):
        assert needle in proc.stderr, needle
    assert "setup: ok" not in proc.stdout


def test_as_root_only_the_targets_packages_are_installed(machine):
    proc = machine("build", uid=0, dpkg_missing=("libhdf5-dev", "libgtest-dev", "libsimgrid-dev"))
    assert proc.returncode == 0, proc.stderr
    installs = [line for line in (machine.log / "apt-get").read_text().splitlines()
                if line.startswith("install")]
    assert len(installs) == 1 and installs[0].split()[-1] == "libhdf5-dev"
    proc = machine("test", uid=0, dpkg_missing=("libhdf5-dev", "libgtest-dev", "libsimgrid-dev"))
    assert proc.returncode == 0, proc.stderr
    last = (machine.log / "apt-get").read_text().splitlines()[-1].split()
    assert {"libhdf5-dev", "libgtest-dev", "libsimgrid-dev"} <= set(last)


def test_an_old_cmake_is_replaced_by_the_wheel_in_the_venv(machine):
    proc = machine("build", cmake="3.16.3")
    assert proc.returncode == 0, proc.stderr
    assert "CMake 3.16.3 is older than the 3.20 needed" in proc.stdout
    wheel = (machine.root / ".venv" / "bin" / "cmake")
    version = subprocess.run([str(wheel), "--version"], capture_output=True, text=True).stdout
    assert re.match(r"cmake version 3\.(2[0-9]|3[0-9])", version)
    assert "cmake==" in (machine.log / "pip").read_text()
    again = machine("build", cmake="3.16.3")  # the wheel is used from then on
    assert again.returncode == 0 and "older than" not in again.stdout


def test_an_old_cmake_with_no_network_stops_naming_cmake_and_the_ways(machine):
    proc = machine("build", cmake="3.16.3", STUB_NO_NETWORK="1")
    assert proc.returncode == 2
    assert proc.stderr.count("setup: missing for make build") == 1
    for needle in ("CMake: 3.16.3 on PATH, older than 3.20", "no network here: pip download cmake==",
                   "module load cmake", "spack install cmake", "conda install -c conda-forge cmake"):
        assert needle in proc.stderr, needle


def test_make_test_needs_a_ctest_that_writes_junit(machine):
    assert "older than" not in machine("build", cmake="3.20.2").stdout
    proc = machine("test", cmake="3.20.2")
    assert proc.returncode == 0, proc.stderr
    assert "CMake 3.20.2 is older than the 3.21 needed" in proc.stdout


def test_without_dpkg_every_tool_present_sets_up_quietly(machine):
    proc = machine("build", dpkg=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "setup: ok"
    lacking_simgrid = machine("build", dpkg=False, tools=("c++", "mpicc", "mpirun"))
    assert lacking_simgrid.returncode == 0, lacking_simgrid.stderr
    assert lacking_simgrid.stdout.strip() == "setup: ok"


def test_a_cuda_build_gets_the_cudnn_frontend_headers_or_goes_on_without(machine):
    proc = machine("build", tools=("c++", "mpicc", "mpirun", "nvcc"))
    assert proc.returncode == 0, proc.stderr
    assert "nvidia-cudnn-frontend==" in (machine.log / "pip").read_text()
    shutil.rmtree(machine.root / ".venv")
    offline = machine("build", tools=("c++", "mpicc", "mpirun", "nvcc"), STUB_NO_NETWORK="1")
    assert offline.returncode == 0, offline.stderr
    assert "building without cuDNN attention" in offline.stderr


def test_the_makefile_uses_the_wheels_cmake_once_it_is_there(tmp_path):
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    shutil.copy(ROOT / "Makefile", checkout)
    plan = subprocess.run(["make", "-n", "build"], cwd=checkout, capture_output=True, text=True)
    assert re.search(r"^cmake -S \. -B build", plan.stdout, flags=re.M), plan.stdout
    (checkout / ".venv" / "bin").mkdir(parents=True)
    _executable(checkout / ".venv" / "bin" / "cmake", "#!/bin/bash\n")
    plan = subprocess.run(["make", "-n", "build"], cwd=checkout, capture_output=True, text=True)
    assert f"{checkout}/.venv/bin/cmake -S . -B build" in plan.stdout
    assert f"{checkout}/.venv/bin/cmake --build build" in plan.stdout
