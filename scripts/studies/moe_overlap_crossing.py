"""Where the MoE all-to-all hides behind another micro-batch's experts, beside METHODS.md 4's d_ff*.

    moe_overlap_crossing.py [--ranks 8] [--platform node8] [--link nvlink] [--sim-flops 5e14]
                            [--microbatches 4] [--d-ff 256,512,...] [--csv OUT.csv] [--plot OUT.png]

For each d_ff of the sweep, one SMPI run (scripts/envs/simulate.py, modeled compute: every GEMM's
FLOPs injected at --sim-flops, so the result is the same on any host) of `moe --overlap
microbatch:M --pass fwd_bwd` (bf16, two-matrix MLP, dropless) on N_e ranks of one node. Per
point, from the case's record:
  A          the all-to-all of all M micro-batches, each exchange alone (overlap_a2a_s)
  X          the compute of all M micro-batches alone (overlap_compute_s)
  step       the pipelined step (median)
  pred       the critical path of the schedule run, on the per-piece times (pred_step_s)
  exposed    step - X: the all-to-all the compute did not hide
  d_ff*      (F/W)(N_e-1)/N_e (bf16), F and W of the run's own calibration (pred_d_ff_star)
The verdicts (the test integration_sim_moe_overlap_crossing checks them on both platforms):
step within 5% of pred everywhere; exposed <= min(A, X)/M (5% slack: the fill and the drain) at
every d_ff >= 1.5 d_ff*; exposed > A - X at every d_ff <= d_ff*/1.5.
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

import h5py

from scripts import ROOT, module_command
from scripts.envs.sim_platform import LINKS, PRESETS

SLACK = 0.05


@dataclass
class Point:
    d_ff: int
    a2a_s: float
    compute_s: float
    step_s: float
    pred_s: float
    d_ff_star: float
    step_m1_s: float
    microbatches: int

    @property
    def exposed_s(self) -> float:
        return self.step_s - self.compute_s

    def verdicts(self, slack: float = SLACK) -> list[str]:
        """What this point breaks of the three verdicts ([] when none)."""
        bad = []
        if abs(self.step_s - self.pred_s) > slack * self.pred_s:
            bad.append(f"step {self.step_s:.4g} s not within {slack:.0%} of the critical path {self.pred_s:.4g} s")
        fill = min(self.a2a_s, self.compute_s) / self.microbatches
        if self.d_ff >= 1.5 * self.d_ff_star and self.exposed_s > (1 + slack) * fill:
            bad.append(f"exposed {self.exposed_s:.4g} s above min(A, X)/M = {fill:.4g} s")
        if self.d_ff <= self.d_ff_star / 1.5 and not self.exposed_s > self.a2a_s - self.compute_s:
            bad.append(f"exposed {self.exposed_s:.4g} s not above A - X = {self.a2a_s - self.compute_s:.4g} s")
        return bad


def simulate(args, d_ff: int, out: Path) -> None:
    cmd = [*module_command("envs.simulate"), "moe", "--platform", args.platform, "--ranks", str(args.ranks),
           "--sim-flops", str(args.sim_flops), "--out", str(out), "--no-plot", "--build", str(args.build)]
    if args.link:
        cmd += ["--link", args.link]
    cmd += ["--", "--tokens", str(args.tokens), "--hidden", str(args.hidden), "--ffn-hidden", str(d_ff),
            "--experts", str(2 * args.ranks), "--top-k", "2", "--mlp", "gelu", "--dtype", "bf16",
            "--pass", "fwd_bwd", "--overlap", f"microbatch:{args.microbatches}", "--iters", "1", "--warmup", "0"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"error: simulation at d_ff = {d_ff} failed:\n{proc.stdout[-1500:]}\n{proc.stderr[-1500:]}")


def point_of(path: Path, d_ff: int) -> Point:
    with h5py.File(path) as f:
        (a,) = [dict(g.attrs) for g in f["moe"].values()]
    return Point(d_ff, float(a["overlap_a2a_s"]), float(a["overlap_compute_s"]), float(a["time_median_s"]),
                 float(a["pred_step_s"]), float(a["pred_d_ff_star"]), float(a["step_m1_s"]),
                 int(a["microbatches"]))


def plot(points: list[Point], path: Path, label: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    pts = sorted(points, key=lambda p: p.d_ff)
    x = [p.d_ff for p in pts]
    fig, ax = plt.subplots(figsize=(6, 3.8))
    ax.plot(x, [p.exposed_s * 1e6 for p in pts], "o-", label="exposed all-to-all (step - X)")
    ax.plot(x, [max(p.a2a_s - p.compute_s, 0) * 1e6 for p in pts], "--", label="A - X")
    ax.plot(x, [min(p.a2a_s, p.compute_s) / p.microbatches * 1e6 for p in pts], ":", label="min(A, X) / M")
    ax.axvline(pts[0].d_ff_star, color="k", ls="--", lw=1, label=f"d_ff* = {pts[0].d_ff_star:.0f}")
    ax.set_xscale("log")
    ax.set_xlabel("d_ff")
    ax.set_ylabel("us per step")
    ax.set_title(textwrap.fill(label, 80), fontsize=8)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=8, help="N_e: ranks of the EP group (one node)")
    p.add_argument("--tokens", type=int, default=4096, help="T: tokens per rank")
    p.add_argument("--hidden", type=int, default=2048, help="h")
    p.add_argument("--microbatches", type=int, default=4, help="M")
    p.add_argument("--sim-flops", type=float, default=5e14, help="F: modeled GEMM rate, FLOP/s")
    p.add_argument("--platform", default="node8", help="simulate.py preset")
    p.add_argument("--link", help="simulate.py link preset (default: the platform's)")
    p.add_argument("--d-ff", default="128,256,512,768,1024,1536,2048,4096", help="d_ff values (list)")
    p.add_argument("--build", type=Path, default=ROOT / "build-sim", help="the SMPI build (make sim)")
    p.add_argument("--csv", type=Path, help="also write the points here")
    p.add_argument("--plot", type=Path, help="exposed all-to-all against d_ff, d_ff* marked")
    args = p.parse_args(argv)
    try:
        sweep = [int(x) for x in args.d_ff.split(",")]
    except ValueError:
        sweep = []
    if not sweep or min(sweep) < 1 or args.microbatches < 1:
        print("error: --d-ff: a list of whole numbers >= 1 (and --microbatches >= 1)", file=sys.stderr)
        return 2
    if args.platform not in PRESETS or (args.link and args.link not in LINKS):
        print(f"error: unknown platform {args.platform!r} or link {args.link!r}", file=sys.stderr)
        return 2
    points: list[Point] = []
    with tempfile.TemporaryDirectory() as tmp:
        for d_ff in sweep:
            path = Path(tmp) / f"ff{d_ff}.h5"
            simulate(args, d_ff, path)
            points.append(point_of(path, d_ff))
            print(f"simulated d_ff = {d_ff}", file=sys.stderr, flush=True)
    link = args.link or PRESETS[args.platform].link
    label = (f"MoE overlap on {args.platform} ({link}), N_e = {args.ranks}, T = {args.tokens}, h = {args.hidden}, "
             f"M = {args.microbatches}, bf16, F = {args.sim_flops:.3g} FLOP/s, modeled compute")
    print(label)
    print(f"{'d_ff':>6} {'A_us':>9} {'X_us':>9} {'step_us':>9} {'pred_us':>9} {'exposed_us':>10} "
          f"{'M1_step_us':>10} {'d_ff*':>7} verdict")
    for pt in sorted(points, key=lambda q: q.d_ff):
        bad = pt.verdicts()
        print(f"{pt.d_ff:>6} {pt.a2a_s * 1e6:>9.1f} {pt.compute_s * 1e6:>9.1f} {pt.step_s * 1e6:>9.1f} "
              f"{pt.pred_s * 1e6:>9.1f} {pt.exposed_s * 1e6:>10.1f} {pt.step_m1_s * 1e6:>10.1f} "
              f"{pt.d_ff_star:>7.0f} {'ok' if not bad else '; '.join(bad)}")
    if args.csv:
        with args.csv.open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["d_ff", "a2a_s", "compute_s", "step_s", "pred_step_s", "d_ff_star", "step_m1_s", "microbatches"])
            for pt in points:
                w.writerow([pt.d_ff, pt.a2a_s, pt.compute_s, pt.step_s, pt.pred_s, pt.d_ff_star, pt.step_m1_s,
                            pt.microbatches])
    if args.plot:
        plot(points, args.plot, label)
    return 0


if __name__ == "__main__":
    sys.exit(main())
