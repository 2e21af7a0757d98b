#!/usr/bin/env python3
"""Regression compare of two results files, case by case (median step time and checks).

Exit status: 1 if any case is slower than the threshold or a result check newly fails,
0 otherwise, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from suite_results import (Case, cli_warnings, config_differences, match_cases,  # noqa: E402
                           read_results, warn)

CHECK_NAMES = {1: "pass", 0: "FAIL", -1: "off", None: "-"}


@dataclass
class Row:
    """The verdict for one case present in both files."""

    key: str
    base_s: float | None
    cand_s: float | None
    ratio: float | None
    status: str
    check: str
    failed_check: bool

    @property
    def regression(self) -> bool:
        return self.status == "REGRESSION"


def compare_case(base: Case, cand: Case, threshold: float) -> Row:
    """Ratio candidate/baseline of the median step time and the check transition."""
    b, c = base.median_s, cand.median_s
    if b is None or c is None:
        ratio, status = None, "no time"
    elif b <= 0:
        ratio, status = None, "bad baseline"
    else:
        ratio = c / b
        status = ("REGRESSION" if ratio > 1 + threshold
                  else "improvement" if ratio < 1 - threshold else "ok")
    bc, cc = base.check_passed, cand.check_passed
    failed = cc == 0 and bc != 0
    check = CHECK_NAMES.get(bc, str(bc)) + " -> " + CHECK_NAMES.get(cc, str(cc))
    if failed:
        check += "  CHECK FAILED"
    elif cc == 0:
        check += "  (still failing)"
    return Row(base.key, b, c, ratio, status, check, failed)


def _fmt_time(value: float | None) -> str:
    return "-" if value is None else f"{value:.3e}"


def print_table(rows: list[Row]) -> None:
    """Fixed-width table of all rows."""
    header = ("case", "baseline_s", "candidate_s", "ratio", "status", "check")
    cells = [(r.key, _fmt_time(r.base_s), _fmt_time(r.cand_s),
              "-" if r.ratio is None else f"{r.ratio:.3f}", r.status, r.check) for r in rows]
    widths = [max(len(h), *(len(row[i]) for row in cells)) if cells else len(h)
              for i, h in enumerate(header)]
    for line in [header, tuple("-" * w for w in widths), *cells]:
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip())


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Compare the median step time (time_median_s) of every case present in "
                    "both files and the result checks. Exit 1 on a regression or a newly "
                    "failed check, else 0.")
    parser.add_argument("baseline", type=Path, help="reference results file (.h5)")
    parser.add_argument("candidate", type=Path, help="results file under test (.h5)")
    parser.add_argument("--threshold", type=float, default=0.05,
                        help="relative tolerance: candidate/baseline above 1+THRESHOLD is a "
                             "REGRESSION, below 1-THRESHOLD an improvement (default 0.05)")
    args = parser.parse_args(argv)
    if not 0 <= args.threshold < 1:
        parser.error("--threshold must be in [0, 1)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cli_warnings()
    for path in (args.baseline, args.candidate):
        if not path.exists():
            print(f"error: {path} does not exist", file=sys.stderr)
            return 2
    base = read_results(args.baseline, load_datasets=False)
    cand = read_results(args.candidate, load_datasets=False)
    for diff in config_differences(base, cand):
        warn(f"the runs differ in {diff}; times may not be comparable")

    pairs, only_base, only_cand = match_cases(base, cand)
    rows = [compare_case(b, c, args.threshold) for b, c in pairs]
    print(f"baseline:  {args.baseline} ({base.attrs.get('git_commit', '?')}, "
          f"{base.attrs.get('created_utc', '?')})")
    print(f"candidate: {args.candidate} ({cand.attrs.get('git_commit', '?')}, "
          f"{cand.attrs.get('created_utc', '?')})")
    print(f"threshold: {args.threshold:.1%}\n")
    print_table(rows)

    new_failures = [k for k in only_cand if cand.cases[k].check_passed == 0]
    for key in only_base:
        print(f"only in baseline:  {key}")
    for key in only_cand:
        note = "  CHECK FAILED" if key in new_failures else ""
        print(f"only in candidate: {key}{note}")

    regressions = sum(r.regression for r in rows)
    failures = sum(r.failed_check for r in rows) + len(new_failures)
    improvements = sum(r.status == "improvement" for r in rows)
    print(f"\n{len(rows)} compared, {regressions} regression(s), {improvements} improvement(s), "
          f"{failures} check failure(s), {len(only_base)} only in baseline, "
          f"{len(only_cand)} only in candidate")
    return 1 if regressions or failures else 0


if __name__ == "__main__":
    sys.exit(main())
