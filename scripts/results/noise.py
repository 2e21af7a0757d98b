"""Each case's regression threshold from its machine's own history: the spread of runs whose
code did not change (an A/A series: runs of one git_commit, or the runs between two change
points of the case, change_points.py) sets how far a run may stray before it is a regression.

The spread is robust: every A/A run's median step time relative to its series' median, and
of those deviations 1.4826 x their median absolute value (MAD, a normal sigma's estimate that
one outlier run does not move). The threshold is K_SIGMA times it, at least FLOOR. A case with
fewer than MIN_SAMPLES such runs says so and keeps the fixed rule (run_verdict.Rule).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterable, Sequence

import numpy as np

from scripts.results.baselines import system_key
from scripts.results.suite_results import Results, file_stem, params_differences

K_SIGMA = 4.0  # a normal series passes 4 sigma once in 30,000 verdicts
FLOOR = 0.02  # no tracker here claims steps below 2%
MIN_SAMPLES = 6  # A/A runs in series of two or more
MAD_TO_SIGMA = 1.4826
EPOCH = datetime.min.replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class CaseThreshold:
    """The threshold a case was judged with, and where it came from."""

    threshold: float
    measured: bool
    samples: int  # A/A runs behind it
    sigma: float | None = None

    def text(self) -> str:
        if self.measured:
            return (f"past x{1 + self.threshold:.3g} ({K_SIGMA:g} x the spread of "
                    f"{self.samples} A/A runs, {self.sigma:.2%})")
        return (f"past x{1 + self.threshold:.3g} (fixed rule: {self.samples} A/A run(s) in "
                f"its history, {MIN_SAMPLES} needed)")

    def record(self) -> dict:
        return {"threshold": self.threshold, "measured": self.measured,
                "aa_runs": self.samples, "sigma": self.sigma}


def deviations(series: Iterable[Sequence[float]]) -> np.ndarray:
    """Every value of every A/A series (two values or more) relative to its series' median."""
    found = []
    for values in series:
        arr = np.asarray([v for v in values if v and v > 0], dtype=float)
        if arr.size >= 2:
            found.extend(arr / np.median(arr) - 1)
    return np.asarray(found)


def case_threshold(series: Iterable[Sequence[float]], fallback: float) -> CaseThreshold:
    """The threshold from A/A series of one case, or `fallback` with too few runs."""
    devs = deviations(series)
    if devs.size < MIN_SAMPLES:
        return CaseThreshold(fallback, False, int(devs.size))
    sigma = MAD_TO_SIGMA * float(np.median(np.abs(devs - np.median(devs))))
    return CaseThreshold(max(FLOOR, K_SIGMA * sigma), True, int(devs.size), sigma)


def by_commit(points: Sequence[tuple[str, float]]) -> list[list[float]]:
    """A case's (git_commit, value) points as one series per commit."""
    groups: dict[str, list[float]] = {}
    for commit, value in points:
        groups.setdefault(commit, []).append(value)
    return list(groups.values())


def between(values: Sequence[float], cuts: Sequence[int]) -> list[list[float]]:
    """The values split at the change points `cuts` (index of each step's first run)."""
    edges = [0, *sorted(cuts), len(values)]
    return [list(values[a:b]) for a, b in zip(edges, edges[1:]) if b > a]


def same_series(cand: Results, history: Iterable[Results]) -> list[Results]:
    """The complete runs of `history` that the candidate's file repeats (same system, bench
    and file name), created before it, oldest first."""
    system, stem = system_key(cand), file_stem(cand.path)
    found = [r for r in history if r.complete and r.path != cand.path
             and r.bench == cand.bench and file_stem(r.path) == stem and system_key(r) == system
             and (cand.created is None or r.created is None or r.created < cand.created)]
    return sorted(found, key=lambda r: (r.created or EPOCH, str(r.path)))


def history_thresholds(cand: Results, history: Iterable[Results],
                       fallback: float) -> dict[str, CaseThreshold]:
    """{case key: its threshold}: from the case's runs on one commit when there are enough,
    else from its runs between change points, else `fallback`."""
    from scripts.results.change_points import detect

    runs = same_series(cand, history)
    out = {}
    for key, case in cand.cases.items():
        points = [(str(r.attrs.get("git_commit")), r.cases[key].median_s) for r in runs
                  if key in r.cases and r.cases[key].median_s
                  and not params_differences(r.cases[key], case)]
        found = case_threshold(by_commit(points), fallback)
        if not found.measured and points:
            values = [v for _, v in points]
            cuts = [at for at, _, _ in detect(values)]
            found = case_threshold(between(values, cuts), fallback)
        out[key] = found
    return out
