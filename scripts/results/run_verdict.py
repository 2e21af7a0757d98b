"""The verdict of a whole run: every results file of a run's folder compared with the baseline
of its system (baselines.py, compare.py), what `make run` ends with.

    suite run-verdict results/<stamp>/ [--registry DIR] [--strict]

Each results file (`*.h5`, in sub-folders too, whatever benchmarks wrote them) gets its report
`<name>.compare.txt` and its verdict `<name>.compare.json` beside it, where history.py and the
run's page (report_page.py) read them; then one line per file: `no regression`, `N
regression(s)` with the worst case and its ratio, `not judged` when other processes took part
of the machine while a slower case ran, or `no baseline` and the command that files one. The
cases a baseline lacks are listed on the line, not judged.

The rule is compare.py's (a case is a regression when its median step time is more than a
threshold slower than the baseline's and beyond --noise-k x its own spread), with thresholds
measured for a run's kind of machine (docs/BENCHMARKS.md, "The verdict of make run"): a run
with a core per rank is judged past 1.5x (--threshold 0.5: kernel_bench, one process, moved by
at most 1.11x per case between two quiet runs of a 2-core VM); a run with more ranks than
cores (the file's `oversubscribed` = 1, `make run`'s 4 ranks on 2 cores) past 3.5x
(--oversubscribed-threshold 2.5: two such runs of a quiet 2-core VM differed by up to 3.4x per
case, whole files by 1.9x).
A candidate measured while other processes took more than a tenth of the cores is not judged.

Exit status: 0; with --strict 1 when a file regressed or a check newly failed; 2 on a usage
error.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from scripts.results.baselines import DEFAULT_REGISTRY, find_baseline, system_key
from scripts.results.compare import (compare_runs, print_comparison, verdict_header,
                                     verdict_record, warn_config, write_verdict)
from scripts.results.fingerprint import fingerprint_diff
from scripts.results.index import read_indexed, shared_index
from scripts.results.noise import K_SIGMA, history_thresholds
from scripts.results.plausibility import Finding, check_limits
from scripts.results.suite_results import Results, cli_warnings, file_stem, find_result_files

THRESHOLD = 0.5
OVERSUBSCRIBED_THRESHOLD = 2.5
NOISE_K = 2.0
# How many names of new cases a verdict line shows before `and N more`.
LISTED_CASES = 3
BASELINE_COMMAND = "make baseline"


def verdict_paths(path: Path) -> tuple[Path, Path]:
    """`<name>.compare.txt` and `<name>.compare.json` beside the results file."""
    stem = file_stem(path)
    return path.with_name(stem + ".compare.txt"), path.with_name(stem + ".compare.json")


@dataclass(frozen=True)
class Rule:
    """The thresholds of a verdict: `threshold` for a run with a core per rank,
    `oversubscribed` for one with more ranks than cores, and the noise factor."""

    threshold: float = THRESHOLD
    oversubscribed: float = OVERSUBSCRIBED_THRESHOLD
    noise_k: float = NOISE_K


def oversubscribed(*runs: Results) -> bool:
    """True when one of the runs had more ranks than cores on a host."""
    return any(r.attrs.get("oversubscribed") == 1 for r in runs)


def judge(path: Path, registry: Path, rule: Rule = Rule(),
          history: list[Results] = ()) -> tuple[dict, str]:
    """The verdict record of one results file against its baseline (compare.verdict_record,
    or `no-baseline`) and compare.py's report, as text. Each case's threshold comes from the
    runs of `history` that repeat this file (noise.py), else from `rule`."""
    cand = read_indexed(path, warn=False)
    choice = find_baseline(cand, registry)
    shared = oversubscribed(cand, *([choice.results] if choice else []))
    threshold = rule.oversubscribed if shared else rule.threshold
    header = {**verdict_header(path, cand, threshold, rule.noise_k), "oversubscribed": shared}
    findings = check_limits(cand)
    limits = "".join(f"INVALID: {f.text()}\n" for f in findings)
    if choice is None:
        report = (f"no baseline in {registry} for system {system_key(cand)} "
                  f"(bench {cand.bench}): `{BASELINE_COMMAND}` files this run as one\n")
        record = {**header, "verdict": "no-baseline", "baseline": None}
        return mark_invalid(record, findings), limits + report
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print(f"registry:  {registry} -> system {system_key(cand)}")
        warn_config(choice.results, cand)
        own = history_thresholds(cand, history, threshold)
        cmp = compare_runs(choice.results, cand, threshold, rule.noise_k,
                           case_thresholds={k: t.threshold for k, t in own.items()})
        print_comparison(cmp, threshold, rule.noise_k)
        for key, found in own.items():
            print(f"threshold of {key}: {found.text()}")
        changed = fingerprint_diff(choice.results, cand)
        for change in changed:
            print(f"environment changed since the baseline: {change}")
    record = {**verdict_record(header, cmp), "fingerprint_changed": changed}
    for case in record["cases"]:
        if case["case"] in own:
            case["threshold"] = own[case["case"]].record()
    return mark_invalid(record, findings), limits + out.getvalue()


def mark_invalid(record: dict, findings: list[Finding]) -> dict:
    """The record with the figures past their physical limits (plausibility.py): `invalid`
    lists them, their cases' status is `INVALID` (neither a regression nor an improvement), and
    the verdict is `invalid` unless another case regressed."""
    if not findings:
        return record
    bad = {f.case for f in findings}
    record["invalid"] = [f.record() for f in findings]
    for case in record.get("cases", []):
        if case["case"] in bad:
            case["status"] = "INVALID"
    record["regressions"] = [k for k in record.get("regressions", []) if k not in bad]
    still_flagged = record["regressions"] or record.get("check_failures")
    if record["verdict"] == "ok" or (record["verdict"] == "regression" and not still_flagged):
        record["verdict"] = "invalid"
    return record


def _names(keys: list[str]) -> str:
    shown = ", ".join(keys[:LISTED_CASES])
    return shown + (f" and {len(keys) - LISTED_CASES} more" if len(keys) > LISTED_CASES else "")


def summary_line(record: dict) -> str:
    """One line for a verdict record: `no regression`, `N regression(s) (worst ...)`, `not
    judged: ...` or `no baseline ...`, then the cases the baseline lacks."""
    invalid = record.get("invalid", [])
    parts = []
    if invalid:
        first = invalid[0]
        parts.append(f"{len(invalid)} invalid figure{'s' if len(invalid) > 1 else ''} "
                     f"({first['case']} {first['figure']} {first['value']:.4g} past the limit "
                     f"{first['limit']:.4g}: {first['source']})")
    if record.get("baseline") is None:
        return "; ".join(parts + [f"no baseline (`{BASELINE_COMMAND}` files this run as one)"])
    cases = record.get("cases", [])
    regressed = [c for c in cases if c["status"] == "REGRESSION"]
    if regressed:
        worst = max(regressed, key=lambda c: c["ratio"])
        parts.append(f"{len(regressed)} regression{'s' if len(regressed) > 1 else ''} "
                     f"(worst {worst['case']} x{worst['ratio']:.2f})")
    if record.get("check_failures"):
        parts.append(f"{len(record['check_failures'])} check(s) newly failing")
    busy = [c for c in cases if c["status"] == "slower (busy)"]
    if busy and not parts:
        parts.append(f"not judged: {len(busy)} case(s) slower, but {record['busy']}")
    if len(parts) == len(invalid[:1]):
        parts.append(f"no regression ({len(cases)} case{'s' if len(cases) != 1 else ''})")
    if cases:
        parts.append(threshold_note(record))
    new = record.get("only_in_candidate", []) + [c["case"] for c in record.get(
        "not_comparable", [])]
    if new:
        parts.append(f"{len(new)} case{'s' if len(new) > 1 else ''} not in the baseline "
                     f"(listed, not judged): {_names(new)}")
    if record.get("fingerprint_changed"):
        parts.append(f"differs from the baseline in {', '.join(record['fingerprint_changed'])}")
    return "; ".join(parts)


def threshold_note(record: dict) -> str:
    """`judged past ...`: the thresholds the cases were judged with, measured from the
    machine's A/A runs (noise.py) or the fixed rule, and why."""
    fixed = f"x{1 + record['threshold']:g}"
    why = "more ranks than cores, " if record.get("oversubscribed") else ""
    found = [c["threshold"] for c in record["cases"] if c.get("threshold", {}).get("measured")]
    if not found:
        return f"judged past {fixed} (fixed rule: {why}too little A/A history)"
    low, high = (f"x{1 + f(t['threshold'] for t in found):.3g}" for f in (min, max))
    measured = low if low == high else f"{low}..{high}"
    rest = len(record["cases"]) - len(found)
    return (f"judged past {measured} (measured: {K_SIGMA:g} x the spread of this machine's A/A "
            f"runs)" + (f", {rest} case(s) past {fixed} (fixed rule: {why}too little A/A "
                        f"history)" if rest else ""))


def flagged(record: dict) -> bool:
    """A regression, a newly failing check or a figure past its physical limit."""
    return record.get("verdict") in ("regression", "invalid") or bool(record.get("invalid"))


def result_files(folder: Path) -> list[Path]:
    """The complete results files under `folder` (a killed run's .partial files are left
    out)."""
    return [p for p in find_result_files([folder]) if p.suffix == ".h5"]


def history_beside(folder: Path, registry: Path) -> list[Results]:
    """The runs of the results tree that holds the run's folder (its parent: `results/`), but
    for the registry's and this run's own files, through the results index; files it cannot
    read are left to history's warnings."""
    root = folder.resolve().parent
    if (root / ".git").exists() or root == root.parent:  # a checkout or /, no results tree
        return []
    skip = [Path(os.path.abspath(p)) for p in (folder, registry)]
    paths = [p for p in result_files(root)
             if not any(s == Path(os.path.abspath(p)) or s in Path(os.path.abspath(p)).parents
                        for s in skip)]
    return [r for _, r in shared_index().read_many(paths, warn=False) if isinstance(r, Results)]


def judge_folder(folder: Path, registry: Path, rule: Rule = Rule()) -> list[tuple[Path, dict]]:
    """Judges every results file of the folder and writes its report and verdict beside it."""
    verdicts = []
    history = history_beside(folder, registry)
    for path in result_files(folder):
        try:
            record, report = judge(path, registry, rule, history)
        except OSError as err:
            record = {"candidate": str(path), "verdict": "unreadable", "error": str(err)}
            report = f"not readable: {err}\n"
        txt, js = verdict_paths(path)
        txt.write_text(report)
        write_verdict(js, record)
        verdicts.append((path, record))
    return verdicts


def print_verdicts(folder: Path, verdicts: list[tuple[Path, dict]], registry: Path) -> None:
    """The lines `make run` ends with: one per results file, the regressed ones first."""
    shown = os.path.relpath(registry)
    print(f"== verdict against the baselines of this machine "
          f"({registry if shown.startswith('..') else shown}) ==")
    width = max(len(str(p.relative_to(folder))) for p, _ in verdicts)
    for path, record in sorted(verdicts, key=lambda v: not flagged(v[1])):
        line = (summary_line(record) if record.get("verdict") != "unreadable"
                else f"not readable: {record['error']}")
        print(f"  {str(path.relative_to(folder)):<{width}}  {line}")
    print(f"(each file's report: <file>.compare.txt beside it; the whole run: "
          f"{folder / 'index.html'})")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, help="a run's folder, e.g. results/<stamp>")
    parser.add_argument("--registry", type=Path, default=DEFAULT_REGISTRY,
                        help="baseline registry (default results/baselines)")
    parser.add_argument("--threshold", type=float, default=THRESHOLD,
                        help=f"a case more than this much slower, relative, is a regression "
                             f"(and beyond the noise) in a run with a core per rank "
                             f"(default {THRESHOLD})")
    parser.add_argument("--oversubscribed-threshold", type=float,
                        default=OVERSUBSCRIBED_THRESHOLD,
                        help=f"the same for a run with more ranks than cores (default "
                             f"{OVERSUBSCRIBED_THRESHOLD})")
    parser.add_argument("--noise-k", type=float, default=NOISE_K,
                        help=f"... and slower by more than NOISE_K x the relative half-width "
                             f"of its p10..p90 band (default {NOISE_K})")
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 when a file regressed or a check newly failed")
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        parser.error(f"{args.folder} is not a folder")
    if min(args.threshold, args.oversubscribed_threshold, args.noise_k) < 0:
        parser.error("--threshold, --oversubscribed-threshold and --noise-k must be >= 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cli_warnings()
    rule = Rule(args.threshold, args.oversubscribed_threshold, args.noise_k)
    verdicts = judge_folder(args.folder, args.registry, rule)
    if not verdicts:
        print(f"error: no results file (*.h5) under {args.folder}", file=sys.stderr)
        return 2
    print_verdicts(args.folder, verdicts, args.registry)
    return 1 if args.strict and any(flagged(r) for _, r in verdicts) else 0


if __name__ == "__main__":
    sys.exit(main())
