# shellcheck shell=bash
# Shared driver of the job scripts in slurm/: sourced by each <bench>.sbatch, which only sets
# the Slurm resources and calls `suite_main <case set> <default link preset>`.
#
# One job = one benchmark run: resolve the link preset into NCCL / Open MPI variables, launch
# one rank per GPU (srun --mpi=pmix, or mpirun), write the results file into a per-job folder,
# then (optionally) compare it with the matching baseline and leave the verdict beside it.
#
# Variables (sbatch --export=ALL,NAME=value,...):
#   SUITE_SWEEP_CELLS  (set by scripts/envs/sweep.py --array) file whose line N holds the variables
#                 of array task N, e.g. `LINK=net BLOCK=4096`
#   SUITE_MODE    gpu (default) or cpu: the CPU backend with small sizes (CI, laptops)
#   LINK          link preset of slurm/link_presets.json (default: the script's); an unknown
#                 preset fails the job before anything runs
#   TRANSPORT     nccl (default on gpu where the build has NCCL, else mpi) or mpi; cpu mode
#                 always uses mpi. The build's bin/suite_features.txt says what it has: a GPU job
#                 of a build without CUDA, or TRANSPORT=nccl without NCCL, stops before launching
#   LAUNCHER      srun (default; srun --mpi=$SRUN_MPI, default pmix) or mpirun
#   BIN_DIR       where the executables are (default build/bin)
#   RESULTS_ROOT  parent of the per-job folders (default results/slurm)
#   ARGS          extra benchmark flags, appended (a flag given twice takes its last value)
#   COMPARE       auto (default: compare when a baseline matches), 1 (a missing baseline is an
#                 error), 0 (no compare step); BASELINES: the registry (results/baselines);
#                 COMPARE_ARGS: extra compare.py flags (e.g. --threshold 0.1)
#   PLOT          1 to write plots beside the results (default 1 on gpu, 0 on cpu)
#   PYTHON        interpreter with scripts/requirements.txt (default .venv/bin/python)
#   Per benchmark: SIZES SEQ HIDDEN TP (sp_tp), BLOCK CP LAYOUT (ring_attention), SEQ DEGREE CP
#   (ulysses), TOKENS EXPERTS SKEW EP (moe), PASS (sp_tp_layer, ring_attention, ulysses, moe: default
#   fwd,fwd_bwd): see suite_case_args below.

suite_die() {
  echo "error: $*" >&2
  exit 2
}

# suite_feature <features file> <key>: the value the build recorded (cmake/build_summary.cmake),
# empty where the file or the key is absent.
suite_feature() {
  [[ -f $1 ]] && sed -n "s/^$2=//p" "$1" | head -n1
}

# The transport of a GPU job: TRANSPORT, checked against what the build has, or the build's
# best (nccl, else mpi with a line saying why). Stops the job with the build's own line where
# it lacks what the job needs. suite_gpu_transport <features file>
suite_gpu_transport() {
  local features=$1
  if [[ ! -f $features ]]; then  # a build from before the file existed: the old default
    echo "${TRANSPORT:-nccl}"
    return
  fi
  [[ $(suite_feature "$features" cuda) == ON ]] || suite_die "$(suite_feature "$features" cuda_off) ($features)"
  if [[ $(suite_feature "$features" nccl) == ON ]]; then
    echo "${TRANSPORT:-nccl}"
  elif [[ ${TRANSPORT:-} == nccl ]]; then
    suite_die "TRANSPORT=nccl, but $(suite_feature "$features" nccl_off) ($features)"
  else
    [[ -z ${TRANSPORT:-} ]] && echo "note: $(suite_feature "$features" nccl_off)" >&2
    echo "${TRANSPORT:-mpi}"
  fi
}

# The benchmark flags of one case set in one mode, on stdout (one per line).
suite_case_args() {
  local set=$1 mode=$2
  case "$set:$mode" in
    sp_tp:gpu)
      printf '%s\n' --mode collectives --sizes "${SIZES:-1M:1G:x2}" --seq "${SEQ:-8192}" \
        --batch 1 --hidden "${HIDDEN:-8192}" --tp "${TP:-0}" ;;
    sp_tp:cpu)
      printf '%s\n' --mode collectives --sizes "${SIZES:-1K:64K:x4}" --seq "${SEQ:-64}" --batch 1 \
        --hidden 64 --tp "${TP:-0}" --iters 5 --warmup 1 ;;
    sp_tp_layer:gpu)
      printf '%s\n' --mode layer --seq "${SEQ:-8192}" --batch 1 --hidden "${HIDDEN:-8192}" \
        --heads 64 --variants tp,tp_sp --attention fused,unfused --tp "${TP:-0}" \
        --pass "${PASS:-fwd,fwd_bwd}" ;;
    sp_tp_layer:cpu)
      printf '%s\n' --mode layer --seq "${SEQ:-32}" --batch 1 --hidden 512 --heads 8 --tp "${TP:-0}" \
        --pass "${PASS:-fwd,fwd_bwd}" --iters 3 --warmup 1 ;;
    ring_attention:gpu)
      printf '%s\n' --block "${BLOCK:-1K:16K:x2}" --layout "${LAYOUT:-contiguous,zigzag}" \
        --variant ring --causal 0,1 --heads 64 --kv-heads 8 --head-dim 128 --batch 1 \
        --cp "${CP:-0}" --pass "${PASS:-fwd,fwd_bwd}" ;;
    ring_attention:cpu)
      printf '%s\n' --block "${BLOCK:-32,64}" --layout "${LAYOUT:-contiguous,zigzag}" \
        --variant ring --causal 1 --heads 4 --kv-heads 2 --head-dim 64 --batch 1 \
        --cp "${CP:-0}" --pass "${PASS:-fwd,fwd_bwd}" --iters 3 --warmup 1 ;;
    ulysses:gpu)
      printf '%s\n' --seq "${SEQ:-32K:256K:x2}" --heads 64 --kv-heads 8 --head-dim 128 \
        --batch 1 --causal 1 --ulysses-degree "${DEGREE:-8}" --cp "${CP:-0}" \
        --pass "${PASS:-fwd,fwd_bwd}" ;;
    ulysses:cpu)
      printf '%s\n' --seq "${SEQ:-256}" --heads 4 --kv-heads 4 --head-dim 64 --batch 1 \
        --causal 1 --ulysses-degree "${DEGREE:-4}" --cp "${CP:-0}" --pass "${PASS:-fwd,fwd_bwd}" \
        --iters 3 --warmup 1 ;;
    moe:gpu)
      printf '%s\n' --tokens "${TOKENS:-4096}" --hidden 4096 --ffn-hidden 14336 \
        --experts "${EXPERTS:-64}" --top-k 2 --mlp swiglu --skew "${SKEW:-none}" \
        --capacity-factor 1.25 --ep "${EP:-0}" --pass "${PASS:-fwd,fwd_bwd}" ;;
    moe:cpu)
      printf '%s\n' --tokens "${TOKENS:-64}" --hidden 64 --ffn-hidden 128 \
        --experts "${EXPERTS:-8}" --top-k 2 --mlp swiglu --skew "${SKEW:-none}" \
        --capacity-factor 1.25 --ep "${EP:-0}" --pass "${PASS:-fwd,fwd_bwd}" --iters 3 --warmup 1 ;;
    *) suite_die "no case set '$set' in mode '$mode' (slurm/lib/run_bench.sh)" ;;
  esac
}

# suite_prepare <default link preset>: the part every job shares. Goes to the repository root,
# takes an array task's variables, and sets the globals suite_mode (gpu, cpu), suite_python,
# suite_transport, suite_backend, suite_dtype, suite_link (the preset, its variables exported)
# and suite_job (the job's id, array tasks as <array id>_<task>).
suite_prepare() {
  local default_link=$1
  cd "${SUITE_ROOT:-${SLURM_SUBMIT_DIR:-$PWD}}"
  # A job array from scripts/envs/sweep.py --array: line N of the cells file holds task N's variables.
  if [[ -n ${SUITE_SWEEP_CELLS:-} && -n ${SLURM_ARRAY_TASK_ID:-} ]]; then
    local cell kv
    cell=$(sed -n "$((SLURM_ARRAY_TASK_ID + 1))p" "$SUITE_SWEEP_CELLS")
    [[ -n $cell ]] || suite_die "no line for array task $SLURM_ARRAY_TASK_ID in $SUITE_SWEEP_CELLS"
    for kv in $cell; do export "${kv?}"; done
  fi
  suite_mode=${SUITE_MODE:-gpu}
  [[ $suite_mode == gpu || $suite_mode == cpu ]] || suite_die "SUITE_MODE must be gpu or cpu, not '$suite_mode'"
  suite_python=${PYTHON:-.venv/bin/python}
  [[ -x $suite_python ]] || suite_python=python3
  if [[ $suite_mode == cpu ]]; then
    suite_transport=mpi suite_backend=cpu suite_dtype=fp32
  else
    suite_transport=$(suite_gpu_transport "${BIN_DIR:-build/bin}/suite_features.txt") || exit 2
    suite_backend=cuda suite_dtype=${DTYPE:-bf16}
  fi
  suite_link=${LINK:-$default_link}
  local preset
  preset=$("$suite_python" -m scripts link-presets "$suite_link" --transport "$suite_transport" --shell) ||
    suite_die "link preset '$suite_link' (see: python3 -m scripts link-presets --list)"
  eval "$preset"  # exports the preset's variables and SUITE_LINK_ENV (recorded in the results)
  suite_job=${SLURM_JOB_ID:-local$$}
  [[ -n ${SLURM_ARRAY_TASK_ID:-} ]] && suite_job="${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"
  return 0
}

# suite_main <case set> <default link preset>
suite_main() {
  set -euo pipefail
  local set=$1 default_link=$2
  suite_prepare "$default_link"
  local bench=${set%_layer}  # sp_tp_layer runs the sp_tp executable
  local mode=$suite_mode python=$suite_python transport=$suite_transport backend=$suite_backend
  local dtype=$suite_dtype link=$suite_link job=$suite_job
  local bin="${BIN_DIR:-build/bin}/$bench"
  [[ -x $bin ]] || suite_die "$bin is not built (make build, or set BIN_DIR)"

  local dir="${RESULTS_ROOT:-results/slurm}/${SLURM_JOB_NAME:-$set}-$job"
  mkdir -p "$dir"
  local out="$dir/$set.h5"

  local -a args launch
  local case_args
  case_args=$(suite_case_args "$set" "$mode") || exit 2
  mapfile -t args <<<"$case_args"
  # shellcheck disable=SC2206  # ARGS is a flag string meant to split on spaces
  args+=(--backend "$backend" --transport "$transport" --dtype "$dtype" --link "$link"
         --timeout "${TIMEOUT:-900}" --out "$out" ${ARGS:-})
  if [[ ${LAUNCHER:-srun} == srun ]]; then
    launch=(srun --mpi="${SRUN_MPI:-pmix}")
  elif [[ ${LAUNCHER} == mpirun ]]; then
    launch=(mpirun -np "${SLURM_NTASKS:-1}")  # Open MPI reads the allocation from Slurm
    [[ $mode == cpu ]] && launch+=(--oversubscribe)
  else
    suite_die "LAUNCHER must be srun or mpirun, not '$LAUNCHER'"
  fi

  {
    echo "job $job on ${SLURM_JOB_NODELIST:-$(hostname)}: $set ($mode), link $link"
    echo "link env: ${SUITE_LINK_ENV:-<library defaults>}"
    echo "+ ${launch[*]} $bin ${args[*]}"
  } | tee "$dir/job.txt"
  local rc=0
  "${launch[@]}" "$bin" "${args[@]}" || rc=$?
  if [[ $rc -eq 0 && ! -f $out ]]; then  # e.g. a launch failure the launcher reported as 0
    echo "error: the benchmark wrote no $out" >&2
    rc=3
  fi
  echo "benchmark exit status: $rc" | tee -a "$dir/job.txt"

  # The steps below read the results with h5py and numpy (scripts/requirements.txt). A compute
  # node needs no Python packages: where this one's Python lacks them, the steps are left for
  # the login node, said once.
  local py_ok=1
  if [[ $rc -eq 0 ]] && ! "$python" -c 'import h5py, numpy' 2>/dev/null; then
    py_ok=0
    echo "note: $python has no h5py here: wire bytes, plots and the compare step are left for" \
         "the login node (.venv/bin/suite compare $out)" | tee -a "$dir/job.txt"
    [[ ${COMPARE:-auto} == 1 ]] && { echo "error: COMPARE=1 needs h5py in $python" >&2; rc=2; }
  fi

  # The library's own byte counts (Open MPI's monitoring) in extra runs of each case, beside
  # the payload; the timed run above never has monitoring on. By default for the collectives
  # (where the library's algorithm decides the bytes); WIRE=1 for every set, WIRE=0 never;
  # WIRE_CASES selects cases (a regular expression). MPI transport only: NCCL has no counters.
  local wire_default=0
  [[ $set == sp_tp ]] && wire_default=1
  if [[ $rc -eq 0 && $py_ok == 1 && ${WIRE:-$wire_default} == 1 && $transport == mpi ]]; then
    "$python" -m scripts wire-bytes "$out" --cases "${WIRE_CASES:-}" |
      tee -a "$dir/job.txt" || echo "warning: wire_bytes.py failed" | tee -a "$dir/job.txt"
  fi

  if [[ $rc -eq 0 && $py_ok == 1 && ${PLOT:-$([[ $mode == gpu ]] && echo 1 || echo 0)} == 1 ]]; then
    "$python" -m scripts plot "$out" --out "$dir/plots" || echo "warning: plotting failed"
  fi
  local compare=${COMPARE:-auto}
  if [[ $rc -eq 0 && $py_ok == 1 && $compare != 0 ]]; then
    local -a cmp=("$python" -m scripts compare "$out" --registry "${BASELINES:-results/baselines}"
                  --verdict "$dir/$set.compare.json")
    [[ $compare == 1 ]] && cmp+=(--require-baseline)
    # shellcheck disable=SC2206
    cmp+=(${COMPARE_ARGS:-})
    local crc=0
    "${cmp[@]}" >"$dir/$set.compare.txt" 2>&1 || crc=$?
    cat "$dir/$set.compare.txt"
    echo "compare exit status: $crc (verdict in $dir/$set.compare.json)" | tee -a "$dir/job.txt"
    [[ $crc -eq 2 ]] && rc=2
  fi
  return "$rc"
}
