#!/usr/bin/env bash
# What `make TARGET` needs before CMake can run, for the targets named (build, test, sim, run,
# scripts, all; default build). As root (or with passwordless sudo) on Debian/Ubuntu, apt-get
# installs the missing packages of those targets (cmake/dependencies.txt). Without root nothing
# is installed: the libraries are CMake's to find (environment modules, Spack or conda prefixes,
# CMAKE_PREFIX_PATH), and its configure lists what it cannot find with the ways to get it.
# Checked here, in one list, with the ways to get each without root: a C++ compiler, CMake (one
# older than the suite needs is replaced by CMake's wheel from PyPI in .venv, which the Makefile
# then uses), SimGrid's compiler wrappers for `make sim`, Python's venv for the tests and
# scripts. What only a later target needs never stops the target asked: the build summary that
# every configure prints says once what is off (no GoogleTest, no SimGrid...) and what that
# disables.
set -euo pipefail
cd "$(dirname "$0")/.."

# CMake's wheel, pinned, where the system's is too old (or missing).
cmake_wheel="cmake==3.31.6"
cmake_min=$(sed -n 's/^cmake_minimum_required(VERSION \([0-9.]*\)).*/\1/p' CMakeLists.txt)
ctest_junit_min=3.21  # make test reads ctest's --output-junit report

# The needs (column 2 of cmake/dependencies.txt) each make target covers.
declare -A covers=([build]="build" [sim]="build sim" [scripts]="scripts" [run]="build sim scripts"
                   [test]="build test sim scripts" [all]="build test sim scripts")
targets=("${@:-build}")
asked=" "
for t in "${targets[@]}"; do
  [[ -n ${covers[$t]:-} ]] || { echo "setup: unknown target '$t' (build, test, sim, run, scripts, all)" >&2; exit 2; }
  asked+="${covers[$t]} "
done
needs() { [[ $asked == *" $1 "* ]]; }

# cmake/dependencies.txt as `key|need|debian|spack|conda|hint|what` lines, padding trimmed.
table=$(awk -F'|' '!/^#/ && NF >= 7 { for (i = 1; i <= NF; i++) gsub(/^ +| +$/, "", $i)
                                      print $1 "|" $2 "|" $3 "|" $4 "|" $5 "|" $6 "|" $7 }' cmake/dependencies.txt)
field() { awk -F'|' -v key="$1" -v col="$2" '$1 == key { print $col }' <<<"$table"; }
ways() {  # the ways to get dependency $1 without root
  echo "module load $(field "$1" 4) (module avail $(field "$1" 4)) | spack install $(field "$1" 4) |" \
       "conda install -c conda-forge $(field "$1" 5); then $(field "$1" 6)"
}
problems=()
missing() {  # missing KEY WHAT-WAS-SEEN: one entry of the list that stops this target
  problems+=("$(field "$1" 7): $2"$'\n'"      get it: $(ways "$1")")
}

# A dependency that shows as a command, whatever installed it (a package, a module, a prefix).
python=${PYTHON:-python3}
probe() {
  case $1 in
    compiler) command -v "${CXX:-c++}" ;;
    cmake) command -v cmake ;;
    mpi) command -v mpicc && command -v mpirun ;;
    simgrid) command -v smpicc && command -v smpicxx && command -v smpirun ;;
    python) "$python" -c 'import venv, ensurepip' ;;
    *) return 2 ;;  # a library: CMake's to find
  esac >/dev/null 2>&1
}

# Root, or passwordless sudo, with apt: install what the asked targets lack.
sudo=""
can_install=0
if command -v dpkg-query >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then can_install=1
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then can_install=1 sudo=sudo; fi
fi
now=()
if command -v dpkg-query >/dev/null 2>&1; then
  while IFS='|' read -r key need debs _; do
    { [[ $debs == - ]] || ! needs "$need"; } && continue
    for p in $debs; do
      dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" && continue
      # Without root, a command that is there from elsewhere (a module) is enough.
      [ $can_install = 0 ] && probe "$key" && continue
      now+=("$p")
    done
  done <<<"$table"
fi
if [ ${#now[@]} -gt 0 ] && [ $can_install = 1 ]; then
  echo "setup: installing ${now[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${now[@]}" >/dev/null
elif [ ${#now[@]} -gt 0 ]; then
  echo "setup: not root: installing nothing (as root: apt-get install ${now[*]}); CMake looks" \
       "for these in the environment (modules, CMAKE_PREFIX_PATH) and lists what it cannot find"
fi

# A C++ compiler (its C++20 support is CMake's to check).
needs build && ! probe compiler && missing compiler "no ${CXX:-c++} on PATH"

# Python: the venv for the tests and scripts; a bare one for CMake's wheel or cuDNN's headers.
make_venv() {
  [ -x .venv/bin/python ] && return 0
  "$python" -m venv .venv >/dev/null 2>&1 || return 1
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
}

# CMake: the system's where new enough, else CMake's wheel in .venv (used by the Makefile).
version_ok() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }
cmake_version() {  # empty where there is no such cmake
  command -v "$1" >/dev/null 2>&1 || return 0
  "$1" --version 2>/dev/null | sed -n 's/^cmake version \([0-9.]*\).*/\1/p'
}
need_cmake=$cmake_min
needs test && ! version_ok "$need_cmake" "$ctest_junit_min" && need_cmake=$ctest_junit_min
if needs build || needs sim; then
  have=$(cmake_version .venv/bin/cmake)
  [ -n "$have" ] && version_ok "$have" "$need_cmake" || have=$(cmake_version cmake)
  if [ -z "$have" ] || ! version_ok "$have" "$need_cmake"; then
    echo "setup: CMake ${have:-not found} is older than the $need_cmake needed: installing $cmake_wheel into .venv"
    log=$(make_venv 2>&1 && .venv/bin/python -m pip install -q "$cmake_wheel" 2>&1) && [ -x .venv/bin/cmake ] ||
      missing cmake "${have:-none} on PATH, older than $need_cmake, and $cmake_wheel could not be installed into .venv ($(tail -n1 <<<"${log:-no python3 venv}")); with no network here: pip download $cmake_wheel elsewhere, then .venv/bin/pip install the wheel"
  fi
fi

# SimGrid's compiler wrappers: `make sim` configures with them.
needs sim && ! probe simgrid && missing simgrid "smpicc, smpicxx and smpirun are not all on PATH"

# The venv with scripts/requirements.txt (pinned) and the suite's tools (pyproject.toml: the
# package scripts/ and its program .venv/bin/suite, installed editable: the checkout's code runs).
# Prepared again whenever either file changed since (the stamp holds both as installed).
stamp=.venv/.requirements
installed() { cat scripts/requirements.txt scripts/requirements-nodeps.txt pyproject.toml; }
if needs scripts && { [ ! -x .venv/bin/python ] || ! installed | cmp -s - "$stamp"; }; then
  echo "setup: preparing .venv from scripts/requirements.txt and pyproject.toml"
  if make_venv && .venv/bin/python -m pip install -q -r scripts/requirements.txt &&
     .venv/bin/python -m pip install -q --no-deps -r scripts/requirements-nodeps.txt &&
     .venv/bin/python -m pip install -q --no-deps -e .; then
    installed >"$stamp"
  else
    missing python "$python -m venv .venv, then pip install -r scripts/requirements.txt and pip install -e ., failed"
  fi
fi

if [ ${#problems[@]} -gt 0 ]; then
  echo "setup: missing for make ${targets[*]} (docs/CLUSTER.md):" >&2
  printf '  %s\n' "${problems[@]}" >&2
  exit 2
fi

# cuDNN attention (optional, CUDA builds only): the header-only cuDNN frontend ships in the PyPI
# wheel nvidia-cudnn-frontend (headers under site-packages/include, where CMake looks). Its
# Python dependencies are not needed for the headers, hence --no-deps. Not for a build told
# SUITE_ENABLE_CUDA=OFF (the Makefile passes it on from CMAKE_ARGS).
if needs build && [ "${SUITE_ENABLE_CUDA:-ON}" != OFF ] && { command -v nvcc >/dev/null 2>&1 || [ -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ]; }; then
  if ! ls .venv/lib/python3*/site-packages/include/cudnn_frontend.h >/dev/null 2>&1; then
    echo "setup: installing the cuDNN frontend headers (nvidia-cudnn-frontend) into .venv"
    { make_venv && .venv/bin/python -m pip install -q --no-deps "nvidia-cudnn-frontend==1.32.0"; } ||
      echo "setup: could not install nvidia-cudnn-frontend: building without cuDNN attention" >&2
  fi
fi
echo "setup: ok"
