# shellcheck shell=bash disable=SC2154  # suite_* globals: set by run_bench.sh's suite_prepare
# The calibration job (slurm/calibrate.sbatch): scripts/planner/calibrate.py --slurm in the job's
# allocation, its file where model --section plan reads it. Needs run_bench.sh (sourced first)
# for the mode, the link preset and the job folder's name.
#
# Variables (sbatch --export=ALL,NAME=value,...): SUITE_MODE, LINK, TRANSPORT, DTYPE, BIN_DIR,
# RESULTS_ROOT, PYTHON as for every job (slurm/README.md); CALIBRATE_ARGS: extra calibrate.py
# flags (e.g. --sizes 1M:256M:x4); PLAN_CHECK_ARGS: when set, scripts/planner/plan_check.py runs after
# the calibration in the same allocation, with these flags (e.g. `--gpus 16 -- --seq 32768
# --hidden 4096 --heads 32 --layers 32 --causal`): the planner's meshes run on the job's nodes,
# predicted against measured, into plan_check.txt. The batch node's Python needs h5py and numpy
# (scripts/requirements.txt): calibrate.py reads the runs' results files.

# suite_calibrate <default link preset>
suite_calibrate() {
  set -euo pipefail
  suite_prepare "$1"
  "$suite_python" -c 'import h5py, numpy' 2>/dev/null ||
    suite_die "$suite_python has no h5py or numpy: set PYTHON to an interpreter with scripts/requirements.txt"
  local dir="${RESULTS_ROOT:-results/slurm}/${SLURM_JOB_NAME:-calibrate}-$suite_job"
  mkdir -p "$dir"
  local out="$dir/calibration.json"
  export SUITE_LINK_LABEL=$suite_link  # the benchmarks record the preset as their --link
  local -a cmd=("$suite_python" -m scripts calibrate --slurm --out "$out" --backend "$suite_backend"
                --dtype "$suite_dtype" --bin-dir "${BIN_DIR:-build/bin}"
                --srun "srun --mpi=${SRUN_MPI:-pmix}")
  [[ $suite_mode == gpu ]] && cmd+=(--transport "$suite_transport")
  # CPU mode: sizes a CPU node measures in seconds
  [[ $suite_mode == cpu ]] && cmd+=(--sizes 256K:4M:x4 --blocks "256,1K")
  # shellcheck disable=SC2206  # CALIBRATE_ARGS is a flag string meant to split on spaces
  cmd+=(${CALIBRATE_ARGS:-})
  {
    echo "job $suite_job on ${SLURM_JOB_NODELIST:-$(hostname)}: calibration ($suite_mode), link $suite_link"
    echo "link env: ${SUITE_LINK_ENV:-<library defaults>}"
    echo "+ ${cmd[*]}"
  } | tee "$dir/job.txt"
  local rc=0
  "${cmd[@]}" || rc=$?
  echo "calibration exit status: $rc" | tee -a "$dir/job.txt"
  if [[ $rc -eq 0 && -n ${PLAN_CHECK_ARGS:-} ]]; then
    # shellcheck disable=SC2206  # a flag string meant to split on spaces
    local -a check=("$suite_python" -m scripts plan-check --calibration "$out" --bin-dir "${BIN_DIR:-build/bin}"
                    --model "${BIN_DIR:-build/bin}/model" --srun "srun --mpi=${SRUN_MPI:-pmix}"
                    --csv "$dir/plan_check.csv" ${PLAN_CHECK_ARGS})
    echo "+ ${check[*]}" | tee -a "$dir/job.txt"
    "${check[@]}" 2>&1 | tee "$dir/plan_check.txt" || rc=$?  # pipefail: the check's status
    echo "plan check exit status: $rc" | tee -a "$dir/job.txt"
  fi
  if [[ $rc -eq 0 ]]; then
    echo "next: ${BIN_DIR:-build/bin}/model --section plan --calibration $out --gpus <N> --memory-gb <GB>" \
         "--seq <S> --hidden <h> --heads <a> --layers <L> (model --help lists the rest)" | tee -a "$dir/job.txt"
  fi
  return "$rc"
}
