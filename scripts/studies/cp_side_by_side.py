"""Context-parallel methods side by side on the same packs of documents.

    cp_side_by_side.py --where cpu4,sim64,sim512 --docs lognormal:256:1,pareto:256:1.1 --out DIR
    cp_side_by_side.py --tables-only DIR          # the table again from the files of a run

For every place and pack it runs ring_attention (variants ring, allgather, groupcast) and
ulysses (plain Ulysses where the heads allow it, and a hybrid with its ring part as the ring and
as the group-cast), all with the `balanced` layout and the same seed, and prints one Markdown
table per pack: each cell is the busiest rank's bytes sent in a forward (MiB, counted by the
transport), the ranks' work max / mean (counted from the layout) and the forward's efficiency
against the ideal (measured; in simulated time under modeled compute).

Places:
  cpu4    4 local MPI ranks on the CPU backend (mpirun, --oversubscribe), c = 1K, fp32,
          8 heads of 64; Ulysses u = 4, hybrid u = 2
  simN    N simulated ranks (SMPI fat tree, scripts/envs/simulate.py), modeled compute at 400 TFLOP/s,
          c = 8K, bf16, 32 query heads and 8 K/V heads of 128; hybrid u = 8, plain Ulysses only
          where N <= 32 (one head per rank at most)
Bad input (an unknown place, a missing build) is one `error:` line and exit 2.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from scripts import ROOT as REPO, module_command
from scripts.results.suite_results import read_results

SIM_HEADS = 32
SIM_FLOPS = "4e14"
CPU_FLAGS = ["--backend", "cpu", "--heads", "8", "--kv-heads", "8", "--head-dim", "64",
             "--dtype", "fp32", "--iters", "5", "--warmup", "1"]
SIM_FLAGS = ["--heads", str(SIM_HEADS), "--kv-heads", "8", "--head-dim", "128", "--dtype", "bf16",
             "--iters", "2", "--warmup", "1", "--check", "0"]
DOC_FLAGS = ["--layout", "balanced", "--causal", "1", "--seed", "1234"]
# Row order of the table: (label, bench, parameter test, the run a simulated place gives it:
# ring_attention's variant, or "" for ulysses' one file).
METHODS = (
    ("ring", "ring_attention", lambda p: p.get("variant") == "ring", "ring"),
    ("all-gather (Llama 3)", "ring_attention", lambda p: p.get("variant") == "allgather",
     "allgather"),
    ("group-cast", "ring_attention", lambda p: p.get("variant") == "groupcast", "groupcast"),
    ("Ulysses", "ulysses", lambda p: p.get("method") == "ulysses", ""),
    ("hybrid, ring part: ring", "ulysses",
     lambda p: p.get("method") == "hybrid" and p.get("ring_variant", "ring") == "ring", ""),
    ("hybrid, ring part: group-cast", "ulysses",
     lambda p: p.get("method") == "hybrid" and p.get("ring_variant") == "groupcast", ""),
)


def fail(msg: str) -> None:
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(2)


def place_ranks(where: str) -> int:
    if where == "cpu4":
        return 4
    m = re.fullmatch(r"sim(\d+)", where)
    if not m or int(m.group(1)) < 2:
        fail(f"--where {where}: cpu4 or simN (N >= 2 simulated ranks)")
    return int(m.group(1))


def commands(where: str, docs: str, out: Path) -> list[tuple[str, list[str]]]:
    """The runs of one place and pack: (results file, command). Simulated places run each
    ring_attention variant alone (one file each), so that a slow one costs only its own cell."""
    n = place_ranks(where)
    tag = f"{where}_{docs.replace(':', '-')}"
    docs_flags = ["--docs", docs] + DOC_FLAGS
    if where == "cpu4":
        launch = ["mpirun", "-np", "4", "--oversubscribe"]
        ring = launch + [str(REPO / "build/bin/ring_attention"), "--block", "1K"] + CPU_FLAGS
        ring += ["--variant", "ring,allgather,groupcast", "--out", str(out / f"ring_{tag}.h5")]
        uly = launch + [str(REPO / "build/bin/ulysses"), "--seq-per-rank", "1K",
                        "--ulysses-degree", "2,4"] + CPU_FLAGS
        uly += ["--ring-variant", "ring,groupcast", "--out", str(out / f"ulysses_{tag}.h5")]
        return [(str(out / f"ring_{tag}.h5"), ring + docs_flags),
                (str(out / f"ulysses_{tag}.h5"), uly + docs_flags)]

    def via(bench: str, h5: Path) -> list[str]:
        return [*module_command("envs.simulate"), bench, "--platform", "fattree",
                "--ranks", str(n), "--sim-flops", SIM_FLOPS, "--out", str(h5), "--"]

    runs = []
    for variant in ("groupcast", "ring", "allgather"):
        h5 = out / f"ring_{tag}_{variant}.h5"
        runs.append((str(h5), via("ring_attention", h5) + ["--block", "8K"] + SIM_FLAGS +
                     ["--variant", variant] + docs_flags))
    degrees = "8" if n > SIM_HEADS else f"8,{n}"
    h5 = out / f"ulysses_{tag}.h5"
    runs.append((str(h5), via("ulysses", h5) + ["--seq-per-rank", "8K", "--ulysses-degree",
                                                degrees] + SIM_FLAGS +
                 ["--ring-variant", "ring,groupcast"] + docs_flags))
    return runs


def run_limited(cmd: list[str], log, env: dict, timeout: float, h5: Path) -> int | str:
    """Run one command; past `timeout` seconds stop it and everything it started (smpirun's
    simulator too) and leave H5.timeout, which the table shows in that run's cells."""
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)
    try:
        return proc.wait(timeout=timeout or None)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        h5.with_suffix(".timeout").write_text(f"{timeout:.0f}\n")
        return f"stopped after {timeout:.0f} s"


def cell(attrs: dict) -> str:
    sent = attrs.get("bytes_sent_per_rank_per_layer", attrs.get("bytes_sent_per_rank"))
    eff = attrs.get("efficiency_vs_ideal_fwd")
    work = attrs.get("work_max_over_mean")
    fmt = (lambda v, f: "n/a" if v is None else format(v, f))
    size = "n/a" if sent is None else (f"{sent / 2**30:.3g} GiB" if sent >= 2**30
                                         else f"{sent / 2**20:.4g} MiB")
    return f"{size} · {fmt(work, '.2f')} · {fmt(eff, '.3g')}"


def table(out: Path, places: list[str], docs: str) -> str:
    tags = {w: f"{w}_{docs.replace(':', '-')}" for w in places}
    cases = {w: [c for path in sorted(out.glob(f"ring_{tags[w]}*.h5")) +
                 sorted(out.glob(f"ulysses_{tags[w]}.h5"))
                 for res in [read_results(str(path))] for c in res.cases_of(res.bench)]
             for w in places}
    head = ["method"] + [("4 CPU ranks" if w == "cpu4" else f"{place_ranks(w)} simulated")
                         for w in places]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for label, bench, wanted, run in METHODS:
        row = [label]
        for where in places:
            hits = [c for c in cases[where] if c.bench == bench and wanted(c.params)]
            stem = f"ring_{tags[where]}_{run}" if run else f"ulysses_{tags[where]}"
            stopped = out / f"{stem}.timeout"
            if hits:
                row.append(cell(hits[0].attrs))
            elif label == "Ulysses" and place_ranks(where) > SIM_HEADS:
                row.append(f"— ({SIM_HEADS} heads < {place_ranks(where)} ranks)")
            elif stopped.exists():
                row.append(f"stopped after {stopped.read_text().strip()} s")
            else:
                row.append("not run")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("--where", default="cpu4,sim64",
                    help="places, comma-separated: cpu4 and/or simN (default cpu4,sim64)")
    ap.add_argument("--docs", default="lognormal:256:1,pareto:256:1.1",
                    help="document length distributions (the benchmarks' --docs), comma-separated")
    ap.add_argument("--out", default="results/cp_side_by_side", help="folder for the results")
    ap.add_argument("--timeout", type=float, default=0,
                    help="seconds a run may take before it is stopped and its cells say so (0: none)")
    ap.add_argument("--tables-only", action="store_true", help="print the tables from --out only")
    args = ap.parse_args(argv)
    places = [w for w in args.where.split(",") if w]
    for w in places:
        place_ranks(w)
    docs_list = [d for d in args.docs.split(",") if d]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not args.tables_only:
        for b in ("ring_attention", "ulysses"):
            if not (REPO / "build/bin" / b).exists():
                fail(f"build/bin/{b} missing: build the suite first (make build)")
        env = dict(os.environ, OMPI_MCA_rmaps_base_oversubscribe="1")
        for docs in docs_list:
            for where in places:
                for h5, cmd in commands(where, docs, out):
                    t0 = time.time()
                    print(f"[{where} {docs}] {' '.join(cmd)}", flush=True)
                    log = Path(h5).with_suffix(".log")
                    with open(log, "w") as f:
                        rc = run_limited(cmd, f, env, args.timeout, Path(h5))
                    print(f"  rc {rc}, {time.time() - t0:.0f} s, log {log}", flush=True)
    for docs in docs_list:
        print(f"\n{docs}: bytes sent per rank in a forward · work max/mean · efficiency vs ideal\n")
        print(table(out, places, docs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
