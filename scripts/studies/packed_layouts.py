"""The ring's layouts on one pack of documents, simulated: balance, padding and efficiency.

    suite packed-layouts --ranks 64 --docs lognormal:256:1 [--out DIR]

Two SMPI runs of ring_attention (`fattree`, modeled compute at 400 TFLOP/s, c 8K, bf16, 32 query
heads and 8 K/V heads of 128, causal within documents, seed 1234): every layout, and `balanced`
again with `--balanced-chunk 128`. Prints one Markdown row per layout: work max/mean (counted
from the layout) · padding (doc_zigzag's pad slots) · the ring's predicted efficiency (lockstep)
· the forward's efficiency against the ideal (in simulated time). Modeled compute makes every
figure the same on any host; docs/PACKED_DOCUMENTS.md's simulated columns are these rows.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from scripts import module_command
from scripts.results.suite_results import read_results

LAYOUTS = "contiguous,zigzag,striped,doc_zigzag,balanced"
RING_FLAGS = ["--block", "8K", "--causal", "1", "--heads", "32", "--kv-heads", "8", "--head-dim",
              "128", "--dtype", "bf16", "--iters", "2", "--warmup", "1", "--check", "0"]
RUNS = (("layouts", ["--layout", LAYOUTS]),
        ("chunk128", ["--layout", "balanced", "--balanced-chunk", "128"]))


def cell(attrs: dict) -> str:
    pad = float(attrs.get("docs_padding_fraction", 0.0))
    return " · ".join((f"{attrs['work_max_over_mean']:.2f}", f"{100 * pad:.1f}%" if pad else "0",
                       f"{attrs['pred_efficiency_lockstep']:.2f}",
                       format(attrs["efficiency_vs_ideal_fwd"], ".2g")))


def rows(out: Path) -> list[str]:
    """`| layout | cell |` per case of the two runs' files, in the document's order."""
    lines = []
    for tag, _ in RUNS:
        res = read_results(str(out / f"ring_{tag}.h5"))
        cases = {c.params.get("layout", ""): c for c in res.cases_of(res.bench)}
        for layout in LAYOUTS.split(",") if tag == "layouts" else ["balanced"]:
            label = layout if tag == "layouts" else "balanced, `--balanced-chunk 128`"
            lines.append(f"| {label} | {cell(cases[layout].attrs)} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("--ranks", type=int, default=64, help="simulated ranks (default 64)")
    ap.add_argument("--docs", default="lognormal:256:1", help="the pack (ring_attention's --docs)")
    ap.add_argument("--out", type=Path, help="folder for the two results files (default: a "
                                             "temporary folder, removed)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        for tag, flags in RUNS:
            cmd = [*module_command("envs.simulate"), "ring_attention", "--platform", "fattree",
                   "--ranks", str(args.ranks), "--sim-flops", "4e14", "--no-plot",
                   "--out", str(out / f"ring_{tag}.h5"), "--", *RING_FLAGS, "--docs", args.docs,
                   *flags]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"error: `{' '.join(cmd)}` exited {proc.returncode}:\n{proc.stderr[-1500:]}",
                      file=sys.stderr)
                return 2
        print(f"| layout | {args.ranks} simulated |\n| --- | --- |")
        print("\n".join(rows(out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
