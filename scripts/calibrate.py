#!/usr/bin/env python3
"""Measure the rates the planner's formulas need, on the machine or simulated cluster at hand.

    calibrate.py --out calib.json [--np 4] [--ranks-per-node 4]             this machine (mpirun)
    calibrate.py --out calib.json --simulate --sim-flops 4e14 [--link nvlink-ib] [--gpus-per-node 8]
    calibrate.py --out calib.json --emulated 1gbit --nodes 2 --gpus-per-node 2 --dtype fp32   (root)

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
(scripts/emulated_cluster.py, a cluster of network namespaces on this machine, CPU backend):
inside a node, one node of --gpus-per-node ranks on shared memory; across, --nodes nodes of one
rank behind NICs of RATE. Its compute rates are kernel_bench's with --nodes x --gpus-per-node
copies running at once, each rank's share of this machine's cores when the whole emulated
cluster computes (what the mesh's ranks get there).
"""

from __future__ import annotations

import argparse
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

ROOT = Path(__file__).resolve().parent.parent
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
            cmd = [sys.executable, str(ROOT / "scripts" / "emulated_cluster.py"), "--quiet", "--nodes", str(nodes),
                   "--ranks-per-node", str(per_node), "--nic", a.emulated, "--mpirun", a.mpirun, "--",
                   str(a.build / "bin" / bench), "--backend", "cpu", "--dtype", a.dtype, "--out", str(out),
                   *flags]
        elif a.simulate:
            gpus = a.gpus_per_node if level == "intra" else 1
            nodes = 1 if level == "intra" else a.nodes
            cmd = [sys.executable, str(ROOT / "scripts" / "simulate.py"), bench, "--platform", "fattree",
                   "--nodes", str(nodes), "--gpus-per-node", str(gpus), "--ranks", str(ranks),
                   "--link", a.link, "--sim-flops", str(a.sim_flops), "--no-plot", "--out", str(out)]
            if a.sim_build:
                cmd += ["--build", str(a.sim_build)]
            cmd += ["--", "--dtype", a.dtype, *flags]
        else:
            env_ranks = a.np
            cmd = [a.mpirun, "-np", str(env_ranks), "--oversubscribe", str(a.build / "bin" / bench),
                   "--backend", a.backend, "--dtype", a.dtype, "--out", str(out), *flags]
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise CalibrationError(f"{' '.join(cmd)} failed (exit {proc.returncode}): "
                                   f"{(proc.stderr or proc.stdout).strip().splitlines()[-1:]}")
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
    pattern = f"^(gemm|attention|attention_bwd)_{args.backend}/{args.dtype}/"
    procs = []
    for i in range(copies):  # at once: each rank's share of the cores when all compute
        out = work / f"kernel_bench{i}.h5"
        cmd = [str(args.build / "bin" / "kernel_bench"), f"--out={out}", f"--benchmark_filter={pattern}"]
        procs.append((out, subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)))
    best_of: list[dict[str, float]] = []
    for out, proc in procs:
        _, err = proc.communicate()
        if proc.returncode != 0:
            raise CalibrationError(f"kernel_bench failed: {err.strip()[-300:]}")
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
        source += f", the median of {copies} copies running at once (the emulated cluster's ranks)"
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
    # The ring's three modes run attention too: small heads where it is computed for real.
    shape = ["--block", "1K:16K:x4", "--heads", "8", "--head-dim", "128"] if runner.args.simulate \
        else ["--block", runner.args.blocks, "--heads", "2", "--head-dim", "64"]
    ring = runner.run(name, "ring_attention", "ring", *shape, "--layout", "contiguous", "--causal", "0",
                      "--check", "0", "--iters", "3", "--warmup", "1")
    rates["p2p"] = point_to_point(ring)
    return {"ranks": ranks, **rates}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="the calibration file (JSON)")
    p.add_argument("--dtype", default="bf16", help="element type of the transfers and kernels (bf16, fp32)")
    p.add_argument("--simulate", action="store_true", help="on SMPI's fattree platform instead of this machine")
    p.add_argument("--emulated", metavar="RATE",
                   help="on a cluster emulated on this machine with NICs of RATE (1gbit, 500mbit...; "
                        "scripts/emulated_cluster.py, root): --nodes nodes of --gpus-per-node ranks")
    p.add_argument("--sim-flops", type=float, default=4e14, help="simulated compute rate (FLOP/s)")
    p.add_argument("--link", default="nvlink-ib", help="the simulated links (scripts/sim_platform.py --list)")
    p.add_argument("--gpus-per-node", type=int, default=8, help="simulated GPUs (emulated: ranks) per node")
    p.add_argument("--nodes", type=int, default=8, help="simulated (emulated) nodes for the across-nodes level")
    p.add_argument("--sim-build", type=Path, help="the SMPI build (default build-sim)")
    p.add_argument("--np", type=int, default=4, help="this machine: ranks (one node: the inside level only)")
    p.add_argument("--backend", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--build", type=Path, default=ROOT / "build")
    p.add_argument("--mpirun", default="mpirun")
    p.add_argument("--sizes", default=SIZES, help=f"message sizes of the collectives (default {SIZES})")
    p.add_argument("--blocks", default="256:4K:x4",
                   help="this machine: the ring's tokens per rank for the point-to-point rate")
    args = p.parse_args(argv)
    try:
        if args.simulate and args.emulated:
            raise CalibrationError("--simulate or --emulated, not both")
        if args.emulated:
            args.backend = "cpu"  # the emulated cluster's ranks are processes of this machine
        if (args.simulate or args.emulated) and (args.gpus_per_node < 2 or args.nodes < 2):
            raise CalibrationError("--gpus-per-node and --nodes must be >= 2 (a group on each level)")
        if not args.simulate and args.np < 2:
            raise CalibrationError("--np must be >= 2 (a group to measure)")
        with tempfile.TemporaryDirectory(prefix="calibrate_") as tmp:
            work = Path(tmp)
            runner = Runner(args, work)
            if args.simulate or args.emulated:
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
