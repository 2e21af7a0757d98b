"""The planner's error, measured: its ranked meshes run through the composed block.

    plan_check.py --calibration calib.json --gpus 64 [--top 3] [--middle 3] [--bottom 3]
                  [--sim-flops 4e14] [--link nvlink-ib] [--csv OUT.csv] -- <model flags>

`model --section plan --max-pp 1` ranks every mesh of --gpus GPUs for the model (PP is modeled,
not run, so the check takes the one-stage meshes); this script runs its first --top, --middle
from the middle of the ranking and its last --bottom through `mesh --pass fwd_bwd` on a simulated
two-tier cluster (SMPI `fattree`, 8 GPUs a node, modeled compute at --sim-flops: the same rates
the calibration measured there, so the run and the prediction see one machine; the planner is
told --grad-dtype = --dtype, the type the modeled attention sends its partial sums in), and prints per
mesh the predicted step (one stage: the block's forward and backward once per micro-batch, its
gradient sums once, times --layers) beside the one the simulated block gives the same way, their error, the median and largest |error|, Kendall's
tau between the two orderings, and whether the planner's first pick is within 5% of the best
measured. Where a mesh misses by more than 10%, the term whose predicted time is furthest from
the measured one is named: an axis's exposed time, or the compute (the rest of the step). The model's flags (after `--`) are model's: --seq, --hidden,
--heads, --kv-heads, --d-ff, --experts, --top-k, --swiglu, --dtype, --causal.

With a calibration from `calibrate.py --emulated RATE` the meshes run instead on the cluster it
was measured on, emulated on this machine (scripts/envs/emulated_cluster.py, root: its nodes and
ranks per node, NICs of RATE, the CPU backend, executed compute, 3 timed steps after 1): the
planner against real Open MPI over shared memory and TCP. With one of this machine
(`calibrate.py --np N`) they run here through mpirun on N ranks; with one of a Slurm job
(`calibrate.py --slurm`) they run as srun steps of a job of the same nodes and ranks per node,
with its backend and transport (slurm/calibrate.sbatch runs the check after the calibration when
PLAN_CHECK_ARGS is set): the planner against the cluster itself.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import h5py

from scripts import ROOT, module_command
from scripts.planner.calibrate import slurm_step, srun_default
from scripts.studies.mesh_runs import GPUS_PER_NODE, simulate_mesh, write_rows

AXES = ("tp", "cp", "ep", "dp")
# Where each kind of calibration runs the meshes (and the table's column says so).
RAN = {"simulated": "simulated cluster", "emulated": "emulated cluster", "mpirun": "this machine",
       "slurm": "Slurm job's nodes"}


def flag(flags: list[str], name: str, default: str | None = None) -> str | None:
    return flags[flags.index(name) + 1] if name in flags else default


def kendall_tau(a: list[float], b: list[float]) -> float:
    """Kendall's tau-a of two equal-length sequences (no ties assumed)."""
    n, s = len(a), 0
    for i in range(n):
        for j in range(i + 1, n):
            s += (1 if (a[i] - a[j]) * (b[i] - b[j]) > 0 else -1 if (a[i] - a[j]) * (b[i] - b[j]) < 0 else 0)
    return 2 * s / (n * (n - 1)) if n > 1 else float("nan")


def grad_dtype_flags(args: argparse.Namespace, flags: list[str]) -> list[str]:
    """The element type the runs' ring sends its dK/dV partial sums in, for the planner's e_grad:
    on a simulated cluster the modeled attention accumulates in the element type (--dtype), so
    its sums travel in it, half the bytes of the fp32 the planner assumes of a GPU's kernel (the
    CPU backend's and the GPUs' kernels accumulate in fp32: the planner's default)."""
    if args.where["kind"] != "simulated" or "--grad-dtype" in flags:
        return []
    return ["--grad-dtype", flag(flags, "--dtype", "bf16")]


def plan(args: argparse.Namespace, flags: list[str], out: Path) -> list[dict]:
    cmd = [str(args.model), "--section", "plan", "--calibration", str(args.calibration), "--gpus",
           str(args.gpus), "--memory-gb", str(args.memory_gb), "--max-pp", "1", "--plan-orders", args.orders,
           "--global-tokens", str(int(float(flag(flags, "--seq", "4096"))) * args.gpus),
           "--plan-csv", str(out), "--top", "1", *grad_dtype_flags(args, flags), *flags]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"error: plan_check: {' '.join(cmd)}: {proc.stderr.strip()}")
    with open(out) as fh:
        rows = [r for r in csv.DictReader(fh) if r["fits"] == "1"]
    return rows


def chosen(rows: list[dict], top: int, middle: int, bottom: int) -> list[dict]:
    n = len(rows)
    picks = list(range(min(top, n)))
    mid = n // 2 - middle // 2
    picks += [i for i in range(max(mid, 0), min(mid + middle, n)) if i not in picks]
    picks += [i for i in range(max(n - bottom, 0), n) if i not in picks]
    return [rows[i] for i in picks]


def measure(args: argparse.Namespace, flags: list[str], row: dict, out: Path) -> dict:
    mesh_flags = ["--tp", row["tp"], "--cp", row["cp"], "--dp", row["dp"], "--order", row["order"],
                  "--pass", "fwd_bwd", "--iters", "1", "--warmup", "0", "--batch", "1"]
    if int(row["cp"]) > 1:
        mesh_flags += ["--cp-method", row["cp_method"]]
    if flag(flags, "--experts"):
        mesh_flags += ["--experts", flag(flags, "--experts"), "--ep", row["ep"], "--top-k", flag(flags, "--top-k", "2"),
                       "--mlp", "swiglu" if "--swiglu" in flags else "gelu"]
    for ours, theirs in (("--seq", "--seq"), ("--hidden", "--hidden"), ("--heads", "--heads"),
                         ("--kv-heads", "--kv-heads"), ("--d-ff", "--ffn-hidden"), ("--dtype", "--dtype")):
        if flag(flags, ours):
            mesh_flags += [theirs, flag(flags, ours)]
    mesh_flags += ["--causal", "1" if "--causal" in flags else "0"]
    if args.where["kind"] != "simulated":
        return block_times(launched_mesh(args, mesh_flags, out))
    return block_times(simulate_mesh(nodes=max(1, args.gpus // GPUS_PER_NODE), ranks=args.gpus, link=args.link,
                                     sim_flops=args.sim_flops, build=args.build, mesh_flags=mesh_flags,
                                     out=out)[0])


def block_times(a) -> dict:
    """A mesh run's step, each axis's exposed time, and the rest of the step: its compute (the
    planner's block time is compute plus the axes' exposed times too)."""
    step = float(a["time_median_s"])
    return {"step_s": step, "compute_s": step - float(a["exposed_comm_s"]),
            **{f"{x}_s": float(a[f"{x}_exposed_s"]) for x in AXES}}


def launcher(args: argparse.Namespace) -> list[str]:
    """How `mesh` starts where the calibration was measured (all but a simulation): the
    emulated cluster it names, this machine's mpirun, or an srun step of this Slurm job."""
    where = args.where
    if where["kind"] == "emulated":
        return [*module_command("envs.emulated_cluster"), "--quiet", "--nodes",
                str(where["nodes"]), "--ranks-per-node", str(where["gpus_per_node"]), "--nic", where["nic"], "--"]
    if where["kind"] == "mpirun":
        return [args.mpirun, "-np", str(args.gpus), "--oversubscribe"]
    return slurm_step(args, where["nodes"], where["gpus_per_node"])


def launched_mesh(args: argparse.Namespace, mesh_flags: list[str], out: Path) -> dict:
    """The one case's attributes of `mesh` run where the calibration was measured, with its
    backend and transport (3 timed steps after 1: real runs vary, simulated ones do not)."""
    flags = [f for f in mesh_flags]
    flags[flags.index("--iters") + 1], flags[flags.index("--warmup") + 1] = "3", "1"
    backend = args.where.get("backend", "cpu")
    transport = args.where.get("transport", "default")
    extra = ["--transport", transport] if transport in ("mpi", "nccl") else []
    cmd = [*launcher(args), str(args.bin_dir / "mesh"), "--backend", backend, *extra, "--check", "0",
           "--out", str(out), *flags]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
        raise SystemExit(f"error: mesh on the {RAN[args.where['kind']]} failed (exit {proc.returncode})")
    with h5py.File(out) as f:
        group = f["mesh"]
        return dict(group[next(iter(group))].attrs)


def plot(path: Path, results: list, preds: list[float], meas: list[float], ran: str = "simulated") -> None:
    """Predicted against simulated step time, one point a mesh with the diagonal drawn; and
    each mesh's predicted one-block time split by axis beside its simulated one."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 5), layout="constrained")
    ax.scatter(meas, preds)
    lo, hi = min(preds + meas), max(preds + meas)
    ax.plot([lo, hi], [lo, hi], "k--", lw=1, label=f"predicted = {ran}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"{ran} step (s)")
    ax.set_ylabel("predicted step (s)")
    ax.legend()
    ax.grid(True, alpha=0.3)
    ax.set_title(f"the planner's meshes: predicted against {ran}")
    pos = list(range(len(results)))
    bottom = [0.0] * len(results)
    parts = [("compute", [float(r["block_compute_s"]) for r, _ in results])]
    parts += [(x.upper(), [float(r[f"block_{x}_s"]) for r, _ in results]) for x in AXES]
    for label, values in parts:
        bx.bar([p - 0.2 for p in pos], values, width=0.4, bottom=bottom, label=f"{label} (predicted)")
        bottom = [b + v for b, v in zip(bottom, values)]
    bx.bar([p + 0.2 for p in pos], [m["step_s"] for _, m in results], width=0.4, color="grey",
           label=f"{ran} block")
    bx.set_xticks(pos, [f"{r['rank']}" for r, _ in results])
    bx.set_xlabel("mesh (its rank in the plan)")
    bx.set_ylabel("one block, one micro-batch (s)")
    bx.legend(fontsize=7)
    bx.set_title("each mesh's block split by axis")
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ours, flags = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calibration", type=Path, required=True, help="calibrate.py's file")
    p.add_argument("--gpus", type=int, required=True)
    p.add_argument("--memory-gb", type=float, default=80)
    p.add_argument("--top", type=int, default=3)
    p.add_argument("--middle", type=int, default=3)
    p.add_argument("--bottom", type=int, default=3)
    p.add_argument("--orders", default="tp,cp,ep,dp/cp,ep,dp,tp")
    p.add_argument("--sim-flops", type=float, default=4e14)
    p.add_argument("--link", default="nvlink-ib")
    p.add_argument("--build", type=Path, help="the SMPI build (default build-sim)")
    p.add_argument("--model", type=Path, default=ROOT / "build" / "bin" / "model")
    p.add_argument("--bin-dir", type=Path, default=ROOT / "build" / "bin",
                   help="where `mesh` is, for the runs that are not simulated")
    p.add_argument("--mpirun", default="mpirun", help="a calibration of this machine (calibrate.py --np): its launcher")
    p.add_argument("--srun", default=srun_default(),
                   help="a Slurm calibration (calibrate.py --slurm), inside a job of its nodes: the step launcher")
    p.add_argument("--csv", type=Path, help="also write the rows here")
    p.add_argument("--plot", type=Path, help="a PNG: predicted against simulated, and each mesh by axis")
    args = p.parse_args(ours)
    calib = json.loads(args.calibration.read_text())
    args.where = calib.get("where", {})
    kind = args.where.get("kind")
    if kind not in RAN:
        p.error(f"{args.calibration}: no calibration of this suite's (where: {args.where})")
    if kind != "simulated":  # the meshes run where it was measured, on its ranks
        ranks = args.where["ranks"] if kind == "mpirun" else args.where["nodes"] * args.where["gpus_per_node"]
        if args.gpus != ranks:
            p.error(f"--gpus {args.gpus}: the meshes run where {args.calibration} was measured, on {ranks} ranks")
    if kind == "slurm" and os.environ.get("SLURM_JOB_ID") is None:
        p.error(f"{args.calibration} was measured in a Slurm job: run the check in a job of its nodes "
                f"(slurm/calibrate.sbatch with PLAN_CHECK_ARGS)")
    ran = {"simulated": "simulated", "emulated": "emulated"}.get(kind, "measured")
    with tempfile.TemporaryDirectory(prefix="plan_check_") as tmp:
        rows = chosen(plan(args, flags, Path(tmp) / "plan.csv"), args.top, args.middle, args.bottom)
        results = []
        for i, row in enumerate(rows):
            m = measure(args, flags, row, Path(tmp) / f"mesh{i}.h5")
            results.append((row, m))
    # A one-stage step: each of the L layers' block (forward, backward) once per micro-batch,
    # the layers' gradient sums once.
    layers = float(flag(flags, "--layers", "1"))

    def step(block: float, dp: float, micro: float) -> float:
        return layers * (micro * (block - dp) + dp)

    print(f"| plan rank | mesh | micro-batches | predicted step ms | {ran} step ms | error | largest gap (axis or compute) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    errors, out_rows, preds, meas = [], [], [], []
    for row, m in results:
        micro = float(row["micro_batches"])
        pred = float(row["step_s"])
        got = step(m["step_s"], m["dp_s"], micro)
        err = (pred - got) / got
        errors.append(abs(err))
        preds.append(pred)
        meas.append(got)
        gaps = {x: float(row[f"block_{x}_s"]) - m[f"{x}_s"] for x in (*AXES, "compute")}
        worst = max(gaps, key=lambda x: abs(gaps[x]))
        gap = f"{worst.upper()} {gaps[worst] * 1e3:+.3f} ms a block" if abs(err) > 0.10 else ""
        name = f"tp{row['tp']}-cp{row['cp']}{':' + row['cp_method'] if int(row['cp']) > 1 else ''}" \
               f"{'-ep' + row['ep'] if int(row['ep']) > 1 else ''}-dp{row['dp']} {row['order']}"
        print(f"| {row['rank']} | `{name}` | {micro:g} | {pred * 1e3:.2f} | {got * 1e3:.2f} | {100 * err:+.1f}% | {gap} |")
        out_rows.append({"rank": row["rank"], "mesh": name, "micro_batches": micro, "predicted_s": pred,
                         "simulated_s": got, "error": err, "predicted_block_s": float(row["block_step_s"]),
                         "simulated_block_s": m["step_s"]})
    best = min(meas)
    first = meas[0]
    print(f"\nmedian |error| {100 * statistics.median(errors):.1f}%, largest {100 * max(errors):.1f}%, "
          f"Kendall's tau {kendall_tau(preds, meas):.2f}, the first pick {first * 1e3:.2f} ms against the best "
          f"measured {best * 1e3:.2f} ms ({100 * (first / best - 1):+.1f}%: "
          f"{'within' if first <= 1.05 * best else 'not within'} 5%)")
    if args.csv:
        write_rows(args.csv, out_rows)
    if args.plot:
        plot(args.plot, results, preds, meas, ran)
    return 0


if __name__ == "__main__":
    sys.exit(main())
