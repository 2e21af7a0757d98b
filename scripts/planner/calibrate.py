"""Measure the rates the planner's formulas need, on the machine or simulated cluster at hand.

    calibrate.py --out calib.json [--np 4] [--ranks-per-node 4]             this machine (mpirun)
    calibrate.py --out calib.json --simulate --sim-flops 4e14 [--link nvlink-ib] [--gpus-per-node 8]
    calibrate.py --out calib.json --emulated 1gbit --nodes 2 --gpus-per-node 2 --dtype fp32   (root)
    calibrate.py --out calib.json --slurm --backend cuda      inside a Slurm job (slurm/calibrate.sbatch)
    calibrate.py --out calib.json --from-spec scripts/planner/specs/dgx_a100_hdr.json   published figures

Per link level (inside a node; across nodes, where there are nodes to cross) it runs the
suite's own benchmarks over a group placed on that level and fits each kind of transfer to
`time = steps x lat + bytes / bw`:
  rs_ag       sp_tp --mode collectives, reduce-scatter + all-gather (2 (t-1) steps; (t-1)/t n each)
  all_reduce  the same run's all-reduce (2 (t-1) steps, 2 (t-1)/t n)
  a2a         moe --mode a2a, uniform traffic (t-1 steps, the bytes a rank sends)
  p2p         ring_attention's transfer-only rounds (one step a round, the K/V block)
and the compute rates: GEMM and attention FLOP/s forward and backward (kernel_bench on this
machine; a simulation's compute is modeled at --sim-flops, recorded as given). The JSON file
says where it ran (host or simulated platform, ranks, levels measured), the element type, and
for every fit its points, so a reader can redo it. `model --section plan --calibration FILE`
reads it. Simulated levels: inside a node, the `fattree` platform's one node of
--gpus-per-node GPUs; across, the same links with one GPU per node. Emulated levels
(scripts/envs/emulated_cluster.py, a cluster of network namespaces on this machine, CPU backend):
inside a node, one node of --gpus-per-node ranks on shared memory; across, --nodes nodes of one
rank behind NICs of RATE. Its compute rates are kernel_bench's with --nodes x --gpus-per-node
copies running at once, each rank's share of this machine's cores when the whole emulated
cluster computes (what the mesh's ranks get there). Slurm levels (--slurm, inside a job's
allocation; slurm/calibrate.sbatch submits it): inside a node, an srun step of the job's ranks per
node on one node; across, one rank on each of the job's nodes (a one-node job measures the inside
level only); the compute rates from kernel_bench on one node (on the CPU backend, one copy per
rank of a node at once). The runs' files stay beside the calibration (<out>_runs/): the steps may
land on other nodes, so they write to the shared file system.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import h5py
import numpy as np

from scripts import ROOT, module_command
from scripts.planner.cluster_spec import SpecError, calibration_from_spec

FORMAT = "parallelism-bench calibration"
SIZES = "1M:64M:x4"


class CalibrationError(RuntimeError):
    """A run failed or gave nothing to fit: one `error:` line, exit 2."""


def fit(points: list[tuple[float, float, float]]) -> dict:
    """Least squares of time = steps x lat + bytes / bw over (steps, bytes, time) points of one
    group size (steps fixed): slope 1/bw, intercept steps x lat."""
    if len(points) < 2:
        raise CalibrationError(f"{len(points)} point(s) to fit; need 2 or more sizes")
    steps = points[0][0]
    x = np.array([p[1] for p in points])
    y = np.array([p[2] for p in points])
    slope, intercept = np.polyfit(x, y, 1)
    if not slope > 0:
        raise CalibrationError(f"time does not grow with bytes ({points}): nothing to fit a bandwidth to")
    return {"bw": float(1 / slope), "lat": float(max(intercept, 0.0) / max(steps, 1)),
            "points": [{"steps": s, "bytes": b, "time_s": t} for s, b, t in points]}


def srun_default() -> str:
    """The step launcher, as slurm/lib/run_bench.sh launches the benchmarks."""
    return f"srun --mpi={os.environ.get('SRUN_MPI', 'pmix')}"


def slurm_step(args: argparse.Namespace, nodes: int, per_node: int) -> list[str]:
    """An srun step of the job: `nodes` nodes, `per_node` ranks on each."""
    return [*args.srun.split(), f"--nodes={nodes}", f"--ntasks={nodes * per_node}", f"--ntasks-per-node={per_node}"]


def transport_flags(args: argparse.Namespace) -> list[str]:
    return ["--transport", args.transport] if args.transport else []


def slurm_allocation(args: argparse.Namespace) -> None:
    """--nodes and --gpus-per-node from the job's allocation where not given."""
    if not os.environ.get("SLURM_JOB_ID"):
        raise CalibrationError("--slurm runs inside a Slurm job (sbatch slurm/calibrate.sbatch); "
                               "SLURM_JOB_ID is not set here")
    if args.nodes is None:
        args.nodes = int(os.environ.get("SLURM_JOB_NUM_NODES") or os.environ.get("SLURM_NNODES") or 1)
    if args.gpus_per_node is None:
        # "8", "8(x2)" or "8,4": the first node's tasks (SLURM_NTASKS_PER_NODE is set only when asked)
        tasks = os.environ.get("SLURM_NTASKS_PER_NODE") or os.environ.get("SLURM_TASKS_PER_NODE") or ""
        digits = tasks.split("(")[0].split(",")[0]
        if not digits.isdigit():
            raise CalibrationError(f"cannot read the ranks per node from the job (SLURM_TASKS_PER_NODE "
                                   f"{tasks!r}); give --gpus-per-node")
        args.gpus_per_node = int(digits)


class Runner:
    """Runs a benchmark on one level: through mpirun here, or simulate.py's fattree."""

    def __init__(self, args: argparse.Namespace, work: Path):
        self.args = args
        self.work = work

    def run(self, level: str, bench: str, name: str, *flags: str) -> h5py.File:
        a = self.args
        out = self.work / f"{level}_{name}.h5"
        ranks = a.gpus_per_node if level == "intra" else a.nodes
        if a.emulated:
            nodes, per_node = (1, ranks) if level == "intra" else (ranks, 1)
            cmd = [*module_command("envs.emulated_cluster"), "--quiet", "--nodes", str(nodes),
                   "--ranks-per-node", str(per_node), "--nic", a.emulated, "--mpirun", a.mpirun, "--",
                   str(a.bin_dir / bench), "--backend", "cpu", "--dtype", a.dtype, "--out", str(out),
                   *flags]
        elif a.slurm:
            step = slurm_step(a, 1, ranks) if level == "intra" else slurm_step(a, ranks, 1)
            cmd = [*step,
                   str(a.bin_dir / bench), "--backend", a.backend, "--dtype", a.dtype, "--out", str(out),
                   *transport_flags(a), *flags]
        elif a.simulate:
            gpus = a.gpus_per_node if level == "intra" else 1
            nodes = 1 if level == "intra" else a.nodes
            cmd = [*module_command("envs.simulate"), bench, "--platform", "fattree",
                   "--nodes", str(nodes), "--gpus-per-node", str(gpus), "--ranks", str(ranks),
                   "--link", a.link, "--sim-flops", str(a.sim_flops), "--no-plot", "--out", str(out)]
            if a.sim_build:
                cmd += ["--build", str(a.sim_build)]
            cmd += ["--", "--dtype", a.dtype, *flags]
        else:
            env_ranks = a.np
            cmd = [a.mpirun, "-np", str(env_ranks), "--oversubscribe", str(a.bin_dir / bench),
                   "--backend", a.backend, "--dtype", a.dtype, "--out", str(out), *transport_flags(a), *flags]
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        print(f"calibrate: {level} level, {bench} ({name}) on {ranks} ranks", file=sys.stderr, flush=True)
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            # The launcher's own last line rarely says why: the benchmark's error lines do.
            lines = [l for l in (proc.stderr + proc.stdout).splitlines() if l.strip()]
            why = [l for l in lines if "error" in l.lower()][:3] or lines[-3:]
            raise CalibrationError(f"{' '.join(cmd)} failed (exit {proc.returncode}): " + " | ".join(why))
        return h5py.File(out, "r")


def collectives(f: h5py.File) -> dict:
    """rs_ag and all_reduce fits from one sp_tp collectives file."""
    by_op: dict[str, list] = {"allreduce": [], "rs_ag": []}
    for g in f["sp_tp"].values():
        a = g.attrs
        t = int(a["t"])
        by_op[str(a["op"])].append((2 * (t - 1), float(a["bytes_sent_per_rank"]), float(a["time_median_s"])))
    return {"all_reduce": fit(by_op["allreduce"]), "rs_ag": fit(by_op["rs_ag"])}


def all_to_all(f: h5py.File, ranks: int) -> dict:
    return fit([(ranks - 1, float(g.attrs["a2a_bytes_per_rank"]), float(g.attrs["time_median_s"]))
                for g in f["moe"].values()])


def point_to_point(f: h5py.File) -> dict:
    """The ring's transfer-only pass: n_c - 1 rounds, each one K/V block to the next rank."""
    points = []
    for g in f["ring_attention"].values():
        a = g.attrs
        rounds = int(a["n_c"]) - 1
        points.append((1, float(a["bytes_per_round"]), float(a["time_transfer_only_median_s"]) / rounds))
    return fit(points)


def compute_rates(args: argparse.Namespace, work: Path) -> dict:
    if args.simulate:
        return {"gemm_flops": args.sim_flops, "attention_flops": args.sim_flops,
                "attention_bwd_flops": args.sim_flops,
                "source": "given: the simulation's modeled compute (--sim-flops)"}
    copies = args.nodes * args.gpus_per_node if args.emulated else 1
    if args.slurm and args.backend == "cpu":
        copies = args.gpus_per_node  # a node's ranks share its cores
    pattern = f"^(gemm|attention|attention_bwd)_{args.backend}/{args.dtype}/"
    kernel_bench = str(args.bin_dir / "kernel_bench")
    outs = [work / f"kernel_bench{i}.h5" for i in range(copies)]
    if args.slurm:  # one step on one node; each task writes the file of its number
        cmd = [*slurm_step(args, 1, copies), "sh", "-c", 'exec "$0" --out="$1$SLURM_PROCID.h5" "$2"',
               kernel_bench, str(work / "kernel_bench"), f"--benchmark_filter={pattern}"]
        procs = [subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)]
    else:  # at once: each rank's share of the cores when all compute
        procs = [subprocess.Popen([kernel_bench, f"--out={out}", f"--benchmark_filter={pattern}"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for out in outs]
    for proc in procs:
        _, err = proc.communicate()
        if proc.returncode != 0:
            raise CalibrationError(f"kernel_bench failed: {err.strip()[-300:]}")
    best_of: list[dict[str, float]] = []
    for out in outs:
        rates: dict[str, list[float]] = {"gemm": [], "attention": [], "attention_bwd": []}
        with h5py.File(out, "r") as f:
            for g in f["kernel_bench"].values():
                a = g.attrs
                op = str(a.get("op", ""))
                if op in rates and "flops_per_s" in a:
                    rates[op].append(float(a["flops_per_s"]))
        if not rates["gemm"] or not rates["attention"]:
            raise CalibrationError(f"kernel_bench gave no {args.dtype} GEMM or attention rate on {args.backend}")
        best_of.append({k: max(v) for k, v in rates.items() if v})
    best = {k: float(np.median([b.get(k, b["attention"]) for b in best_of])) for k in best_of[0]}
    source = f"kernel_bench on {args.backend}, {args.dtype}: the best case of each kernel"
    if copies > 1:
        source += f", the median of {copies} copies running at once (the ranks of a node)"
    return {"gemm_flops": best["gemm"], "attention_flops": best["attention"],
            "attention_bwd_flops": best.get("attention_bwd", best["attention"]), "source": source}


def level(runner: Runner, name: str, ranks: int) -> dict:
    sizes = runner.args.sizes
    coll = runner.run(name, "sp_tp", "coll", "--mode", "collectives", "--ops", "allreduce,rs_ag",
                      "--sizes", sizes, "--activation-case", "0", "--iters", "5", "--warmup", "1")
    rates = collectives(coll)
    a2a = runner.run(name, "moe", "a2a", "--mode", "a2a", "--traffic", "uniform", "--bytes", sizes,
                     "--a2a-algo", "flat", "--ranks-per-node", str(ranks), "--iters", "5", "--warmup", "1")
    rates["a2a"] = all_to_all(a2a, ranks)
    # The ring's three modes run attention too: small heads where the CPU computes it.
    on_gpu = runner.args.simulate or runner.args.backend == "cuda"  # K/V blocks of a GPU's sizes
    shape = ["--block", "1K:16K:x4", "--heads", "8", "--head-dim", "128"] if on_gpu \
        else ["--block", runner.args.blocks, "--heads", "2", "--head-dim", "64"]
    ring = runner.run(name, "ring_attention", "ring", *shape, "--layout", "contiguous", "--causal", "0",
                      "--check", "0", "--iters", "3", "--warmup", "1")
    rates["p2p"] = point_to_point(ring)
    return {"ranks": ranks, **rates}


def runs_folder(args: argparse.Namespace):
    """Where the runs write: a temporary folder, or under Slurm one beside the output that every
    node sees (kept: the runs behind the fits)."""
    if not args.slurm:
        return tempfile.TemporaryDirectory(prefix="calibrate_")
    folder = args.out.parent / f"{args.out.stem}_runs"
    folder.mkdir(parents=True, exist_ok=True)
    return contextlib.nullcontext(str(folder))


def write_from_spec(spec: Path, out: Path) -> int:
    try:
        doc, memory_gb = calibration_from_spec(spec)
    except SpecError as e:
        print(f"error: calibrate: --from-spec {e}", file=sys.stderr)
        return 2
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"calibration: {out} (from {spec}; {memory_gb:g} GB a GPU: pass --memory-gb {memory_gb:g})")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="the calibration file (JSON)")
    p.add_argument("--dtype", default="bf16", help="element type of the transfers and kernels (bf16, fp32)")
    p.add_argument("--simulate", action="store_true", help="on SMPI's fattree platform instead of this machine")
    p.add_argument("--from-spec", type=Path, metavar="FILE",
                   help="no run: the rates of a cluster spec's published figures (scripts/planner/specs/)")
    p.add_argument("--emulated", metavar="RATE",
                   help="on a cluster emulated on this machine with NICs of RATE (1gbit, 500mbit...; "
                        "scripts/envs/emulated_cluster.py, root): --nodes nodes of --gpus-per-node ranks")
    p.add_argument("--sim-flops", type=float, default=4e14, help="simulated compute rate (FLOP/s)")
    p.add_argument("--link", default="nvlink-ib", help="the simulated links (suite sim-platform --list)")
    p.add_argument("--slurm", action="store_true",
                   help="inside a Slurm job: srun steps on the job's nodes (slurm/calibrate.sbatch submits it)")
    p.add_argument("--srun", default=srun_default(),
                   help="--slurm: the step launcher and its flags (default: srun --mpi=$SRUN_MPI, pmix unless set)")
    p.add_argument("--gpus-per-node", type=int,
                   help="simulated GPUs (emulated, Slurm: ranks) per node (default 8; Slurm: the job's tasks per node)")
    p.add_argument("--nodes", type=int,
                   help="simulated (emulated) nodes for the across-nodes level (default 8; Slurm: the job's nodes)")
    p.add_argument("--sim-build", type=Path, help="the SMPI build (default build-sim)")
    p.add_argument("--np", type=int, default=4, help="this machine: ranks (one node: the inside level only)")
    p.add_argument("--backend", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--transport", choices=("mpi", "nccl"), help="the benchmarks' transport (default: theirs)")
    p.add_argument("--build", type=Path, default=ROOT / "build", help="the build folder (its bin/ holds the benchmarks)")
    p.add_argument("--bin-dir", type=Path, help="the benchmarks' folder, where not --build/bin")
    p.add_argument("--mpirun", default="mpirun")
    p.add_argument("--sizes", default=SIZES, help=f"message sizes of the collectives (default {SIZES})")
    p.add_argument("--blocks", default="256:4K:x4",
                   help="this machine: the ring's tokens per rank for the point-to-point rate")
    args = p.parse_args(argv)
    args.bin_dir = args.bin_dir or args.build / "bin"
    if args.from_spec:
        return write_from_spec(args.from_spec, args.out)
    try:
        if sum(map(bool, (args.simulate, args.emulated, args.slurm))) > 1:
            raise CalibrationError("one of --simulate, --emulated and --slurm")
        if args.slurm:
            slurm_allocation(args)
        else:
            args.nodes = 8 if args.nodes is None else args.nodes
            args.gpus_per_node = 8 if args.gpus_per_node is None else args.gpus_per_node
        if args.emulated:
            args.backend = "cpu"  # the emulated cluster's ranks are processes of this machine
        if (args.simulate or args.emulated) and (args.gpus_per_node < 2 or args.nodes < 2):
            raise CalibrationError("--gpus-per-node and --nodes must be >= 2 (a group on each level)")
        if args.slurm and (args.gpus_per_node < 2 or args.nodes < 1):
            raise CalibrationError(f"a job of {args.nodes} node(s) of {args.gpus_per_node} rank(s): the inside "
                                   "level needs 2 or more ranks a node")
        if not (args.simulate or args.slurm) and args.np < 2:
            raise CalibrationError("--np must be >= 2 (a group to measure)")
        with runs_folder(args) as tmp:
            work = Path(tmp)
            runner = Runner(args, work)
            if args.slurm:
                levels = {"intra": level(runner, "intra", args.gpus_per_node)}
                if args.nodes >= 2:
                    levels["inter"] = level(runner, "inter", args.nodes)
                where = {"kind": "slurm", "job_id": os.environ["SLURM_JOB_ID"],
                         "nodelist": os.environ.get("SLURM_JOB_NODELIST", ""), "nodes": args.nodes,
                         "gpus_per_node": args.gpus_per_node, "backend": args.backend,
                         "transport": args.transport or "default", "link": os.environ.get("SUITE_LINK_LABEL", ""),
                         "host": socket.gethostname(), "cpu": platform.processor()}
                ranks_per_node = args.gpus_per_node
            elif args.simulate or args.emulated:
                levels = {"intra": level(runner, "intra", args.gpus_per_node),
                          "inter": level(runner, "inter", args.nodes)}
                where = {"kind": "simulated", "platform": "fattree", "link": args.link,
                         "gpus_per_node": args.gpus_per_node}
                if args.emulated:
                    where = {"kind": "emulated", "nic": args.emulated, "nodes": args.nodes,
                             "gpus_per_node": args.gpus_per_node, "host": socket.gethostname(),
                             "cpu": platform.processor(), "machine_cores": len(os.sched_getaffinity(0))}
                ranks_per_node = args.gpus_per_node
            else:
                args.gpus_per_node = args.np  # one node: every rank of it
                levels = {"intra": level(runner, "intra", args.np)}
                where = {"kind": "mpirun", "host": socket.gethostname(), "cpu": platform.processor(),
                         "ranks": args.np, "backend": args.backend}
                ranks_per_node = args.np
            compute = compute_rates(args, work)
    except CalibrationError as e:
        print(f"error: calibrate: {e}", file=sys.stderr)
        return 2
    doc = {"format": FORMAT, "version": 1, "created_utc": datetime.now(timezone.utc).isoformat(),
           "where": where, "dtype": args.dtype, "ranks_per_node": ranks_per_node, "compute": compute,
           "levels": levels}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    for name, lv in levels.items():
        cells = ", ".join(f"{k} {lv[k]['bw'] / 1e9:.3g} GB/s {lv[k]['lat'] * 1e6:.3g} us"
                          for k in ("rs_ag", "all_reduce", "a2a", "p2p"))
        print(f"{name} ({lv['ranks']} ranks): {cells}")
    print(f"compute: GEMM {compute['gemm_flops']:.3g}, attention {compute['attention_flops']:.3g} / "
          f"{compute['attention_bwd_flops']:.3g} FLOP/s ({compute['source']})")
    print(f"calibration: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
