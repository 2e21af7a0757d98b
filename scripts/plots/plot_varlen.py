"""Packed documents against N_c: what `model --section varlen --csv` predicts, per distribution.

    build/bin/model --section varlen --docs lognormal:1024:1 --cp-sweep 8:1024:x2 \\
        --tokens-per-rank 8K --causal --csv lognormal.csv
    suite plot-varlen lognormal.csv pareto.csv --out plots/

writes `varlen_<distribution>.png` for each CSV: the ring's predicted efficiency (mean / lockstep),
the all-gather's (mean / max) and the ranks' work max / mean against N_c, one line per layout,
and doc_zigzag's padding; plain Ulysses is the flat line at 1 (equal work by construction).
Points measured by ring_attention (its HDF5 files, `--measured`) go on the same axes.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from scripts.results.suite_results import read_results  # noqa: E402


def read_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows or "pred_efficiency_lockstep" not in rows[0]:
        raise SystemExit(f"error: {path} is not a CSV of `model --section varlen --csv`")
    return rows


def measured_points(paths: list[Path], rows: list[dict[str, str]]) -> dict[str, list[tuple[int, float]]]:
    """(N_c, efficiency against the ideal) per layout of the ring cases that match a row of the
    CSV: the same documents and mask, layout, N_c and tokens per rank (a case at another c or
    with the other mask is no point of these curves)."""
    wanted = {(r["docs"], int(r["causal"]), r["layout"], int(r["n_c"]), int(r["c"]))
              for r in rows if r["u"] == "1"}
    out: dict[str, list[tuple[int, float]]] = {}
    for p in paths:
        for case in read_results(p, load_datasets=False).cases.values():
            a = case.attrs
            if case.bench != "ring_attention" or a.get("variant") != "ring":
                continue
            key = (a.get("docs"), int(a.get("causal", -1)), str(a.get("layout")), int(a.get("n_c", -1)),
                   int(a.get("c", -1)))
            if key not in wanted:
                continue
            eff = a.get("efficiency_vs_ideal_fwd")
            if eff is not None and np.isfinite(float(eff)):
                out.setdefault(str(a["layout"]), []).append((int(a["n_c"]), float(eff)))
    return out


def figure(rows: list[dict[str, str]], measured: dict[str, list[tuple[int, float]]]) -> plt.Figure:
    docs = rows[0]["docs"]
    fig, (eff, imb) = plt.subplots(1, 2, figsize=(13, 5))
    by_layout: dict[str, list[dict[str, str]]] = {}
    for r in rows:
        by_layout.setdefault(r["layout"], []).append(r)
    for layout, members in by_layout.items():
        members.sort(key=lambda r: int(r["n_c"]))
        n = [int(r["n_c"]) for r in members]
        label = layout
        pad = max(float(r["padding_fraction"]) for r in members)
        if pad > 0:
            label += f" (padding up to {100 * pad:.1f}%)"
        line = eff.plot(n, [float(r["pred_efficiency_lockstep"]) for r in members], "o-", label=f"{label}: ring")[0]
        if layout != "ulysses":
            eff.plot(n, [float(r["pred_efficiency_balance"]) for r in members], ".:", color=line.get_color(),
                     label=f"{layout}: all-gather")
            imb.plot(n, [float(r["work_max_over_mean"]) for r in members], "o-", color=line.get_color(), label=layout)
        for nc, e in measured.get(layout, []):
            eff.plot([nc], [e], "*", color=line.get_color(), markersize=12)
    for ax in (eff, imb):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("N_c (context-parallel ranks)")
        ax.grid(True, which="both", alpha=0.3)
    eff.set_ylabel("predicted efficiency (mean work / time in pair units)")
    eff.set_ylim(0, 1.05)
    eff.set_title("ring: mean / lockstep; all-gather: mean / max (stars: measured vs ideal)", fontsize=9)
    eff.legend(fontsize=7, loc="lower left")
    imb.set_ylabel("work max / mean over ranks")
    imb.set_title("imbalance of the ranks' total work", fontsize=9)
    imb.legend(fontsize=7)
    causal = "causal" if rows[0]["causal"] == "1" else "full"
    c = rows[0]["c"]
    fig.suptitle(f"packed documents {docs}, {causal} within documents, c = {c} tokens per rank (exact counts)")
    fig.tight_layout()
    return fig


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="+", type=Path, help="CSV files written by model --section varlen --csv")
    ap.add_argument("--measured", nargs="*", type=Path, default=[], help="ring_attention HDF5 files to mark")
    ap.add_argument("--out", type=Path, default=Path("."), help="folder for the PNGs")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for path in args.csv:
        rows = read_rows(path)
        fig = figure(rows, measured_points(args.measured, rows))
        name = "varlen_" + "".join(ch if ch.isalnum() or ch in ".-" else "-" for ch in rows[0]["docs"]) + ".png"
        fig.savefig(args.out / name, dpi=110)
        plt.close(fig)
        print(args.out / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
