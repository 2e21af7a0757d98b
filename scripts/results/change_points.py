"""Change points over each case's history: the runs where a case's median step time (or
another metric) stepped and stayed, found by Apache Otava's E-Divisive means with a t-test
(the method of MongoDB's and DataStax's performance trackers), not by comparing two runs.
A step that creeps in over several nights, or one that a later run undoes, is seen here.

    suite change-points FILE_OR_DIR... [--case REGEX] [--metric NAME] [--bench NAME]
                        [--include-partial]

Per case and system (history.py's series), each change point: the run it starts at, its size
(the mean after over the mean before, minus one), its p-value, the commits on either side, and
the environment fields (fingerprint.py) that changed between those two runs. history --html
marks them on the page. Exit status 0 (also with change points), 1 when no run or no case
matched, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Sequence

from scripts.results.fingerprint import fingerprint_diff
from scripts.results.suite_results import Results

MAX_PVALUE = 0.001  # Otava's default significance
WINDOW = 50  # Otava's default window: runs compared at once
MIN_RUNS = 4  # fewer runs in a series: nothing to split


@dataclass(frozen=True)
class Step:
    """One change point of one series: the run index (in history's run list) it starts at."""

    case: str
    system: str
    before: int  # last run of the old level
    after: int  # first run of the new level
    size: float  # mean after / mean before - 1
    pvalue: float
    environment: tuple[str, ...]  # fingerprint fields that changed between the two runs

    def text(self, runs: list[Results]) -> str:
        return f"  {self.system}: at run [{self.after}] {self.detail(runs)}"

    def detail(self, runs: list[Results]) -> str:
        """`<date>: +2.00% (p=...), commits A -> B; environment changed: ...`."""
        old, new = (runs[i].attrs.get("git_commit", "?") for i in (self.before, self.after))
        when = runs[self.after].attrs.get("created_utc", "?")
        env = "; ".join(self.environment) or "none"
        return (f"{when}: {self.size:+.2%} (p={self.pvalue:.2g}), commits {old} -> {new}; "
                f"environment changed: {env}")


def detect(values: Sequence[float]) -> list[tuple[int, float, float]]:
    """(index of the first value of the new level, relative size, p-value) per change point."""
    if len(values) < MIN_RUNS:
        return []
    from otava.analysis import compute_change_points

    series = [float(v) for v in values]
    points, _ = compute_change_points(series, window_len=WINDOW, max_pvalue=MAX_PVALUE)
    found = []
    edges = [0, *sorted(int(p.index) for p in points), len(series)]
    for n, point in enumerate(sorted(points, key=lambda p: int(p.index)), start=1):
        before = series[edges[n - 1]:edges[n]]
        after = series[edges[n]:edges[n + 1]]
        mean_before, mean_after = sum(before) / len(before), sum(after) / len(after)
        size = mean_after / mean_before - 1 if mean_before else float("nan")
        found.append((int(point.index), size, float(point.stats.pvalue)))
    return found


def series_steps(runs: list[Results], key: str, label: str,
                 series: list[tuple[int, float]]) -> list[Step]:
    """The change points of one series of (run index, value) of case `key`."""
    indices = [i for i, _ in series]
    steps = []
    for at, size, pvalue in detect([v for _, v in series]):
        before, after = indices[at - 1], indices[at]
        changed = fingerprint_diff(runs[before], runs[after], skip=("git_commit",))
        steps.append(Step(key, label, before, after, size, pvalue, tuple(changed)))
    return steps


def case_steps(runs: list[Results], table: dict[str, list[tuple[int, float]]]) -> list[Step]:
    """Every change point of every case and system of a history (history.case_history)."""
    from scripts.results.history import by_system

    return [step for key, points in table.items()
            for label, series in by_system(runs, key, points).items()
            for step in series_steps(runs, key, label, series)]


def print_steps(runs: list[Results], steps: list[Step], metric: str) -> None:
    """Per case, its change points, then a count."""
    last = None
    for step in steps:
        if step.case != last:
            print(f"\n{step.case} ({metric})")
            last = step.case
        print(step.text(runs))
    print(f"\n{len(steps)} change point(s) in {len({s.case for s in steps})} case(s) over "
          f"{len(runs)} run(s)")


def main(argv: list[str] | None = None) -> int:
    from scripts.results.history import add_selection_args, history_of

    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_selection_args(parser)
    args = parser.parse_args(argv)
    found = history_of(args)
    if isinstance(found, int):
        return found
    runs, table = found
    print_steps(runs, case_steps(runs, table), args.metric)
    return 0


if __name__ == "__main__":
    sys.exit(main())
