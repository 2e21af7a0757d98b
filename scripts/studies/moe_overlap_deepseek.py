"""The MoE all-to-all behind another micro-batch at DeepSeek-V3's sizes, simulated.

One SMPI run of `moe` per dispatch (--dispatch: flat and hierarchical) on
`fattree` with `nvlink-ib` (8 nodes of
8 GPUs, modeled compute at --sim-flops): EP 64, 4096 tokens per rank, h 7168, 256 experts of d_ff
2048 (SwiGLU), top 8, at most 4 nodes a token, bf16 rows, `--overlap microbatch:2,microbatch:4
--pass fwd_bwd`. Prints one markdown row per (dispatch, M), M = 1 from the M = 1 step each
overlapped case times on the same tokens: the step of one layer (forward + backward), the
compute X and the all-to-all A of the pipeline's pieces, the exposed all-to-all (step - X; for
M = 1, its step - X), and the schedule's critical path. Flat dispatch's micro-batches start
64-rank all-to-all-vs without waiting, which SMPI simulates as every pair at once (both
dispatches: about 7 minutes on 2 cores).

    suite moe-overlap-deepseek [--sim-flops 5e14] [--dispatch flat,hierarchical]
                                                   [--build build-sim]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import h5py

from scripts import ROOT, module_command

CASE = ["--tokens", "4096", "--hidden", "7168", "--ffn-hidden", "2048", "--experts", "256", "--top-k", "8",
        "--dtype", "bf16", "--iters", "1", "--warmup", "0", "--ranks-per-node", "8", "--max-nodes-per-token", "4",
        "--overlap", "microbatch:2,microbatch:4", "--pass", "fwd_bwd"]


def simulate(dispatch: str, out: Path, flops: float, build: Path) -> None:
    cmd = [*module_command("envs.simulate"), "moe", "--platform", "fattree", "--nodes", "8", "--ranks", "64",
           "--link", "nvlink-ib", "--sim-flops", str(flops), "--out", str(out), "--no-plot", "--build", str(build),
           "--", *CASE, "--dispatch", dispatch]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"error: simulation of {dispatch} dispatch failed:\n{proc.stdout[-1500:]}\n{proc.stderr[-1500:]}")


def rows_of(path: Path, dispatch: str) -> list[str]:
    with h5py.File(path) as f:
        cases = sorted((dict(g.attrs) for g in f["moe"].values()), key=lambda a: int(a["microbatches"]))
    ms = lambda s: f"{float(s) * 1e3:.2f}"  # noqa: E731
    first = cases[0]
    rows = [f"| {dispatch} | 1 | {ms(first['step_m1_s'])} | {ms(first['overlap_compute_s'])} | "
            f"{ms(first['overlap_a2a_s'])} | {ms(first['step_m1_s'] - first['overlap_compute_s'])} | - |"]
    for a in cases:
        rows.append(f"| {dispatch} | {int(a['microbatches'])} | {ms(a['time_median_s'])} | {ms(a['overlap_compute_s'])} | "
                    f"{ms(a['overlap_a2a_s'])} | {ms(a['exposed_a2a_s'])} | {ms(a['pred_step_s'])} |")
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sim-flops", type=float, default=5e14, help="modeled FLOP/s of a GPU")
    p.add_argument("--build", type=Path, default=ROOT / "build-sim", help="the SMPI build (make sim)")
    p.add_argument("--dispatch", default="flat,hierarchical", help="dispatches (list): flat, hierarchical")
    args = p.parse_args(argv)
    dispatches = args.dispatch.split(",")
    if not dispatches or any(d not in ("flat", "hierarchical") for d in dispatches):
        print(f"error: --dispatch: {args.dispatch!r} is not a list of flat, hierarchical", file=sys.stderr)
        return 2
    print("| dispatch | M | step ms | compute X ms | all-to-all A ms | exposed ms | critical path ms |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for dispatch in dispatches:
            path = Path(tmp) / f"{dispatch}.h5"
            simulate(dispatch, path, args.sim_flops, args.build)
            print("\n".join(rows_of(path, dispatch)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
