#!/usr/bin/env python3
"""Track the median step time of each case over many runs, ordered by `created_utc`."""

from __future__ import annotations

import argparse
import re
import sys
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from suite_results import (Results, cli_warnings, find_result_files, natural_key,  # noqa: E402
                           read_results, warn)

_EPOCH = datetime.min.replace(tzinfo=timezone.utc)


def load_runs(inputs: list[str], include_partial: bool) -> list[Results]:
    """Read every file (attributes only) and sort by `created_utc`, then by path."""
    runs = []
    for path in find_result_files(inputs, include_partial):
        try:
            res = read_results(path, load_datasets=False)
        except OSError as err:
            warn(f"{path}: not readable as HDF5 ({err}); skipped")
            continue
        if res.created is None:
            warn(f"{path}: no valid created_utc; sorted first")
        runs.append(res)
    configs = {tuple(map(str, r.config().values())) for r in runs}
    if len(configs) > 1:
        warn(f"the runs mix {len(configs)} configurations (bench/backend/transport/"
             "world_size/link); see the run list before reading a trend")
    return sorted(runs, key=lambda r: (r.created or _EPOCH, str(r.path)))


History = dict[str, list[tuple[int, float]]]


def case_history(runs: list[Results], pattern: re.Pattern[str] | None) -> History:
    """{`bench/case`: [(run index, median step time)]} for the cases matching `pattern`."""
    table: History = {}
    for i, run in enumerate(runs):
        for key, case in run.cases.items():
            if pattern and not pattern.search(key):
                continue
            if case.median_s is not None:
                table.setdefault(key, []).append((i, case.median_s))
    return dict(sorted(table.items(), key=lambda kv: natural_key(kv[0])))


def _run_label(run: Results) -> str:
    a = run.attrs
    flag = "" if run.complete else " (partial)"
    return (f"{a.get('created_utc', '?')}  {a.get('git_commit', '?')}  "
            f"{a.get('backend', '?')}/{a.get('transport', '?')} {a.get('link', '?')} "
            f"x{a.get('world_size', '?')}{flag}")


def print_history(runs: list[Results], table: History) -> None:
    """Per case, one line per run: time, commit, configuration, median and change vs first."""
    print("runs (oldest first):")
    for i, run in enumerate(runs):
        print(f"  [{i}] {_run_label(run)}  {run.path}")
    for key, points in table.items():
        print(f"\n{key}")
        first = points[0][1]
        for i, median in points:
            a = runs[i].attrs
            change = f"{median / first - 1:+.1%}" if first > 0 else ""
            print(f"  [{i}] {a.get('created_utc', '?'):<25} {str(a.get('git_commit', '?')):<14}"
                  f" {median:.4g} s  {change}")


def plot_history(runs: list[Results], table: History, out: Path) -> None:
    """One line per case: median step time over runs (x labelled by commit and date)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(7, 0.6 * len(runs) + 3), 5))
    for key, points in table.items():
        ax.plot([i for i, _ in points], [m for _, m in points], marker="o", label=key)
    labels = [f"{str(r.attrs.get('git_commit', '?'))[:10]}\n"
              f"{str(r.attrs.get('created_utc', '?'))[:10]}" for r in runs]
    ax.set_xticks(range(len(runs)), labels, fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("median step time (s)")
    ax.set_xlabel("run (oldest first)")
    ax.grid(True, which="both", alpha=0.3)
    if len(table) <= 12:
        ax.legend(fontsize=7)
    ax.set_title(f"median step time over {len(runs)} runs")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    print(f"\n{out}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Print (and optionally plot) each case's median step time over many runs, "
                    "oldest run first by created_utc.")
    parser.add_argument("inputs", nargs="+", metavar="FILE_OR_DIR",
                        help="results files, or directories searched recursively for *.h5")
    parser.add_argument("--case", default=None, metavar="REGEX",
                        help="only cases whose <bench>/<case> name matches this regular "
                             "expression (re.search)")
    parser.add_argument("--plot", type=Path, default=None, metavar="OUT.png",
                        help="also write a PNG of the median step time per case over runs")
    parser.add_argument("--include-partial", action="store_true",
                        help="in directories, also read *.h5.partial files (runs that did "
                             "not finish); files named explicitly are always read")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cli_warnings()
    try:
        pattern = re.compile(args.case) if args.case else None
    except re.error as err:
        print(f"error: bad --case regex: {err}", file=sys.stderr)
        return 2
    missing = [p for p in args.inputs if not Path(p).exists()]
    if missing:
        print(f"error: not found: {', '.join(missing)}", file=sys.stderr)
        return 2
    runs = load_runs(args.inputs, args.include_partial)
    if not runs:
        print("error: no results files found", file=sys.stderr)
        return 1
    table = case_history(runs, pattern)
    if not table:
        print("error: no case matches", file=sys.stderr)
        return 1
    print_history(runs, table)
    if args.plot:
        plot_history(runs, table, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
