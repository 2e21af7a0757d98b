"""Rerun the simulations behind the tables of simulated figures in README.md and docs/, and fail
when a published figure has drifted from what its command prints now.

    suite docs-check [--sim-build build-sim] [--model build/bin/model] [--only NAME ...] [--long]

Simulated figures with modeled compute are deterministic (SMPI's clock, FLOPs injected at a
fixed rate), so a table of them must come out of the command it names, to the digit. Each check
below names the document, the heading its table follows, the command (the one the document
gives, grid included) and how the command's output maps onto the table's cells; every cell is
compared as printed, and every row the command prints must be in the table (or, for a table
that quotes some rows, every row it names). The tables: TP+SP's overlap crossings, MoE across
nodes (two documents), what the mesh order buys (two tables), the packed-document layouts
(two documents, two packs) and the group-cast beside the other CP methods (two packs) at 64
simulated ranks, the planner's error at 64 GPUs (dense and MoE), the MoE all-to-all behind
another micro-batch (across d_ff on two platforms, and at DeepSeek-V3's sizes) and the planner
beside published runs (docs/PUBLISHED_RUNS.md: modeled only, no SMPI build needed), and the
verdict's sensitivity in simulation (docs/REGRESSIONS.md) and the pipeline at 405B's block sizes
(docs/PIPELINE_AT_SCALE.md). `--long` adds their 512-rank columns, the planner's 256-GPU rows
and the pipeline's 128-rank rows at 405B's mesh (5 minutes to over an hour of simulation each);
without it each of those is listed as not rerun. Columns measured on a host (4 CPU ranks, wall
time, memory) are not rerun. `make docs-check` runs them all but the long ones (about 15
minutes on 2 cores). `--quick` runs the TP-overlap sweep on the grid points on either side of
each published crossing only, which reproduces the crossings exactly while they stay between
those points (a crossing is interpolated between its two neighbours): that is the test
`docs_check_tp_overlap`.

Exit status: 0 when every figure matches, 1 when one drifted (each named, the document's value
beside the command's) or a row is missing, 2 when a command failed or a table was not found, 77
without an SMPI build.
"""

from __future__ import annotations

import argparse
import functools
import re
import subprocess
import sys
from dataclasses import dataclass
from decimal import ROUND_HALF_DOWN, ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Callable

from scripts import ROOT, module_command

SKIP = 77  # ctest's skip code: no SMPI build to rerun the simulations with

Row = list[str]


def table_after(doc: Path, heading: str | tuple[str, ...]) -> list[Row]:
    """The cells of the first markdown table from the line that starts with `heading` (the
    table's header line itself, or a line above it), header and separator left out. A tuple
    of prefixes is a path: each searched for after the one before (a section, then a table
    whose caption repeats in another section)."""
    lines = doc.read_text().splitlines()
    start = 0
    for prefix in (heading,) if isinstance(heading, str) else heading:
        start = next((i for i in range(start, len(lines)) if lines[i].startswith(prefix)), None)
        if start is None:
            raise LookupError(f"{doc.name}: no line starting with {prefix!r}")
    rows: list[Row] = []
    for line in lines[start:]:
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif rows:
            break
    if len(rows) < 3:
        raise LookupError(f"{doc.name}: no table after {heading!r}")
    return rows[2:]


@functools.lru_cache(maxsize=None)
def run(command: tuple[str, ...]) -> str:
    """The command's stdout (each command runs once however many tables it makes)."""
    proc = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"`{' '.join(command)}` exited {proc.returncode}:\n"
                           f"{proc.stdout[-1500:]}\n{proc.stderr[-1500:]}")
    return proc.stdout


@dataclass
class Check:
    """One published table: where it is, the command that makes it, and `expected(output)`:
    {row key: {column: the cells it may say}} (one cell, or the forms a document may use).
    `rows`: the keys of the rows this check covers, where the table quotes only some of the rows
    the command prints or other checks cover its other rows (None: every row, both ways)."""

    name: str
    doc: str
    heading: str | tuple[str, ...]
    command: Callable[[argparse.Namespace], list[str]]
    expected: Callable[[str], dict[str, dict[int, tuple[str, ...]]]]
    key_columns: tuple[int, ...]
    rows: tuple[str, ...] | None = None
    key_of: Callable[[str], str] = lambda cell: cell  # a key cell as the command names it
    long: bool = False  # minutes to an hour of simulation: run with --long only
    needs_sim: bool = True  # False: the command models only (no SMPI build needed)

    def drifts(self, args: argparse.Namespace) -> list[str]:
        """`<doc> <row> column N: published X, the command prints Y` for each mismatch, and a
        line for each row the table should publish and lacks (a row deleted from it)."""
        rows = table_after(ROOT / self.doc, self.heading)
        want = self.expected(run(tuple(self.command(args))))
        found = []
        for row in rows:
            key = " | ".join(self.key_of(row[c]) for c in self.key_columns)
            if self.rows is not None and key not in self.rows:
                continue  # a row another check covers
            if key not in want:
                found.append(f"{self.doc} row `{key}`: the command prints no such row")
                continue
            for column, cells in want.pop(key).items():
                if row[column] not in cells:
                    found.append(f"{self.doc} row `{key}` column {column + 1}: published "
                                 f"{row[column]!r}, the command prints {cells[0]!r}")
        published = want if self.rows is None else [k for k in self.rows if k in want]
        for key in published:  # printed, meant to be published, not in the table
            found.append(f"{self.doc} row `{key}`: the command prints it, the table lacks it")
        return found


# docs/FINDINGS.md, TP+SP with its collectives beside the GEMMs: op | c | predicted | crossing | ratio.
TP_OVERLAP_GRID = "256:2048:64"
# The points of that grid on either side of each published crossing (fc1 and fc2, qkv,
# out_proj): the same crossings from 6 simulations instead of 29.
TP_OVERLAP_QUICK_GRID = "384,448,512,576,1472,1536"


def tp_overlap_command(args: argparse.Namespace) -> list[str]:
    grid = TP_OVERLAP_QUICK_GRID if args.quick else TP_OVERLAP_GRID
    return [*module_command("studies.tp_overlap_crossing"), "--seq", "8192", "--h-over-t", grid,
            "--build", str(args.sim_build), "--model", str(args.model)]


TP_OVERLAP_OPS = {"qkv": "qkv (all-gather)", "out_proj": "out_proj (reduce-scatter)",
                  "fc1": "fc1 (all-gather)", "fc2": "fc2 (reduce-scatter)"}


def tp_overlap_expected(output: str) -> dict[str, dict[int, str]]:
    """The crossing table tp_overlap_crossing.py ends with: op, predicted, crossing, ratio."""
    want = {}
    for line in output.splitlines():
        m = re.match(r"\s*(qkv|out_proj|fc1|fc2)\s+(\d+)\s+(\d+)\s+([0-9.]+)\s*$", line)
        if m:
            want[TP_OVERLAP_OPS[m.group(1)]] = {2: (m.group(2),), 3: (m.group(3),),
                                                4: (m.group(4),)}
    return want


# docs/MOE_ACROSS_NODES.md prints moe_node_study.py's rows as they are; docs/FINDINGS.md quotes some of
# their columns: EP | dispatch | node limit | dispatch ms | across MB/rank | rows/token (pred.) |
# across GB/s.
MOE_RANKS = "8,16,32,64,128"


def moe_command(args: argparse.Namespace) -> list[str]:
    return [*module_command("studies.moe_node_study"), "--ranks", MOE_RANKS,
            "--build", str(args.sim_build)]


def table_rows(output: str, start: str) -> list[Row]:
    """The cells of the Markdown rows a command prints whose line matches `start`."""
    return [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in output.splitlines() if re.match(start, line)]


def moe_rows(output: str) -> list[Row]:
    return table_rows(output, r"\|\s*\d")


def moe_doc_expected(output: str) -> dict[str, dict[int, str]]:
    """Every cell of every row, keyed by EP, max nodes and dispatch."""
    return {" | ".join((r[0], r[2], r[3])): {i: (cell,) for i, cell in enumerate(r)}
            for r in moe_rows(output)}


def moe_readme_expected(output: str) -> dict[str, dict[int, tuple[str, ...]]]:
    """The findings' columns of the same rows; its rows/token cell gives the prediction in
    parentheses (the study's `(4.00 if unlimited)`) or leaves it out, and its GB/s is the
    dispatch's (the study's first)."""
    want = {}
    for r in moe_rows(output):
        count, _, predicted = r[9].partition(" (")
        predicted = predicted.replace(" if unlimited)", ")")
        want[" | ".join((r[0], r[3], r[2]))] = {
            3: (r[5],), 4: (r[7],), 5: (f"{count} ({predicted}" if predicted else count, count),
            6: (r[10].split(" / ")[0],)}
    return want


# The rows docs/FINDINGS.md quotes (EP | dispatch | node limit), ten of the study's eighteen: a row
# deleted from it is a drift too.
MOE_README_ROWS = ("16 | flat | -", "16 | hierarchical | -", "32 | flat | 4", "32 | hierarchical | 4",
                   "64 | flat | 4", "64 | hierarchical | -", "64 | hierarchical | 4",
                   "128 | flat | 4", "128 | hierarchical | -", "128 | hierarchical | 4")

# docs/FINDINGS.md, what the order buys: two tables of mesh-orders' rows, its milliseconds to
# two decimals, EP left out (a dense block): order | step sim | step model | error | TP | CP | DP.
MESH_ORDER_BLOCK = ("--dtype", "bf16", "--seq", "32768", "--hidden", "8192", "--heads", "64",
                    "--kv-heads", "8", "--ffn-hidden", "28672")


def mesh_orders_command(nodes: str, degrees: tuple[str, str, str], orders: str):
    tp, cp, dp = degrees
    return lambda args: [*module_command("studies.mesh_orders"), "--nodes", nodes, "--tp", tp,
                         "--cp", cp, "--dp", dp, "--orders", orders, "--", *MESH_ORDER_BLOCK]


def backticked(cell: str) -> str:
    """`tp,cp,ep,dp` (Megatron's) -> tp,cp,ep,dp."""
    return cell.split("`")[1] if cell.count("`") >= 2 else cell


def two_decimals(cell: str) -> tuple[str, ...]:
    """`3.607 / 4.507` -> `3.61 / 4.51`: the document's precision. A printed third decimal of 5
    may round either way (the value behind it is not printed), so both forms are accepted."""
    forms = [""]
    for i, value in enumerate(cell.split(" / ")):
        rounded = {str(Decimal(value).quantize(Decimal("0.01"), mode))
                   for mode in (ROUND_HALF_UP, ROUND_HALF_DOWN)}
        forms = [f"{f}{' / ' if i else ''}{r}" for f in forms for r in sorted(rounded)]
    return tuple(forms)


def mesh_orders_expected(output: str) -> dict[str, dict[int, tuple[str, ...]]]:
    """Keyed by the order in backticks (the document may add a note after it)."""
    want = {}
    for r in table_rows(output, r"\|\s*`"):
        want[r[0].strip("`")] = {1: two_decimals(r[1]), 2: two_decimals(r[2]), 3: (r[3],),
                          4: two_decimals(r[4]), 5: two_decimals(r[5]), 6: two_decimals(r[7])}
    return want


# The packed-document layouts (docs/FINDINGS.md and docs/PACKED_DOCUMENTS.md) and the
# group-cast beside the other CP methods (docs/FINDINGS.md): the simulated columns, each the one
# column of a study that prints `| row | cell |`.
PACKS = {"lognormal:256:1": ("lognormal:256:1 (short", "**lognormal:256:1**"),
         "pareto:256:1.1": ("pareto:256:1.1 (long", "**pareto:256:1.1**")}
SIM_COLUMNS = {64: 2, 512: 3}  # simulated ranks: the documents' column


def one_column_expected(doc_column: int) -> Callable[[str], dict[str, dict[int, tuple[str, ...]]]]:
    return lambda output: {r[0]: {doc_column: (r[1],)} for r in table_rows(output, r"\|")
                           if len(r) == 2 and r[1] not in ("---",) and not r[1].endswith("simulated")}


def packed_command(ranks: int, docs: str):
    return lambda args: [*module_command("studies.packed_layouts"), "--ranks", str(ranks),
                         "--docs", docs]


def groupcast_command(ranks: int, docs: str):
    return lambda args: [*module_command("studies.cp_side_by_side"), "--where", f"sim{ranks}",
                         "--docs", docs, "--timeout", "900", "--out",
                         str(ROOT / "results" / "cp_side_by_side")]


def cp_checks() -> tuple[Check, ...]:
    checks = []
    for docs, (finding_caption, packed_caption) in PACKS.items():
        short = docs.split(":")[0]
        for ranks, column in SIM_COLUMNS.items():
            expected = one_column_expected(column)
            long = ranks > 64
            checks += [
                Check(f"packed_{short}_{ranks}", "docs/FINDINGS.md", ("## Packed documents",
                      finding_caption), packed_command(ranks, docs), expected, (0,), long=long),
                Check(f"packed_doc_{short}_{ranks}", "docs/PACKED_DOCUMENTS.md",
                      packed_caption, packed_command(ranks, docs), expected, (0,), long=long),
                Check(f"groupcast_{short}_{ranks}", "docs/FINDINGS.md", ("## K/V only where",
                      finding_caption), groupcast_command(ranks, docs), expected, (0,),
                      long=long)]
    return tuple(checks)


# docs/FINDINGS.md, the planner's error: one row per model and GPU count, each from plan-check's
# closing line on the simulated calibration (`calibrate --simulate`, made once).
PLAN_MODELS = {
    "dense": ["--seq", "32768", "--hidden", "4096", "--heads", "32", "--kv-heads", "8", "--d-ff",
              "14336", "--layers", "32", "--dtype", "bf16", "--causal"],
    "MoE": ["--seq", "8192", "--hidden", "2048", "--heads", "16", "--kv-heads", "16", "--d-ff", "1408",
            "--experts", "64", "--top-k", "6", "--swiglu", "--layers", "27", "--dtype", "bf16",
            "--causal"],
}


@functools.lru_cache(maxsize=None)
def simulated_calibration() -> str:
    path = ROOT / "results" / "docs_check_calib.json"
    run((*module_command("planner.calibrate"), "--simulate", "--out", str(path)))
    return str(path)


def plan_check_command(model: str, gpus: int):
    return lambda args: [*module_command("planner.plan_check"), "--calibration",
                         simulated_calibration(), "--gpus", str(gpus), "--", *PLAN_MODELS[model]]


def plan_check_expected(model: str, gpus: int):
    def expected(output: str) -> dict[str, dict[int, tuple[str, ...]]]:
        m = re.search(r"median \|error\| ([0-9.]+%), largest ([0-9.]+%), Kendall's tau ([0-9.]+), "
                      r"the first pick .*?\(([+-][0-9.]+)%", output)
        if not m:
            return {}
        pick = m.group(4).lstrip("+")
        first = (f"the best ({pick}%)",) if float(pick) == 0 else (f"{m.group(4)}%",)
        return {f"{model} | {gpus}": {2: (m.group(1),), 3: (m.group(2),), 4: (m.group(3),),
                                      5: first}}
    return expected


def plan_checks() -> tuple[Check, ...]:
    return tuple(Check(f"planner_{model.lower()}_{gpus}", "docs/FINDINGS.md",
                       "| model | GPUs | median", plan_check_command(model, gpus),
                       plan_check_expected(model, gpus), (0, 1), rows=(f"{model} | {gpus}",),
                       long=gpus > 64)
                 for model in PLAN_MODELS for gpus in (64, 256))
# docs/FINDINGS.md, the MoE all-to-all behind another micro-batch: one table per platform, every
# row moe_overlap_crossing.py prints (d_ff | A | X | step | pred | exposed | M=1 step | d_ff* |
# verdict).
MOE_OVERLAP_PLATFORMS = {"moe_overlap_nvlink": ("nvlink", "5e14"), "moe_overlap_ib": ("ib", "5e13")}


def moe_overlap_command(name: str, args: argparse.Namespace) -> list[str]:
    link, flops = MOE_OVERLAP_PLATFORMS[name]
    return [*module_command("studies.moe_overlap_crossing"), "--link", link, "--sim-flops", flops,
            "--build", str(args.sim_build)]


def moe_overlap_expected(output: str) -> dict[str, dict[int, tuple[str, ...]]]:
    want = {}
    for line in output.splitlines():
        cells = line.split(None, 8)
        if len(cells) == 9 and cells[0].isdigit():
            want[cells[0]] = {c: (cells[c],) for c in range(1, 9)}
    return want


# docs/FINDINGS.md, the same at DeepSeek-V3's sizes: moe_overlap_deepseek.py prints the table's
# rows (dispatch | M | step | X | A | exposed | critical path).
def moe_deepseek_command(args: argparse.Namespace) -> list[str]:
    return [*module_command("studies.moe_overlap_deepseek"), "--build", str(args.sim_build)]


def moe_deepseek_expected(output: str) -> dict[str, dict[int, tuple[str, ...]]]:
    want = {}
    for line in output.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 7 and cells[1].isdigit():
            want[f"{cells[0]} | {cells[1]}"] = {c: (cells[c],) for c in range(2, 7)}
    return want


def published_runs_command(args: argparse.Namespace) -> list[str]:
    return [*module_command("studies.published_runs"), "--model", str(args.model)]


def markdown_rows_expected(columns: int, keys: tuple[int, ...]):
    """Every cell of the rows of a markdown table of `columns` columns that a command prints
    (its header and separator left out), keyed by the cells at `keys`."""
    def expected(output: str) -> dict[str, dict[int, tuple[str, ...]]]:
        want = {}
        lines = output.splitlines()
        for line, after in zip(lines, [*lines[1:], ""]):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            header = after.replace(" ", "").startswith("|---")
            if line.startswith("|") and len(cells) == columns and not header and not cells[0].startswith("---"):
                want[" | ".join(cells[k] for k in keys)] = {i: (c,) for i, c in enumerate(cells)}
        return want
    return expected


# docs/PIPELINE_AT_SCALE.md, the pipeline's block at 405B's sizes: every row pipeline_at_scale.py
# prints for `table` (the doc's wall time and memory are the host's, not compared).
def pipeline_scale_command(table: str):
    return lambda args: [*module_command("studies.pipeline_at_scale"), "--table", table,
                         "--build", str(args.sim_build)]


# docs/REGRESSIONS.md, the verdict's sensitivity in simulation: every row sensitivity.py prints
# (benchmark | slowed | slowdown | cases | found at the first slowed run | elsewhere).
def sensitivity_command(args: argparse.Namespace) -> list[str]:
    return [*module_command("results.sensitivity"), "--build", str(args.sim_build),
            "--slowdowns", "0,0.005,0.01,0.02", "--nights", "8"]


CHECKS = (
    Check("tp_overlap", "docs/FINDINGS.md", "| op | c | predicted h/t", tp_overlap_command,
          tp_overlap_expected, (0,)),
    Check("moe_nodes", "docs/MOE_ACROSS_NODES.md", "from 64.", moe_command, moe_doc_expected,
          (0, 2, 3)),
    Check("moe_nodes_readme", "docs/FINDINGS.md", "DeepEP's configuration", moe_command,
          moe_readme_expected, (0, 1, 2), rows=MOE_README_ROWS),
    Check("mesh_orders_2_nodes", "docs/FINDINGS.md", "2 nodes, TP 4 x CP 2 x DP 2",
          mesh_orders_command("2", ("4", "2", "2"), "tp,cp,ep,dp/tp,dp,ep,cp/cp,ep,dp,tp"),
          mesh_orders_expected, (0,), key_of=backticked),
    Check("mesh_orders_16_nodes", "docs/FINDINGS.md", "16 nodes, TP 8 x CP 4 x DP 4",
          mesh_orders_command("16", ("8", "4", "4"), "tp,cp,ep,dp/cp,ep,dp,tp/dp,ep,cp,tp"),
          mesh_orders_expected, (0,), key_of=backticked),
    *cp_checks(),
    *plan_checks(),
    Check("moe_overlap_deepseek", "docs/FINDINGS.md", "| dispatch | M | step ms |", moe_deepseek_command,
          moe_deepseek_expected, (0, 1)),
    *(Check(name, "docs/FINDINGS.md", f"| d_ff ({link}) |", functools.partial(moe_overlap_command, name),
            moe_overlap_expected, (0,)) for name, (link, _) in MOE_OVERLAP_PLATFORMS.items()),
    Check("published_runs", "docs/PUBLISHED_RUNS.md", "| source | system", published_runs_command,
          markdown_rows_expected(13, (1, 2, 3)), (1, 2, 3), needs_sim=False),
    Check("published_runs_error", "docs/PUBLISHED_RUNS.md", "| source | rows", published_runs_command,
          markdown_rows_expected(4, (0,)), (0,), needs_sim=False),
    Check("pipeline_scale_reduced", "docs/PIPELINE_AT_SCALE.md", ("## (a) 405B's 8K stage, reduced", "| schedule"),
          pipeline_scale_command("reduced"), markdown_rows_expected(11, (0, 2, 3)), (0, 2, 3)),
    Check("pipeline_scale_cp", "docs/PIPELINE_AT_SCALE.md", ("## (b)", "| schedule"),
          pipeline_scale_command("cp"), markdown_rows_expected(12, (0, 1, 4)), (0, 1, 4)),
    Check("pipeline_scale_full", "docs/PIPELINE_AT_SCALE.md", ("## (a) at its mesh", "| schedule"),
          pipeline_scale_command("full"), markdown_rows_expected(12, (0, 2, 4)), (0, 2, 4), long=True),
    Check("pipeline_scale_cp16", "docs/PIPELINE_AT_SCALE.md",
          ("## (b) the 131K mesh's group at CP 16", "| schedule"), pipeline_scale_command("cp16"),
          markdown_rows_expected(12, (0, 1, 4)), (0, 1, 4), long=True),
    Check("sensitivity_simulated", "docs/REGRESSIONS.md", "| benchmark | slowed | slowdown |",
          sensitivity_command, markdown_rows_expected(6, (0, 2)), (0, 2)),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sim-build", type=Path, default=ROOT / "build-sim",
                        help="the SMPI build (make sim)")
    parser.add_argument("--model", type=Path, default=ROOT / "build" / "bin" / "model",
                        help="the CPU build's model executable")
    parser.add_argument("--only", action="append", choices=[c.name for c in CHECKS],
                        help="run only this check (repeatable)")
    parser.add_argument("--long", action="store_true",
                        help="also the 512-rank columns and the 256-GPU planner rows (5 minutes to over an hour of simulation each)")
    parser.add_argument("--quick", action="store_true",
                        help="the TP-overlap sweep on the points around its crossings only")
    args = parser.parse_args(argv)
    chosen = [c for c in CHECKS if not args.only or c.name in args.only]
    if any(c.needs_sim for c in chosen) and not (args.sim_build / "bin").is_dir():
        print(f"SKIP: no SMPI build in {args.sim_build} (make sim builds it)")
        return SKIP
    status = 0
    for check in chosen:
        if check.long and not (args.long or args.only):
            print(f"not rerun {check.name}: {check.doc}, its simulation is long "
                  f"(--long)")
            continue
        try:
            drifts = check.drifts(args)
        except (LookupError, RuntimeError) as err:
            print(f"ERROR {check.name}: {err}")
            status = 2
            continue
        for drift in drifts:
            print(f"DRIFT {check.name}: {drift}")
        if drifts:
            status = max(status, 1)
        else:
            print(f"ok {check.name}: {check.doc}, every figure as `{' '.join(check.command(args)[1:])}` prints it")
    return status


if __name__ == "__main__":
    sys.exit(main())
