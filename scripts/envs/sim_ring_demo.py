"""make run's simulated ring: a block-size sweep around the c* of this very machine.

    sim_ring_demo.py --out-dir DIR [--build build-sim] [--bw 50M] [--points 8]

Executed compute (the host's own attention kernels, timed by SMPI) on 4 flat simulated hosts:
  1. calibrate: one short run at c = 256 measures this host's F and the simulated link's W,
     hence c* (the ring's overlap bound, `c_star_tokens`);
  2. sweep c from c*/4 to 4 c* (geometric, multiples of 16), so the transfer goes from exposed
     to hidden inside the sweep on any CPU, fast or slow, Intel or AMD;
  3. print where the sweep crosses, beside c* (ring_crossing.py), and plot it.
The crossing moves with the host's CPU noise (executed compute injects it): this is the
demonstration; the tests hold simulated time to the model with modeled compute instead.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np

from scripts import ROOT, module_command

RING = ["--layout", "contiguous", "--causal", "0", "--heads", "8", "--kv-heads", "1",
        "--check", "0"]


def blocks_around(c_star: float, points: int) -> list[int]:
    """`points` block sizes from c*/4 to 4 c*, geometric, each a multiple of 16 (at least 16),
    without repeats."""
    raw = np.geomspace(c_star / 4, 4 * c_star, points)
    return sorted({max(16, int(round(c / 16)) * 16) for c in raw})


def simulate(args: argparse.Namespace, out: Path, flags: list[str]) -> None:
    cmd = [*module_command("envs.simulate"), "ring_attention", "--platform", "flat",
           "--ranks", "4", "--bw", args.bw, "--build", str(args.build), "--out", str(out),
           "--no-plot", "--", *RING, *flags]
    subprocess.run(cmd, check=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out-dir", type=Path, required=True, help="where the files go")
    parser.add_argument("--build", type=Path, default=ROOT / "build-sim",
                        help="the SMPI build (make sim)")
    parser.add_argument("--bw", default="50M", help="the simulated links' bandwidth, B/s")
    parser.add_argument("--points", type=int, default=8, help="block sizes in the sweep")
    args = parser.parse_args(argv)
    if args.points < 2:
        print("error: sim_ring_demo.py: --points must be at least 2", file=sys.stderr)
        return 2
    args.out_dir.mkdir(parents=True, exist_ok=True)
    calib = args.out_dir / "ring_attention_flat_calibration.h5"
    simulate(args, calib, ["--block", "256", "--iters", "2", "--warmup", "1"])
    with h5py.File(calib) as f:
        c_star = float(next(iter(f["ring_attention"].values())).attrs["c_star_tokens"])
    blocks = blocks_around(c_star, args.points)
    print(f"== this host's c* on the simulated link: {c_star:.0f} tokens; sweeping c = "
          f"{', '.join(map(str, blocks))} ==", flush=True)
    sweep = args.out_dir / "ring_attention_flat.h5"
    simulate(args, sweep, ["--block", ",".join(map(str, blocks)), "--iters", "3", "--warmup", "1"])
    subprocess.run([*module_command("studies.ring_crossing"), str(sweep)], check=True)
    subprocess.run([*module_command("plots.plot"), str(sweep), "--out",
                    str(args.out_dir / "ring_attention_flat_plots")], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
