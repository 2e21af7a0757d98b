"""Where a ring-attention block-size sweep stops exposing its transfer, beside the bound c*.

    ring_crossing.py RESULTS.h5 [--tol 0.1]

For each forward sweep (variant, layout, mask) of the file: the ratio of the overlapped step to
the compute-only step per block size c, the crossing (the c where the overlapped step first comes
within --tol of compute only, linearly interpolated from the last exposed point), and the c* the
run measured there (`c_star_tokens` = F/(gW) x e/2, x2 causal balanced, with F and W from the
same run, interpolated at the crossing). METHODS.md section 2 says the two agree: left of c* the
step is the transfer, right of it the compute. A sweep that never crosses (all exposed or all
hidden) says so. plot.py marks the crossing on the ring's sweep figure.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scripts.results.suite_results import Case, read_results

TOL = 0.10


def crossing(c, overlapped, compute, tol: float = TOL) -> float | None:
    """The block size where overlapped / compute first falls to 1 + tol, interpolated linearly
    between the last exposed and the first hidden point; None if the sweep starts hidden or
    never gets there."""
    c, r = np.asarray(c, float), np.asarray(overlapped, float) / np.asarray(compute, float)
    for i in range(len(c)):
        if r[i] <= 1 + tol:
            if i == 0:
                return None
            return float(c[i - 1] + (r[i - 1] - (1 + tol)) / (r[i - 1] - r[i]) * (c[i] - c[i - 1]))
    return None


@dataclass
class Sweep:
    label: str
    c: list[float]
    ratio: list[float]
    c_star: list[float]
    cross: float | None

    @property
    def c_star_at_cross(self) -> float | None:
        if self.cross is None:
            return None
        return float(np.interp(self.cross, self.c, self.c_star))


def sweeps(cases: list[Case], tol: float = TOL) -> list[Sweep]:
    """The forward ring sweeps of a file, one per (variant, layout, mask), sorted by c."""
    groups: dict[str, list[Case]] = {}
    for case in cases:
        a = case.attrs
        if str(a.get("pass", "fwd")) != "fwd" or "time_compute_only_median_s" not in a:
            continue
        label = f"{a['variant']} {a['layout']} {'causal' if int(a['causal']) else 'full'}"
        groups.setdefault(label, []).append(case)
    out = []
    for label, members in groups.items():
        members.sort(key=lambda m: m.attrs["c"])
        c = [float(m.attrs["c"]) for m in members]
        over = [float(m.attrs["time_median_s"]) for m in members]
        comp = [float(m.attrs["time_compute_only_median_s"]) for m in members]
        star = [float(m.attrs.get("c_star_tokens", np.nan)) for m in members]
        out.append(Sweep(label, c, list(np.divide(over, comp)), star,
                         crossing(c, over, comp, tol)))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path)
    parser.add_argument("--tol", type=float, default=TOL,
                        help="overlapped within this fraction of compute only counts as hidden")
    args = parser.parse_args(argv)
    res = read_results(args.results)
    found = sweeps(res.cases_of("ring_attention"), args.tol)
    if not found:
        print(f"error: {args.results}: no ring_attention forward sweep", file=sys.stderr)
        return 2
    print(f"{args.results}: {res.describe()}")
    for s in found:
        steps = "  ".join(f"c={c:g}: {r:.2f}" for c, r in zip(s.c, s.ratio))
        print(f"  {s.label}: overlapped / compute only  {steps}")
        if s.cross is None:
            where = "hidden from the first c" if s.ratio and s.ratio[0] <= 1 + args.tol else \
                "exposed over the whole sweep"
            print(f"    no crossing: {where}")
            continue
        star = s.c_star_at_cross
        print(f"    crossing (within {args.tol:.0%}) at c = {s.cross:.0f}; measured c* there = "
              f"{star:.0f}; crossing / c* = {s.cross / star:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
