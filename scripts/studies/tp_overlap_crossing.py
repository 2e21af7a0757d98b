"""Where TP+SP's collective matmul stops exposing its transfers, per op, beside METHODS.md 1.1.

    tp_overlap_crossing.py [--tp 8] [--sim-flops 7e14] [--platform node8] [--link nvlink]
                           [--h-over-t 256,512,... | 256:2048:64] [--csv OUT.csv] [--plot OUT.png]

For each h/t of the sweep, one SMPI run (scripts/envs/simulate.py, modeled compute: every GEMM's
FLOPs injected at --sim-flops, so the result is the same on any host) of `sp_tp --mode layer
--variants tp_sp --tp-overlap none,ring --pass fwd` on t ranks. Per forward op (qkv, out_proj,
fc1, fc2), from the phases the layer records:
  transfer only  the blocking collective's time (phase <op>_exposed of the `none` case)
  compute only   the op's GEMMs (phase <op>_gemm)
  exposed        what the ring left exposed (phase <op>_exposed of the `ring` case)
  efficiency     1 - exposed / transfer only (the share of the transfer the GEMMs hid)
The crossing of an op is the h/t where its exposed time first falls to --tol of its transfer,
interpolated linearly from the last exposed point, so it moves with the grid (the default grid
puts qkv's at 570 where steps of 64 put it at 527): docs/FINDINGS.md's table comes from
`--seq 8192 --h-over-t 256:2048:64`, and `make docs-check` reruns it. METHODS.md 1.1 puts it at
h/t = e F / (2 c W) (`model --section tp_overlap` prints the thresholds; W is the simulated
link's bandwidth). The per-step latency, which the condition leaves out, moves the simulated
crossing a little to the right.
"""

from __future__ import annotations

import argparse
import csv
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import h5py

from scripts import ROOT, module_command
from scripts.envs.sim_platform import LINKS, PRESETS

OPS = ("qkv", "out_proj", "fc1", "fc2")
TOL = 0.05


@dataclass
class Point:
    h_over_t: int
    op: str
    transfer_s: float
    compute_s: float
    exposed_s: float

    @property
    def exposed_fraction(self) -> float:
        return self.exposed_s / self.transfer_s if self.transfer_s > 0 else 0.0


def link_bandwidth(platform: str, link: str | None) -> float:
    """W of a GPU's path to its ring neighbour inside a node (through its NIC where the link
    preset turns peer-to-peer off)."""
    lk = LINKS[link or PRESETS[platform].link]
    return lk.net_bw if lk.intra_via_nic else lk.intra_bw


def thresholds(model: Path, tp: int, seq: int, flops: float, bw: float) -> dict[str, float]:
    """The model's h/t threshold per forward op (model --section tp_overlap)."""
    out = subprocess.run([str(model), "--section", "tp_overlap", "--hidden", str(64 * tp), "--tp",
                          str(tp), "--seq", str(seq), "--flops", str(flops), "--bw", str(bw),
                          "--dtype", "bf16"], capture_output=True, text=True, check=True).stdout
    found = {}
    for line in out.splitlines():
        m = re.match(r"\s+(qkv|out_proj|fc1|fc2)\s+\S+\s+\S+\s+([0-9.]+)\s", line)
        if m:
            found[m.group(1)] = float(m.group(2))
    if set(found) != set(OPS):
        sys.exit(f"error: model --section tp_overlap printed no thresholds for {set(OPS) - set(found)}")
    return found


def simulate(args, h_over_t: int, out: Path) -> None:
    h = h_over_t * args.tp
    head_dim = 128 if h_over_t % 128 == 0 else 64
    cmd = [*module_command("envs.simulate"), "sp_tp", "--platform", args.platform,
           "--ranks", str(args.tp), "--sim-flops", str(args.sim_flops), "--out", str(out), "--no-plot",
           "--build", str(args.build)]
    if args.link:
        cmd += ["--link", args.link]
    cmd += ["--", "--mode", "layer", "--variants", "tp_sp", "--tp-overlap", "none,ring", "--pass", "fwd",
            "--dtype", "bf16", "--seq", str(args.seq), "--hidden", str(h), "--heads", str(h // head_dim),
            "--iters", "1", "--warmup", "0"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"error: simulation at h/t = {h_over_t} failed:\n{proc.stdout[-1500:]}\n{proc.stderr[-1500:]}")


def points_of(path: Path, h_over_t: int) -> list[Point]:
    with h5py.File(path) as f:
        cases = {str(g.attrs.get("tp_overlap", "none")): dict(g.attrs) for g in f["sp_tp"].values()}
    if set(cases) != {"none", "ring"}:
        sys.exit(f"error: {path}: expected a none and a ring case, found {sorted(cases)}")
    none, ring = cases["none"], cases["ring"]
    return [Point(h_over_t, op, float(none[f"phase_{op}_exposed_median_s"]),
                  float(ring[f"phase_{op}_gemm_median_s"]), float(ring[f"phase_{op}_exposed_median_s"]))
            for op in OPS]


def crossing(points: list[Point], tol: float) -> float | None:
    """The h/t where exposed / transfer first falls to tol (linear between the last exposed and
    the first hidden point); None if the sweep starts hidden or never gets there."""
    pts = sorted(points, key=lambda p: p.h_over_t)
    for i, p in enumerate(pts):
        if p.exposed_fraction <= tol:
            if i == 0:
                return None
            a, b = pts[i - 1], p
            return a.h_over_t + (a.exposed_fraction - tol) / (a.exposed_fraction - b.exposed_fraction) * (
                b.h_over_t - a.h_over_t)
    return None


def plot(points: list[Point], thr: dict[str, float], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(OPS), figsize=(4 * len(OPS), 3.4), sharey=True)
    for ax, op in zip(axes, OPS):
        pts = sorted((p for p in points if p.op == op), key=lambda p: p.h_over_t)
        ax.plot([p.h_over_t for p in pts], [p.exposed_fraction for p in pts], "o-", label="ring: exposed / transfer")
        ax.axvline(thr[op], color="k", ls="--", label=f"e F / (2 c W) = {thr[op]:.0f}")
        ax.set_title(op)
        ax.set_xlabel("h / t")
        ax.legend(fontsize=7)
    axes[0].set_ylabel("exposed / blocking transfer")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def h_over_t_values(text: str) -> list[int]:
    """`256,512,768` as it is; `256:2048:64` from 256 to 2048 in steps of 64."""
    if ":" in text:
        first, last, step = (int(x) for x in text.split(":"))
        return list(range(first, last + 1, step)) if step > 0 else []
    return [int(x) for x in text.split(",")]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tp", type=int, default=8, help="t: ranks of the TP group (one node)")
    p.add_argument("--seq", type=int, default=4096, help="s: sequence length (b = 1)")
    p.add_argument("--sim-flops", type=float, default=7e14, help="F: modeled GEMM rate, FLOP/s")
    p.add_argument("--platform", default="node8", help="simulate.py preset")
    p.add_argument("--link", help="simulate.py link preset (default: the platform's)")
    p.add_argument("--h-over-t", default="256,512,768,1024,1280,1536,1792,2048,2560",
                   help="h/t values, multiples of 64: a list, or FIRST:LAST:STEP")
    p.add_argument("--tol", type=float, default=TOL, help="exposed within this share of the transfer counts as hidden")
    p.add_argument("--model", type=Path, default=ROOT / "build" / "bin" / "model",
                   help="the CPU build's model executable")
    p.add_argument("--build", type=Path, default=ROOT / "build-sim", help="the SMPI build (make sim)")
    p.add_argument("--csv", type=Path, help="also write the points here")
    p.add_argument("--plot", type=Path, help="exposed / transfer against h/t, one panel per op")
    args = p.parse_args(argv)
    try:
        sweep = h_over_t_values(args.h_over_t)
    except ValueError:
        sweep = []
    if not sweep or any(x <= 0 or x % 64 for x in sweep):
        print("error: --h-over-t: every value must be a positive multiple of 64", file=sys.stderr)
        return 2
    if args.platform not in PRESETS or (args.link and args.link not in LINKS):
        print(f"error: unknown platform {args.platform!r} or link {args.link!r}", file=sys.stderr)
        return 2
    bw = link_bandwidth(args.platform, args.link)
    thr = thresholds(args.model, args.tp, args.seq, args.sim_flops, bw)
    points: list[Point] = []
    with tempfile.TemporaryDirectory() as tmp:
        for x in sweep:
            path = Path(tmp) / f"h{x}.h5"
            simulate(args, x, path)
            points.extend(points_of(path, x))
            print(f"simulated h/t = {x}", file=sys.stderr, flush=True)
    print(f"TP+SP ring overlap on {args.platform} ({args.link or PRESETS[args.platform].link}, W = {bw:.3g} B/s), "
          f"t = {args.tp}, s = {args.seq}, bf16, F = {args.sim_flops:.3g} FLOP/s, modeled compute")
    print(f"{'h/t':>6} {'op':>9} {'transfer_us':>12} {'compute_us':>11} {'exposed_us':>11} {'efficiency':>11}")
    for pt in sorted(points, key=lambda q: (OPS.index(q.op), q.h_over_t)):
        print(f"{pt.h_over_t:>6} {pt.op:>9} {pt.transfer_s * 1e6:>12.2f} {pt.compute_s * 1e6:>11.2f} "
              f"{pt.exposed_s * 1e6:>11.2f} {1 - pt.exposed_fraction:>11.3f}")
    print(f"\n{'op':>9} {'predicted h/t':>14} {'simulated crossing':>19} {'ratio':>6}")
    for op in OPS:
        cross = crossing([q for q in points if q.op == op], args.tol)
        text = f"{cross:.0f}" if cross is not None else "not in sweep"
        ratio = f"{cross / thr[op]:.2f}" if cross is not None else "-"
        print(f"{op:>9} {thr[op]:>14.0f} {text:>19} {ratio:>6}")
    if args.csv:
        with args.csv.open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["h_over_t", "op", "transfer_s", "compute_s", "exposed_s", "threshold_h_over_t"])
            for pt in points:
                w.writerow([pt.h_over_t, pt.op, pt.transfer_s, pt.compute_s, pt.exposed_s, thr[pt.op]])
    if args.plot:
        plot(points, thr, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
