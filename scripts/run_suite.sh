#!/usr/bin/env bash
# The main job: every benchmark on the CPU backend with local MPI ranks, results into
# results/<UTC stamp>/, then plots of each file, a summary (CSV, JSON), the verdict of every
# file against this machine's baselines and the run's page (index.html); the verdict's lines
# come last. Used by `make run`; NP, MPIRUN, BUILD and EXTRA (flags for every benchmark) can be
# set in the environment, STRICT=1 makes a regression fail the run (exit 1), and LINK: unset (or
# `loopback`) runs over Open MPI's shared memory as always; LINK=shaped-1g, shaped-10g or
# shaped:RATE runs every MPI benchmark over a real slow link, Open MPI over TCP on a network
# namespace's shaped loopback (suite shaped-link: root and tc; refused up front otherwise);
# LINK=emulated-<nodes>x<ranks per node>-<rate> (NP their product) on a cluster emulated on this
# machine, shared memory inside a node and a shaped NIC between them (suite emulated-cluster).
set -euo pipefail
cd "$(dirname "$0")/.."
NP=${NP:-4}
MPIRUN=${MPIRUN:-mpirun}
BUILD=${BUILD:-build}
SIM_BUILD=${SIM_BUILD:-build-sim}
EXTRA=${EXTRA:-}
LINK=${LINK:-loopback}
label=loopback
if [ "$LINK" != loopback ]; then
  # Refused here, before anything is written: a LINK that is not a shaped link, a bad rate, not
  # root, no ip or tc, a kernel without tbf (one error line, exit 2).
  case "$LINK" in
    shaped*)
      label=$(python3 -m scripts shaped-link "$LINK" --label) || exit 2
      python3 -m scripts shaped-link "$LINK" --check >/dev/null || exit 2 ;;
    emulated-*)
      label=$(python3 -m scripts emulated-cluster --link "$LINK" --label) || exit 2
      # emulated-<nodes>x<ranks per node>-...: NP must be the cluster's ranks.
      dims=${label#emulated-}; dims=${dims%%-*}
      if [ "$NP" -ne $((${dims%x*} * ${dims#*x})) ]; then
        echo "error: LINK=$LINK has $((${dims%x*} * ${dims#*x})) ranks; NP=$NP (set NP to match)" >&2
        exit 2
      fi
      python3 -m scripts emulated-cluster --link "$LINK" --check >/dev/null || exit 2 ;;
    *) echo "error: LINK=$LINK: run_suite.sh takes loopback (the default), shaped-1g, shaped-10g," \
         "shaped:RATE or emulated-<nodes>x<ranks per node>-<rate> (e.g. emulated-2x2-1g)" >&2; exit 2 ;;
  esac
fi
stamp=$(date -u +%Y%m%dT%H%M%SZ)
dir=results/$stamp
mkdir -p "$dir"
# OpenMPI refuses root without these; oversubscription lets 4 ranks share 2 cores.
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
launch=("$MPIRUN" -np "$NP" --oversubscribe)
case "$LINK" in
  shaped*)
    # Each benchmark in a namespace of its own, removed when it ends; NP ranks share the rate.
    launch=(python3 -m scripts shaped-link "$LINK" -- "${launch[@]}")
    echo "== link $label: each MPI benchmark over TCP on a shaped loopback (suite shaped-link) ==" ;;
  emulated-*)
    # Each benchmark on a cluster of namespaces built for it (it starts mpirun itself).
    launch=(python3 -m scripts emulated-cluster --link "$LINK" --)
    echo "== link $label: each MPI benchmark on an emulated cluster (suite emulated-cluster) ==" ;;
esac
common=(--backend cpu --link "$label")

# The suite's tools in .venv, from this checkout (the same as .venv/bin/suite COMMAND).
suite() { .venv/bin/python -m scripts "$@"; }

# measured OUTPUT_FILE COMMAND...: runs the command and records in its results file how many
# cores other processes took meanwhile (a busy machine's slowdowns are not judged regressions).
measured() {
  local out=$1; shift
  suite host-load --out "$out" -- "$@"
}

# run OUTPUT_NAME BINARY FLAGS...: one benchmark, results in $dir/OUTPUT_NAME.h5
run() {
  local out=$1 bin=$2; shift 2
  echo "== $bin ($NP ranks): $out.h5 =="
  # EXTRA comes last: a flag given twice takes its last value, so EXTRA overrides.
  # shellcheck disable=SC2086
  measured "$dir/$out.h5" "${launch[@]}" "$BUILD/bin/$bin" "${common[@]}" --out "$dir/$out.h5" "$@" $EXTRA
}

run sp_tp sp_tp --mode collectives --sizes 1K:4M:x4 --iters 20
# A small layer (s=512, b=2, h=512, 8 heads of 64) so the CPU backend finishes in seconds.
run sp_tp_layer sp_tp --mode layer --seq 512 --batch 2 --hidden 512 --heads 8 --attention fused,unfused \
  --pass fwd,fwd_bwd --tp-overlap none,ring,chunks:4 \
  --iters 5 --warmup 1
# Ring attention: a short block-size sweep, contiguous vs zig-zag, ring vs all-gather, causal;
# forward alone and the training step (forward + backward).
run ring_attention ring_attention --block 64:256:x2 --layout contiguous,zigzag --variant ring,allgather \
  --pass fwd,fwd_bwd \
  --causal 1 --iters 5 --warmup 1
# Packed documents (lognormal lengths) under every layout, the padded per-document zig-zag and
# the balanced one among them: imbalance, padding and efficiency side by side.
run ring_docs ring_attention --block 256 --layout contiguous,zigzag,striped,doc_zigzag,balanced \
  --docs lognormal:96:1 --pass fwd,fwd_bwd --causal 1 --iters 5 --warmup 1
# The same documents in Ulysses (equal work by construction) and its hybrid's ring part.
run ulysses_docs ulysses --seq 1K --ulysses-degree all --layout zigzag,balanced --docs lognormal:96:1 \
  --causal 1 --pass fwd,fwd_bwd --iters 5 --warmup 1
# Ulysses, the Ulysses x ring hybrid and plain ring on the same inputs (every degree NP allows).
run ulysses ulysses --seq 256,1K --ulysses-degree all --layout zigzag --causal 1 --pass fwd,fwd_bwd --iters 5 \
  --warmup 1
run harness_overhead harness_overhead --sizes 4K:16M:x4 --iters 30
# MoE: a small skew sweep (uniform, zipf, hot; dropless and CF 1.25), a few seconds on the CPU.
run moe moe --tokens 256 --hidden 128 --ffn-hidden 256 --experts 8 --top-k 2 --skew none,zipf,hot \
  --alpha 0.6,1.2 --hot-factor 3 --capacity-factor 0,1.25 --pass fwd,fwd_bwd --iters 5 --warmup 1
# MoE with its all-to-all behind another micro-batch: M = 4 beside M = 1 on the same tokens
# (outputs, gradients and exchange bytes checked equal; the exposed all-to-all beside the
# schedule's critical path, moe_overlap.png).
run moe_overlap moe --tokens 256 --hidden 128 --ffn-hidden 256 --experts 8 --top-k 2 --skew zipf \
  --alpha 1.2 --overlap none,microbatch:4 --pass fwd_bwd --iters 5 --warmup 1
# MoE across nodes, pretended on this machine (--ranks-per-node): flat and hierarchical dispatch,
# node-limited routing and EPLB's redundant experts under hot skew; then the all-to-all-v alone
# over generated traffic matrices by the three algorithms.
run moe_nodes moe --tokens 256 --hidden 128 --ffn-hidden 256 --experts 16 --top-k 4 --skew hot \
  --ranks-per-node 2 --dispatch flat,hierarchical --max-nodes-per-token 0,1 --redundant-experts 0,4 \
  --pass fwd,fwd_bwd --iters 5 --warmup 1
# The axes together: one block on a tp2 x cp2 mesh (x dp: the rest of NP; CP alone where 4 does
# not divide NP) with the TP+SP layer and ring attention over CP, the training step with its
# gradient sums, checked against one rank's block.
mesh_shape=(--tp 2 --cp 2 --dp 0)
if [ $((NP % 4)) -ne 0 ]; then mesh_shape=(--cp "$NP"); fi
run mesh mesh "${mesh_shape[@]}" --seq 256 --hidden 256 --heads 4 --pass fwd_bwd --iters 5 --warmup 1
# The fourth axis: 4 pipeline stages (NP where 4 does not divide it) of 8 small layers, 1F1B
# against interleaved 1F1B over 8 micro-batches, each op's timeline, checked against one rank
# running every layer; its Gantt chart comes with the plots, its Chrome trace beside them.
pp=4
if [ $((NP % 4)) -ne 0 ]; then pp=$NP; fi
run pipeline pipeline --pp "$pp" --schedule 1f1b,interleaved --microbatches $((2 * pp)) --layers $((4 * pp)) \
  --seq 64 --hidden 64 --iters 5 --warmup 1
# The same schedules' machinery with mesh's transformer block as the stages, TP 2 inside each
# (NP / 2 stages), 1F1B against ZB-H1 (its B and W fused for the block), checked against one
# rank's block.
if [ $((NP % 4)) -eq 0 ]; then
  run pipeline_block pipeline --stage block --pp $((NP / 2)) --tp 2 --schedule 1f1b,zb-h1 \
    --microbatches "$NP" --layers "$NP" --seq 64 --hidden 128 --heads 2 --iters 5 --warmup 1
fi
# pair traffic crosses nodes: it needs two nodes of 2 ranks (NP >= 4).
a2a_traffic=uniform,zipf,incast
if [ "$NP" -ge 4 ]; then a2a_traffic+=,pair; fi
run moe_a2a moe --mode a2a --traffic "$a2a_traffic" --bytes 64K,4M --ranks-per-node 2 \
  --iters 5 --warmup 1
if [ -x "$BUILD/bin/kernel_bench" ]; then
  echo "== kernel_bench (one process) =="
  measured "$dir/kernel_bench.h5" "$BUILD/bin/kernel_bench" --out="$dir/kernel_bench.h5" \
    --benchmark_out="$dir/kernel_bench.json" --benchmark_out_format=json
fi

# Bytes on the wire: Open MPI's own count for every sp_tp collective case (two extra, monitored
# runs per case; the timed figures above are untouched), beside the payload and 2(t-1)/t n.
echo "== bytes on the wire (Open MPI monitoring) =="
suite wire-bytes "$dir/sp_tp.h5" --mpirun "$MPIRUN" ||
  echo "warning: suite wire-bytes failed"

for f in "$dir"/*.h5; do
  suite plot "$f" --out "$dir/plots/$(basename "$f" .h5)"
done
suite trace "$dir/pipeline.h5" -o "$dir/plots/pipeline/pipeline_trace.json" ||
  echo "warning: suite trace failed"

# Packed documents beyond this machine: the model's exact counts for the same lengths at N_c up to
# 256 (every layout, no run needed), drawn against N_c with this run's measured points.
echo "== packed documents against N_c (model --section varlen) =="
"$BUILD/bin/model" --section varlen --docs lognormal:96:1 --cp-sweep 2:256:x2 --tokens-per-rank 256 --causal \
  --hidden 512 --heads 8 --kv-heads 8 --dtype fp32 --csv "$dir/varlen_lognormal.csv" >"$dir/varlen_lognormal.txt"
suite plot-varlen "$dir/varlen_lognormal.csv" --measured "$dir/ring_docs.h5" \
  --out "$dir/plots/varlen"

# A simulated cluster (SimGrid's SMPI, `make sim`): the ring on 4 flat hosts with 50 MB/s links,
# executed compute. sim_ring_demo.py measures this host's c* there first, then sweeps c*/4 .. 4 c*,
# so the transfer goes from exposed to hidden inside the sweep on any CPU; ring_crossing.py prints
# where, beside c* (files and plots in $dir/sim/). EXTRA is not passed: the simulation has its own
# sizes.
if [ -x "$SIM_BUILD/bin/ring_attention" ]; then
  echo "== ring_attention on a simulated cluster (4 flat hosts, 50 MB/s links, executed compute) =="
  suite sim-ring-demo --build "$SIM_BUILD" --out-dir "$dir/sim"
else
  echo "(no $SIM_BUILD: make sim builds the SMPI variant for the simulated ring sweep)"
fi
# Every results file (the simulated ones too) for readers without h5py, its verdict against
# this machine's baselines (beside each file: <name>.compare.txt and .compare.json), and the
# page of the whole run; the verdict's lines are the last the run prints.
echo "== summary, verdict and page =="
mapfile -t files < <(find "$dir" -name '*.h5' | sort)
suite summary "${files[@]}" --csv "$dir/summary.csv" --json "$dir/summary.json" ||
  echo "warning: a check failed (summary.csv, column check)"
strict=()
if [ "${STRICT:-0}" != 0 ]; then strict=(--strict); fi
verdict=0
suite run-verdict "$dir" "${strict[@]}" >"$dir/verdict.txt" || verdict=$?
suite report-page "$dir" >/dev/null || echo "warning: suite report-page failed"
echo "results and plots: $dir; all of it on one page: $dir/index.html"
cat "$dir/verdict.txt"
if [ "$verdict" = 1 ] && [ ${#strict[@]} -gt 0 ]; then
  echo "STRICT=1: a regression or a newly failing check fails this run"
elif [ "$verdict" != 0 ]; then
  echo "warning: suite run-verdict failed (exit $verdict)"
fi
exit "$verdict"
