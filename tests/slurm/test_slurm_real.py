#!/usr/bin/env python3
"""The job scripts of slurm/ under a real Slurm: a one-node cluster on localhost (slurmctld,
slurmd, munge from Debian's packages, installed when missing and root), every script
submitted in CPU mode with small sizes, then the results files, their cluster attributes and
the compare step's verdicts checked. Everything it starts is stopped at the end.

Exit 0 pass, 1 fail, 77 skip (not root and Slurm missing, packages not installable, or the
daemons cannot start here).

    test_slurm_real.py --bin-dir build/bin --python .venv/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import h5py

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
from scripts import module_command  # noqa: E402

from scripts.envs.link_presets import env_string, resolve  # noqa: E402
from local_slurm import LocalSlurm, Unavailable, ensure_packages  # noqa: E402

sys.path.insert(0, str(REPO / "tests" / "integration"))
from run_scenario import plan_check_table  # noqa: E402
from scenarios_plan import block_sizes, judge_inside, probe_slope_bw  # noqa: E402
from scenarios_shaped import cpu_wait_s  # noqa: E402

SKIP = 77
RANKS = 4
# Time: what the jobs take depends on the host (its speed, its other load), so no wait has a
# fixed budget. The first sp_tp job, alone on the node, is the reference: the jobs submitted
# after it may take JOBS_SLACK x its time for each two of them (two run at once and share the
# cores) and never less than LATER_JOBS_MIN_S. Hangs are caught by Slurm (each job's --time)
# and by TEST_LIMIT_S, under ctest's TIMEOUT (tests/slurm/CMakeLists.txt: 3600 s) with room
# to stop Slurm.
TEST_LIMIT_S = 3300  # the whole test from its start, apt (300 s at most) included
JOB_TIME_MIN = 15  # each job's Slurm time limit (the partition allows 30)
JOBS_SLACK = 3
LATER_JOBS_MIN_S = 400

# (label, sbatch script, case set (results file stem), benchmark binary, extra environment,
# extra sbatch flags). Multi-node scripts run on the one node (--nodes=1 overrides).
JOBS = [
    ("sp_tp_tcp_groups", "sp_tp_multinode.sbatch", "sp_tp", "sp_tp",
     {"LINK": "tcp", "TP": "2"}, ["--nodes=1"]),
    ("sp_tp_layer_mpirun", "sp_tp_layer.sbatch", "sp_tp_layer", "sp_tp", {"LAUNCHER": "mpirun"}, []),
    ("ring_attention", "ring_attention.sbatch", "ring_attention", "ring_attention", {}, []),
    # The multi-node scripts default to nvlink-ib, which forces Open MPI's UCX PML: absent on
    # a CI machine without InfiniBand, so they run with presets this machine has.
    ("ring_attention_multinode", "ring_attention_multinode.sbatch", "ring_attention",
     "ring_attention", {"LINK": "net"}, ["--nodes=1"]),
    ("ulysses", "ulysses.sbatch", "ulysses", "ulysses", {}, []),
    ("moe", "moe.sbatch", "moe", "moe", {}, []),
    ("moe_multinode", "moe_multinode.sbatch", "moe", "moe", {"LINK": "pcie-host"}, ["--nodes=1"]),
]


# calibrate.sbatch's job: a rank per core of a 2-core host, and its plan check: the planner's
# first, one middle and its last mesh of those ranks, run as srun steps of the job.
CALIBRATION_RANKS = 2
PLAN_CHECK = (f"--gpus {CALIBRATION_RANKS} --top 1 --middle 1 --bottom 1 -- --seq 1024 --hidden 512 --heads 8 "
              "--d-ff 2048 --layers 1 --dtype fp32 --causal")


class Failure(Exception):
    pass


class InsideRateOff(Failure):
    """The calibration's point-to-point rate outside judge_inside's band of link_probe's."""


def expect(cond: bool, msg: str) -> None:
    if not cond:
        raise Failure(msg)


class Run:
    def __init__(self, slurm: LocalSlurm, tmp: Path, bin_dir: Path, python: Path):
        self.slurm, self.tmp, self.bin_dir = slurm, tmp, bin_dir
        self.env = {"SUITE_ROOT": str(REPO), "SUITE_MODE": "cpu", "BIN_DIR": str(bin_dir),
                    "RESULTS_ROOT": str(tmp / "results"), "PYTHON": str(python),
                    "BASELINES": str(tmp / "registry-empty"),
                    "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
        (tmp / "out").mkdir()
        (tmp / "registry-empty").mkdir()
        self.jobs: dict[str, tuple[str, str, str]] = {}  # job id -> (label, script, case set)

    def submit(self, label: str, script: str, case_set: str, env: dict[str, str],
               flags: list[str]) -> str:
        args = ["--gpus-per-node=0", f"--ntasks-per-node={RANKS}", "--nodes=1", f"--time={JOB_TIME_MIN}",
                f"--output={self.tmp}/out/%x-%j.out", "--export=ALL", *flags,
                str(REPO / "slurm" / script)]
        job = self.slurm.sbatch(args, cwd=self.tmp, env={**self.env, **env})
        self.jobs[job] = (label, script, case_set)
        print(f"submitted {label}: job {job} ({script})", flush=True)
        return job

    def output(self, job: str) -> str:
        found = list((self.tmp / "out").glob(f"*-{job}.out"))
        return found[0].read_text(errors="replace") if found else "(no job output)"

    def results_file(self, job: str) -> Path:
        _, script, case_set = self.jobs[job]
        return self.tmp / "results" / f"{script.removesuffix('.sbatch')}-{job}" / f"{case_set}.h5"

    def verdict(self, job: str) -> dict:
        path = self.results_file(job).with_name(self.jobs[job][2] + ".compare.json")
        expect(path.is_file(), f"job {job}: no compare verdict {path}\n{self.output(job)}")
        return json.loads(path.read_text())

    def wait_ok(self, jobs: list[str], timeout: float) -> None:
        states = self.slurm.wait(jobs, timeout)
        for job, (state, code) in states.items():
            expect(state == "COMPLETED" and code == "0:0",
                   f"job {job} ({self.jobs[job][0]}) ended {state} {code}:\n{self.output(job)}")

    def check_results(self, job: str, link: str, group_size: int = RANKS) -> Path:
        """Complete file, every check passed, and the cluster attributes of the job."""
        path = self.results_file(job)
        expect(path.is_file(), f"job {job}: no results file {path}\n{self.output(job)}")
        with h5py.File(path) as f:
            a = f.attrs
            expect(a["complete"] == 1, f"{path}: not complete")
            expect(a["slurm_job_id"] == job, f"{path}: slurm_job_id {a['slurm_job_id']!r} != {job}")
            expect(a["slurm_nodelist"] == self.slurm.host, f"{path}: slurm_nodelist {a['slurm_nodelist']!r}")
            expect(a["link"] == link, f"{path}: link {a['link']!r} != {link}")
            want_env = env_string(resolve(link, "mpi"))
            expect(a["link_env"] == (want_env or "none"), f"{path}: link_env {a['link_env']!r} != {want_env!r}")
            expect(a["world_size"] == RANKS and a["group_size"] == group_size,
                   f"{path}: world {a['world_size']} group {a['group_size']}")
            bench = a["bench"]
            expect(len(f[bench]) > 0, f"{path}: no cases")
            for name, case in f[bench].items():
                expect(case.attrs["check_passed"] == 1, f"{path}: {name} check failed")
                expect(case["time_s"].shape[1] == RANKS, f"{path}: {name} time_s shape")
        print(f"  ok: {self.jobs[job][0]}: {path.name}, {len(h5py.File(path)[bench])} cases, "
              f"link {link}, group {group_size}", flush=True)
        return path


def scaled_copy(src: Path, dest: Path, factor: float) -> None:
    """A copy of a run whose step times are all `factor` times the original."""
    shutil.copyfile(src, dest)
    with h5py.File(dest, "r+") as f:
        for bench in [k for k in f if k != "ranks"]:
            for case in f[bench].values():
                case["time_s"][...] = case["time_s"][()] * factor
                for key in list(case.attrs):
                    if key.startswith("time_") and key.endswith("_s"):
                        case.attrs[key] = case.attrs[key] * factor


def check_calibration(run: Run, job: str, busy: float | None) -> None:
    """calibrate.sbatch on one node of CALIBRATION_RANKS tasks: a calibration of the job (its id, its
    ranks per node, the inside level only, every rate fitted; the point-to-point one against
    link_probe's between two ranks of this node, where the host was not busy: `busy` is the share
    of the job's time other tasks waited for a CPU), the runs behind it kept, the plan check's
    meshes run in the job (srun steps), each with its measured time and error, and the planner
    takes it."""
    path = run.tmp / "results" / f"calibrate-{job}" / "calibration.json"
    expect(path.is_file(), f"job {job}: no calibration {path}\n{run.output(job)}")
    doc = json.loads(path.read_text())
    where = doc["where"]
    expect(doc["format"] == "parallelism-bench calibration" and where["kind"] == "slurm"
           and where["job_id"] == job and where["nodes"] == 1 and doc["ranks_per_node"] == CALIBRATION_RANKS
           and where["link"] == "pcie-host",
           f"{path}: where {where}, ranks per node {doc['ranks_per_node']}")
    expect(list(doc["levels"]) == ["intra"] and doc["levels"]["intra"]["ranks"] == CALIBRATION_RANKS,
           f"{path}: levels {list(doc['levels'])} (one node: the inside level only)")
    for kind in ("rs_ag", "all_reduce", "a2a", "p2p"):
        fit = doc["levels"]["intra"][kind]
        expect(fit["bw"] > 0 and len(fit["points"]) >= 2, f"{path}: {kind} fit {fit}")
    fit, rates = doc["levels"]["intra"]["p2p"], {}
    for size in block_sizes(fit):
        probe = subprocess.run(["mpirun", "-np", "2", "--oversubscribe", str(run.bin_dir / "link_probe"), "--bytes",
                                str(size), "--reps", "16", "--warmup", "4", "--pairs", "0:1"],
                               capture_output=True, text=True, timeout=120,
                               env=dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"))
        expect(probe.returncode == 0 and "rate_MBps" in probe.stdout, f"link_probe:\n{probe.stdout}{probe.stderr}")
        rates[size] = float(probe.stdout.split("rate_MBps")[1].split()[0])
    runs = sorted(p.name for p in path.with_name("calibration_runs").iterdir())
    expect(sum(n.startswith("kernel_bench") for n in runs) == CALIBRATION_RANKS,
           f"{path}: kernel_bench copies {runs} (one per rank of the node)")
    expect("next: " in run.output(job), f"job {job}: no next step printed\n{run.output(job)}")
    check = path.with_name("plan_check.txt").read_text()
    try:
        judge_inside("inside the node", fit["bw"], probe_slope_bw(rates), busy)
    except SystemExit as err:  # run_scenario's verdict, this test's failure
        raise InsideRateOff(f"{path.parent}: {err}") from None
    try:
        plan_check_table(check, 3, "measured")  # --top 1 --middle 1 --bottom 1: each mesh ran
    except SystemExit as err:
        raise Failure(f"{path.parent}: {err}") from None
    plan = subprocess.run([str(run.bin_dir / "model"), "--section", "plan", "--calibration", str(path),
                           "--gpus", str(CALIBRATION_RANKS), "--seq", "1024", "--hidden", "512", "--heads", "8",
                           "--d-ff", "2048", "--layers", "1", "--dtype", "fp32", "--causal"],
                          capture_output=True, text=True, timeout=60)
    expect(plan.returncode == 0 and "tp" in plan.stdout, f"model --section plan on it:\n{plan.stdout}{plan.stderr}")
    print(f"  ok: calibrate.sbatch: {path.name}, inside level of {CALIBRATION_RANKS} ranks, the planner reads it")


def scenario(run: Run) -> None:
    tmp, python = run.tmp, run.env["PYTHON"]
    # 1. sp_tp with an empty registry: the compare step says there is no baseline. Its time is
    # the reference for the later waits (what one job takes on this host, now).
    t0 = time.monotonic()
    first = run.submit("sp_tp", "sp_tp.sbatch", "sp_tp", {}, [])
    # An unknown preset fails the job before the benchmark starts, with no results file.
    bad = run.submit("bad_preset", "sp_tp.sbatch", "sp_tp", {"LINK": "no-such-link"}, [])
    run.wait_ok([first], JOB_TIME_MIN * 60 + 60)  # Slurm ends it at its --time
    ref_s = time.monotonic() - t0
    print(f"  reference: the first sp_tp job took {ref_s:.0f} s", flush=True)
    base = run.check_results(first, "nvlink")
    expect(run.verdict(first)["verdict"] == "no-baseline", "empty registry: verdict is not no-baseline")
    state, code = run.slurm.wait([bad], max(60, ref_s))[bad]
    expect(state == "FAILED" and code.startswith("2"), f"unknown preset: job ended {state} {code}")
    expect("unknown link preset 'no-such-link'" in run.output(bad), "unknown preset: no message")
    expect(not run.results_file(bad).parent.exists(), "unknown preset: a results folder was made")
    print("  ok: unknown link preset refused")

    # 2. Registries built from the first run: the run itself, and one 1000x faster.
    same, fast = tmp / "registry-same", tmp / "registry-fast"
    add = [*module_command("results.baselines", python), "add"]
    stored = subprocess.run(add + [str(base), "--registry", str(same)], capture_output=True, text=True,
                            check=True).stdout.strip()
    fast_run = tmp / "fast.h5"
    scaled_copy(base, fast_run, 1e-3)
    subprocess.run(add + [str(fast_run), "--registry", str(fast)], check=True, capture_output=True)
    # WIRE=0: the wire-bytes runs (twice the job's time) are checked by the first job's and
    # sp_tp_tcp_groups' runs; these jobs' figures are their times and verdicts.
    relaxed = {"COMPARE": "1", "COMPARE_ARGS": "--threshold 0.9 --noise-k 3", "WIRE": "0"}
    jobs = {"same": run.submit("compare_same", "sp_tp.sbatch", "sp_tp",
                               {**relaxed, "BASELINES": str(same)}, []),
            "fast": run.submit("compare_fast", "sp_tp.sbatch", "sp_tp",
                               {**relaxed, "BASELINES": str(fast)}, [])}
    present, skipped = [], []
    for label, script, case_set, binary, env, flags in JOBS:
        if not (run.bin_dir / binary).exists():
            skipped.append(f"{label} ({binary} is not built)")
            continue
        present.append((run.submit(label, script, case_set, env, flags), env))
    for line in skipped:
        print(f"  skip: {line}")
    # A sweep through the launcher as a job array: 2 sizes x 2 presets, CPU mode.
    sweep = subprocess.run(
        [*module_command("envs.sweep", python), "sp_tp", "--values", "32,64", "--link",
         "nvlink,tcp", "--cpu", "--array", f"--tasks-per-node={RANKS}", "--sweep-dir",
         str(tmp / "sweep"), "--model", str(run.bin_dir / "model"),
         "--sbatch-args", f"--time={JOB_TIME_MIN} --output={tmp}/out/%x-%A_%a.out"],
        capture_output=True, text=True, env={**run.slurm.env, **run.env, "WIRE": "0"}, timeout=120)
    expect(sweep.returncode == 0, f"sweep.py failed:\n{sweep.stdout}\n{sweep.stderr}")
    array = sweep.stdout.split("submitted: ")[-1].split()[0].split(";")[0]
    tasks = [f"{array}_{i}" for i in range(4)]
    later = list(jobs.values()) + [j for j, _ in present]
    budget = max(LATER_JOBS_MIN_S, JOBS_SLACK * ref_s * (len(later) + len(tasks)) / 2)
    print(f"  waiting up to {budget:.0f} s for {len(later) + len(tasks)} jobs "
          f"({JOBS_SLACK} x {ref_s:.0f} s per two jobs)", flush=True)
    end = time.monotonic() + budget
    run.wait_ok(later, budget)
    states = run.slurm.wait(tasks, max(1.0, end - time.monotonic()))
    expect(all(s == "COMPLETED" for s, _ in states.values()), f"sweep array ended {states}")

    v_same, v_fast = run.verdict(jobs["same"]), run.verdict(jobs["fast"])
    expect(v_same["baseline"] == stored, f"registry pick {v_same['baseline']} != {stored}")
    expect(v_same["verdict"] in ("ok", "regression") and v_same["cases"],
           f"same-system compare: {v_same}")
    expect(v_fast["verdict"] == "regression" and len(v_fast["regressions"]) == len(v_fast["cases"]),
           f"1000x slower than the baseline but verdict {v_fast['verdict']}: {v_fast['regressions']}")
    expect(all(c["ratio"] > 2 for c in v_fast["cases"]),  # 1000x planted, loaded CI varies
           f"ratios of the 1000x case: {[c['ratio'] for c in v_fast['cases']]}")
    print(f"  ok: compare step picked {Path(stored).parent.name}; verdicts "
          f"{v_same['verdict']} (same system) and {v_fast['verdict']} (planted 1000x)")
    run.check_results(jobs["same"], "nvlink")
    for job, env in present:
        run.check_results(job, env.get("LINK", "nvlink"), int(env.get("TP", RANKS)))
    # The planner's calibration on one node, alone (rates measured beside other jobs on 2 cores
    # do not grow with bytes) and with a rank per core: CALIBRATION_RANKS ranks. Its default
    # preset (nvlink-ib) asks Open MPI for UCX, which needs InfiniBand: pcie-host here.
    # A two-point slope of shared-memory times on a shared 2-core host strays past the inside
    # level's band now and then (0.47x once, with other tasks waiting for a CPU 3% of the time):
    # such a calibration is measured once more, and the second judged.
    for attempt in (1, 2):
        t0, w0 = time.monotonic(), cpu_wait_s()
        calib = run.submit("calibrate", "calibrate.sbatch", "calibration",
                           {"PLAN_CHECK_ARGS": PLAN_CHECK, "LINK": "pcie-host"},
                           ["--nodes=1", f"--ntasks-per-node={CALIBRATION_RANKS}"])
        run.wait_ok([calib], max(LATER_JOBS_MIN_S, JOBS_SLACK * ref_s))
        took, w1 = time.monotonic() - t0, cpu_wait_s()
        print(f"  calibrate.sbatch took {took:.0f} s", flush=True)
        try:
            check_calibration(run, calib, None if w0 is None or w1 is None else (w1 - w0) / took)
            break
        except InsideRateOff as err:
            if attempt == 2:
                raise
            print(f"  {err}\n  measuring the calibration once more", flush=True)
    for i, task in enumerate(tasks):
        run.jobs[task] = (f"sweep task {i}", "sp_tp.sbatch", "sp_tp")
        path = tmp / "results" / f"sp_tp-sweep-n1-{task}" / "sp_tp.h5"
        expect(path.is_file(), f"sweep task {task}: no {path}\n{sweep.stdout}")
        with h5py.File(path) as f:
            seq, link = (32, 64)[i % 2], ("nvlink", "tcp")[i // 2]
            expect(f.attrs["link"] == link and f.attrs["slurm_array_task"] == str(i),
                   f"{path}: link {f.attrs['link']} task {f.attrs['slurm_array_task']}")
            expect(f"rs_ag_fp32_act_s{seq}_b1_h64" in f["sp_tp"], f"{path}: no s={seq} case")
    print(f"  ok: sweep.py --array: 4 tasks, values x presets as planned")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin-dir", type=Path, required=True)
    parser.add_argument("--python", type=Path, default=Path(sys.executable))
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    bin_dir = args.bin_dir.resolve()
    if not (bin_dir / "sp_tp").exists():
        print(f"FAIL: {bin_dir}/sp_tp is not built")
        return 1
    # A SIGTERM (ctest, a CI runner) unwinds through the finally below, which stops Slurm.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    tmp = Path(tempfile.mkdtemp(prefix="suite_slurm_"))
    os.chmod(tmp, 0o755)
    start = time.monotonic()
    slurm = LocalSlurm(tmp / "slurm", cpus=2 * RANKS)
    status = 0
    try:
        ensure_packages(tmp / "apt.log")
        slurm.start()
        print(f"slurm up on {slurm.host} in {time.monotonic() - start:.0f} s", flush=True)
        slurm.deadline = start + TEST_LIMIT_S
        scenario(Run(slurm, tmp, bin_dir, args.python.absolute()))
        print(f"PASS slurm_real in {time.monotonic() - start:.0f} s")
    except Unavailable as err:
        print(f"SKIP: a local Slurm cannot run here: {err}")
        status = SKIP
    except (Failure, RuntimeError, TimeoutError, subprocess.CalledProcessError) as err:
        print(f"FAIL: {err}\n{slurm.logs()}")
        status = 1
    finally:
        slurm.stop()
        if args.keep or status == 1:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
