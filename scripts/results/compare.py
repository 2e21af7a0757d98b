"""Regression compare of a run against a baseline, case by case (median step time and checks).

    compare.py BASELINE.h5 CANDIDATE.h5      against the file given
    compare.py CANDIDATE.h5                  against the matching baseline of the registry
                                             (results/baselines, see baselines.py)

A case is a REGRESSION only when its median step time is slower than the baseline's by more
than the threshold AND by more than the noise: the half-width of the p10..p90 band of the
per-iteration step times, relative to the median, the larger of the two runs' (times --noise-k).
A slowdown past the threshold but inside the noise is reported as `slower (noise)`. A slowdown
of a candidate that shared its machine with other work (more than a tenth of the cores went to
other processes while it ran: the file attributes `host_other_cores` and `host_cores` that
host_load.py records) is reported as `slower (busy)`, not judged: other processes, not the code,
may have taken the time (a compiler beside a 4-rank run on 2 cores made cases 2 to 13 times
slower). A busy baseline is only noted: its times are slower if anything.

Software the times depend on but that is not part of the system (MPI, NCCL, CUDA, cuDNN, the
GEMM/BLAS library, and the library a case records itself) is printed, baseline beside
candidate, with every verdict; a library that changed between the two runs is named next to
each regression, so an upgrade that slows a case is caught and named.

Cases are paired by name, and compared only when their parameters agree as well: a name need
not encode every parameter (ring_attention's omits the `--cp` group size n_c, sp_tp's
collectives omit the `--tp` size t), so a same-named case with other parameters is listed as
not comparable, with the parameters that differ, and gets no ratio or verdict
(--ignore-param lets a named parameter differ). Two runs of different benchmarks are refused.

Exit status: 1 if any case regressed or a result check newly fails, 0 otherwise (also when no
baseline matches, unless --require-baseline), 2 on a usage error (also: the two files hold
different benchmarks).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scripts.results.baselines import DEFAULT_REGISTRY, find_baseline, legacy_cpu_device, system_key
from scripts.results.suite_results import (NOT_RECORDED, Case, CaseMatch, Results, busy,
                                           case_software, cli_warnings, config_differences, load_text,
                                           match_cases, read_results, software_changes, software_versions, warn)

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
    noise: float | None = None  # relative half-width of the p10..p90 band, larger run
    software: list[str] | None = None  # `label: old -> new` of the libraries this case recorded

    @property
    def regression(self) -> bool:
        return self.status == "REGRESSION"


def case_noise(case: Case) -> float | None:
    """Half-width of the p10..p90 band of the per-iteration step times, relative to the median
    (from `time_s` when loaded, else the p10/p90 attributes the writer computed from it)."""
    if "time_s" in case.datasets:
        steps = case.step_times()
        p10, p90, median = (float(np.percentile(steps, q)) for q in (10, 90, 50))
    else:
        p10, p90 = case.attrs.get("time_p10_s"), case.attrs.get("time_p90_s")
        median = case.median_s
    if p10 is None or p90 is None or not median or median <= 0:
        return None
    return max(0.0, float(p90) - float(p10)) / (2 * float(median))


def busy_note(cand: Results) -> str | None:
    """Why the candidate's slowdowns are not judged (other processes took part of its
    machine), or None. A busy baseline does not excuse them: its times were slower, if
    anything, so a slowdown against it is real."""
    return f"other processes took {load_text(cand)} during this run" if busy(cand) else None


def compare_case(base: Case, cand: Case, threshold: float, noise_k: float = 1.0,
                 shared_machine: bool = False) -> Row:
    """Ratio candidate/baseline of the median step time, the noise, and the check transition;
    with `shared_machine` (either run was busy) a slowdown is `slower (busy)`."""
    b, c = base.median_s, cand.median_s
    noises = [n for n in (case_noise(base), case_noise(cand)) if n is not None]
    noise = max(noises) if noises else None
    margin = noise_k * (noise or 0.0)
    if b is None or c is None:
        ratio, status = None, "no time"
    elif b <= 0:
        ratio, status = None, "bad baseline"
    else:
        ratio = c / b
        if ratio > 1 + threshold:
            status = ("slower (noise)" if ratio - 1 <= margin
                      else "slower (busy)" if shared_machine else "REGRESSION")
        elif ratio < 1 - threshold:
            status = "improvement" if 1 - ratio > margin else "faster (noise)"
        else:
            status = "ok"
    bc, cc = base.check_passed, cand.check_passed
    failed = cc == 0 and bc != 0
    check = CHECK_NAMES.get(bc, str(bc)) + " -> " + CHECK_NAMES.get(cc, str(cc))
    if failed:
        check += "  CHECK FAILED"
    elif cc == 0:
        check += "  (still failing)"
    software = software_changes(case_software(base), case_software(cand))
    return Row(base.key, b, c, ratio, status, check, failed, noise, software)


def _fmt_time(value: float | None) -> str:
    return "-" if value is None else f"{value:.3e}"


def _labels(changes: list[str]) -> list[str]:
    return [change.split(":")[0] for change in changes]


def software_cell(row: Row, run_changes: list[str]) -> str:
    """The libraries that changed between the runs for this case (the run's and the case's
    own), or `same`."""
    names = list(dict.fromkeys(_labels(run_changes) + _labels(row.software or [])))
    return "changed: " + ", ".join(names) if names else "same"


def print_software(base: Results, cand: Results) -> list[str]:
    """The software of both runs, one library a line, CHANGED where they differ; returns the
    changes (`label: old -> new`)."""
    before, after = software_versions(base), software_versions(cand)
    changes = software_changes(before, after)
    changed = set(_labels(changes))
    print("software (not part of the system; baseline -> candidate):")
    width = max(len(label) for label in before)
    for label, old in before.items():
        new = after.get(label, NOT_RECORDED)
        text = old if old == new else f"{old} -> {new}"
        mark = "  CHANGED" if label in changed else ""
        print(f"  {label:<{width}}  {text}{mark}")
    return changes


def print_table(rows: list[Row], run_changes: list[str] | None = None) -> None:
    """Fixed-width table of all rows, the software each verdict was reached with last."""
    header = ("case", "baseline_s", "candidate_s", "ratio", "noise", "status", "check",
              "software")
    cells = [(r.key, _fmt_time(r.base_s), _fmt_time(r.cand_s),
              "-" if r.ratio is None else f"{r.ratio:.3f}",
              "-" if r.noise is None else f"+-{r.noise:.1%}", r.status, r.check,
              software_cell(r, run_changes or [])) for r in rows]
    widths = [max(len(h), *(len(row[i]) for row in cells)) if cells else len(h)
              for i, h in enumerate(header)]
    for line in [header, tuple("-" * w for w in widths), *cells]:
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip())


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Compare the median step time (time_median_s) of every case present in "
                    "both runs and the result checks, against a given baseline or the "
                    "registry's matching one. Exit 1 on a regression or a newly failed "
                    "check, else 0.")
    parser.add_argument("files", nargs="+", type=Path, metavar="[BASELINE] CANDIDATE",
                        help="baseline and candidate results files (.h5), or the candidate "
                             "alone to pick its baseline from --registry")
    parser.add_argument("--registry", type=Path, default=DEFAULT_REGISTRY,
                        help="baseline registry searched when no baseline is given "
                             "(default results/baselines)")
    parser.add_argument("--threshold", type=float, default=0.05,
                        help="relative tolerance: candidate/baseline above 1+THRESHOLD (and "
                             "beyond the noise) is a REGRESSION, below 1-THRESHOLD an "
                             "improvement (default 0.05)")
    parser.add_argument("--noise-k", type=float, default=1.0,
                        help="a change must also exceed NOISE_K x the noise (relative "
                             "half-width of the p10..p90 band of the per-iteration step "
                             "times, the larger of the two runs'); default 1")
    parser.add_argument("--verdict", type=Path, default=None, metavar="OUT.json",
                        help="also write the verdict as JSON (history.py marks flagged runs "
                             "from it when it lies beside the run as <run>.compare.json)")
    parser.add_argument("--require-baseline", action="store_true",
                        help="exit 2 when the registry holds no baseline for this system")
    parser.add_argument("--ignore-param", action="append", default=[], metavar="NAME",
                        help="compare same-named cases even when this parameter differs or "
                             "one file lacks it (e.g. a baseline written before the parameter "
                             "was recorded); repeatable. Without it such cases are listed as "
                             "not comparable")
    args = parser.parse_args(argv)
    if len(args.files) > 2:
        parser.error("give at most two files: [BASELINE] CANDIDATE")
    if not 0 <= args.threshold < 1:
        parser.error("--threshold must be in [0, 1)")
    if args.noise_k < 0:
        parser.error("--noise-k must be >= 0")
    return args


def write_verdict(path: Path | None, verdict: dict) -> None:
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(verdict, indent=1) + "\n")


@dataclass
class Comparison:
    """What comparing one candidate with one baseline found."""

    base: Results
    cand: Results
    rows: list[Row]
    match: CaseMatch
    new_failures: list[str]  # cases without a comparable baseline case that fail their check
    run_changes: list[str]  # `label: old -> new` of the run's software
    busy: str | None  # busy_note: why slowdowns are not judged, None on a quiet machine

    @property
    def regressions(self) -> list[str]:
        return [r.key for r in self.rows if r.regression]

    @property
    def failures(self) -> list[str]:
        return [r.key for r in self.rows if r.failed_check] + self.new_failures

    @property
    def flagged(self) -> bool:
        return bool(self.regressions or self.failures)

    def changed_software(self) -> list[str]:
        """The libraries that changed, the run's and the cases' own, each named once."""
        return list(dict.fromkeys(_labels(self.run_changes)
                                  + [n for r in self.rows for n in _labels(r.software or [])]))


def compare_runs(base: Results, cand: Results, threshold: float, noise_k: float = 1.0,
                 ignore: tuple[str, ...] = (),
                 case_thresholds: dict[str, float] | None = None) -> Comparison:
    """Every comparable case judged (see compare_case) past `threshold`, or its own entry
    of `case_thresholds`; the cases that are not, listed."""
    match = match_cases(base, cand, ignore)
    note = busy_note(cand)
    own = case_thresholds or {}
    rows = [compare_case(b, c, own.get(c.key, threshold), noise_k, note is not None)
            for b, c in match.pairs]
    # A candidate case with no comparable baseline case (new, or other parameters) that fails
    # its check is a new failure.
    unmatched = match.only_cand + [c.key for _, c, _ in match.differing]
    new_failures = [k for k in unmatched if cand.cases[k].check_passed == 0]
    changes = software_changes(software_versions(base), software_versions(cand))
    return Comparison(base, cand, rows, match, new_failures, changes, note)


def print_comparison(cmp: Comparison, threshold: float, noise_k: float) -> None:
    """The report: both runs, the software, the table, the unmatched cases, the counts and
    the verdict line."""
    base, cand, rows, match = cmp.base, cmp.cand, cmp.rows, cmp.match
    print(f"baseline:  {base.path} ({base.attrs.get('git_commit', '?')}, "
          f"{base.attrs.get('created_utc', '?')})")
    print(f"candidate: {cand.path} ({cand.attrs.get('git_commit', '?')}, "
          f"{cand.attrs.get('created_utc', '?')})")
    print(f"threshold: {threshold:.1%}, and beyond {noise_k:g} x noise")
    if cmp.busy:
        print(f"machine:   {cmp.busy}: a slowdown there is `slower (busy)`, not judged")
    if busy(base):
        print(f"machine:   other processes took {load_text(base)} while the baseline ran: "
              "its times may be slower than its machine's, and the regressions fewer")
    print_software(base, cand)
    print()
    if rows:
        print_table(rows, cmp.run_changes)
    slower = [r for r in rows if r.status.startswith("slower") or r.regression]
    if slower and cmp.run_changes:
        print(f"\n{len(slower)} slower case(s) ({sum(r.regression for r in slower)} "
              f"regression(s)) ran with other software than the baseline:")
        for change in cmp.run_changes:
            print(f"  {change}")
    for r in slower:
        if r.software:
            print(f"{r.status}: {r.key} x{r.ratio:.3f}, its own library changed: "
                  f"{'; '.join(r.software)}")
    for key in match.only_base:
        print(f"only in baseline:  {key}")
    for key in match.only_cand:
        note = "  CHECK FAILED" if key in cmp.new_failures else ""
        print(f"only in candidate: {key}{note}")
    for _, c, diffs in match.differing:
        note = "  CHECK FAILED" if c.key in cmp.new_failures else ""
        print(f"not comparable:    {c.key} (parameters differ, baseline != candidate: "
              f"{'; '.join(diffs)}){note}")
    if not rows:
        warn("no case of the two runs could be compared")
    improvements = sum(r.status == "improvement" for r in rows)
    noisy = sum(r.status.endswith("(noise)") for r in rows)
    busy_count = sum(r.status == "slower (busy)" for r in rows)
    print(f"\n{len(rows)} compared, {len(cmp.regressions)} regression(s), {improvements} "
          f"improvement(s), {len(cmp.failures)} check failure(s), {noisy} within noise, "
          + (f"{busy_count} slower on a busy machine, " if busy_count else "")
          + f"{len(match.only_base)} only in baseline, {len(match.only_cand)} only in "
          f"candidate, {len(match.differing)} not comparable")
    changed = cmp.changed_software()
    print(f"verdict: {'regression' if cmp.flagged else 'ok'}"
          + (f" (software changed: {', '.join(changed)})" if changed else ""))


def verdict_header(cand_path: Path, cand: Results, threshold: float, noise_k: float,
                   ignore: tuple[str, ...] = ()) -> dict:
    """The verdict file's fields that do not depend on a baseline."""
    header: dict = {"candidate": str(cand_path), "system": system_key(cand),
                    "bench": cand.attrs.get("bench"), "threshold": threshold,
                    "noise_k": noise_k, "created_utc": cand.attrs.get("created_utc"),
                    "git_commit": cand.attrs.get("git_commit")}
    if ignore:
        header["ignored_params"] = list(ignore)
    return header


def verdict_record(header: dict, cmp: Comparison) -> dict:
    """The verdict as JSON (history.py reads `verdict`, `regressions`, `check_failures`)."""
    match = cmp.match
    return {
        **header, "verdict": "regression" if cmp.flagged else "ok",
        "baseline": str(cmp.base.path), "busy": cmp.busy,
        "regressions": cmp.regressions, "check_failures": cmp.failures,
        "only_in_baseline": match.only_base, "only_in_candidate": match.only_cand,
        "not_comparable": [{"case": c.key, "differences": diffs}
                           for _, c, diffs in match.differing],
        "software": {"baseline": software_versions(cmp.base),
                     "candidate": software_versions(cmp.cand), "changed": cmp.run_changes},
        "cases": [{"case": r.key, "baseline_s": r.base_s, "candidate_s": r.cand_s,
                   "ratio": r.ratio, "noise": r.noise, "status": r.status,
                   "software_changed": cmp.run_changes + (r.software or [])}
                  for r in cmp.rows]}


def refuse_pair(base_path: Path, base: Results, cand_path: Path, cand: Results) -> str | None:
    """Why two files cannot be compared at all (other benchmarks, a simulation against a
    measurement), or None."""
    if base.bench != cand.bench:
        return (f"{base_path} holds bench {base.bench or '?'} and {cand_path} bench "
                f"{cand.bench or '?'}: runs of different benchmarks have no case in common")
    if bool(base.attrs.get("simulated")) != bool(cand.attrs.get("simulated")):
        sim, real = ((base_path, cand_path) if base.attrs.get("simulated")
                     else (cand_path, base_path))
        return (f"{sim} is a simulated run (SimGrid SMPI) and {real} a measured one: "
                "a simulation is never compared with a measurement")
    return None


def warn_config(base: Results, cand: Results) -> None:
    """Warnings for what makes the two runs' times doubtful to compare."""
    for diff in config_differences(base, cand):
        warn(f"the runs differ in {diff}; times may not be comparable")
    for which, res in (("baseline", base), ("candidate", cand)):
        if legacy_cpu_device(res):
            warn(f"{which} {res.path}: device_names is `cpu` (written before the CPU model "
                 "was recorded): which CPU it ran on is unknown, so its system matches any "
                 "CPU machine's (baselines.py rekey files it under the right CPU)")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cli_warnings()
    for path in args.files:
        if not path.exists():
            print(f"error: {path} does not exist", file=sys.stderr)
            return 2
    cand_path = args.files[-1]
    cand = read_results(cand_path, load_datasets=False)
    ignore = tuple(args.ignore_param)
    header = verdict_header(cand_path, cand, args.threshold, args.noise_k, ignore)
    if len(args.files) == 2:
        base_path = args.files[0]
        base = read_results(base_path, load_datasets=False)
        refusal = refuse_pair(base_path, base, cand_path, cand)
        if refusal:
            print(f"error: {refusal}", file=sys.stderr)
            return 2
    else:
        choice = find_baseline(cand, args.registry, ignore)
        if choice is None:
            print(f"no baseline in {args.registry} for system {system_key(cand)} "
                  f"(bench {cand.attrs.get('bench')}): nothing to compare")
            print("software: " + "; ".join(f"{k} {v}" for k, v in software_versions(cand).items()))
            write_verdict(args.verdict, {**header, "verdict": "no-baseline", "baseline": None})
            return 2 if args.require_baseline else 0
        base = choice.results
        print(f"registry:  {args.registry} -> system {system_key(cand)}")
    warn_config(base, cand)
    cmp = compare_runs(base, cand, args.threshold, args.noise_k, ignore)
    print_comparison(cmp, args.threshold, args.noise_k)
    write_verdict(args.verdict, verdict_record(header, cmp))
    return 1 if cmp.flagged else 0


if __name__ == "__main__":
    sys.exit(main())
