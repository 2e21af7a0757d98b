#!/usr/bin/env bash
# Installs what the suite needs and is missing, then makes the Python environment (.venv).
# Debian/Ubuntu: apt-get (as root, or through sudo). Elsewhere: prints what to install.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake pkg-config openmpi-bin libopenmpi-dev libhdf5-dev libopenblas-dev libopenblas-serial-dev
          libbenchmark-dev libgtest-dev libcli11-dev libsimgrid-dev python3 python3-venv python3-pip)

missing=()
if command -v dpkg-query >/dev/null 2>&1; then
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}"
    if [ "$(id -u)" = 0 ]; then sudo=""; elif command -v sudo >/dev/null; then sudo="sudo"; else
      echo "setup: need root to run: apt-get install -y ${missing[*]}" >&2; exit 1; fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
else
  for tool in cmake mpicxx mpirun h5cc python3; do
    command -v "$tool" >/dev/null || missing+=("$tool")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    cat >&2 <<MSG
setup: not a Debian/Ubuntu system and these are missing: ${missing[*]}
Install: a C++20 compiler, CMake >= 3.24, OpenMPI (or another MPI) with mpicxx, OpenBLAS, HDF5 (C library and
headers), Google Benchmark, GoogleTest, CLI11 (header-only), Python 3 with venv. Optional: the CUDA
Toolkit with NCCL for the GPU backend; SimGrid (smpicxx, smpirun) for `make sim` and the simulated
clusters' tests. E.g. with Spack: spack install openmpi openblas hdf5 benchmark googletest cli11
simgrid; or conda: conda install -c conda-forge openmpi openblas hdf5 benchmark gtest cli11.
MSG
    exit 1
  fi
fi

# Python tools for scripts/ and the integration tests, pinned.
python=${PYTHON:-python3}
stamp=.venv/.requirements
if [ ! -x .venv/bin/python ] || ! cmp -s scripts/requirements.txt "$stamp"; then
  echo "setup: creating .venv from scripts/requirements.txt"
  "$python" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -r scripts/requirements.txt
  cp scripts/requirements.txt "$stamp"
fi
# cuDNN attention (optional, CUDA builds only): the header-only cuDNN frontend ships in the PyPI
# wheel nvidia-cudnn-frontend (headers under site-packages/include, where CMake looks). Its
# Python dependencies are not needed for the headers, hence --no-deps.
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  if ! ls .venv/lib/python3*/site-packages/include/cudnn_frontend.h >/dev/null 2>&1; then
    echo "setup: installing the cuDNN frontend headers (nvidia-cudnn-frontend) into .venv"
    .venv/bin/python -m pip install -q --no-deps "nvidia-cudnn-frontend==1.32.0" ||
      echo "setup: could not install nvidia-cudnn-frontend: building without cuDNN attention" >&2
  fi
fi
echo "setup: ok"
