"""How small a slowdown the verdict finds in this machine's real CPU runs, and how often it
flags one that is not there: per benchmark, RUNS runs as they are (an A/A series) and RUNS runs
per injected slowdown (SUITE_TEST_SLOWDOWN, common/harness/injected_slowdown.hpp: each timed
step stretched to (1 + slowdown) x its time by a busy wait), NP ranks with a core each, the
levels interleaved run by run so that the machine's load falls on all of them alike.

    suite sensitivity --cpu [--runs 20] [--slowdowns 0.01,0.02,0.05,0.1,0.2] [--bench NAME,...]

Every case-verdict is the one run-verdict makes (compare.compare_case: slower than the baseline
by more than the case's threshold and by more than NOISE_K x its per-iteration noise), with the
case's threshold from the A/A runs (noise.case_threshold):
- an A/A run, leave-one-out: the threshold from the other A/A runs, against each of those as
  the baseline (`make baseline` may have filed any of them); a regression is a false alarm;
- a slowed run: the threshold from every A/A run, against each of them as the baseline; a
  regression is a detection.
Per benchmark: the false-alarm rate and the smallest slowdown found in at least DETECTED of its
case-verdicts (none while more than MAX_FALSE_ALARMS of the A/A ones flag), beside the case's
threshold and per-iteration noise that decide it. The machine's load is not excused here
(run-verdict would not judge a run that shared its cores, compare.busy_note): it is part of the
noise measured. Needs the CPU build's executables (build/bin). docs/REGRESSIONS.md holds its
table.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import NamedTuple, Sequence

from scripts import ROOT
from scripts.results.compare import case_noise, compare_case
from scripts.results.host_load import busy_cpu_seconds, children_cpu_seconds, other_cores
from scripts.results.noise import MIN_SAMPLES, case_threshold
from scripts.results.run_verdict import NOISE_K, THRESHOLD
from scripts.results.suite_results import Case, read_results

DETECTED = 0.95  # a slowdown counts as found when this share of its case-verdicts flags it
MAX_FALSE_ALARMS = 0.01  # ... and only while at most this share of the A/A ones flags
RANKS = 2


class CpuBench(NamedTuple):
    name: str
    flags: tuple[str, ...]


# One small case per benchmark, about a second a run on a 2-core VM (mpirun's start included),
# results checked once per run.
BENCHES = (
    CpuBench("sp_tp", ("--mode", "collectives", "--sizes", "1M", "--ops", "allreduce",
                       "--activation-case", "0", "--iters", "400", "--warmup", "20")),
    CpuBench("ring_attention", ("--block", "256", "--layout", "zigzag", "--causal", "1",
                                "--pass", "fwd", "--iters", "60", "--warmup", "3")),
    CpuBench("ulysses", ("--seq", "1K", "--ulysses-degree", str(RANKS), "--causal", "1",
                         "--pass", "fwd", "--iters", "30", "--warmup", "2")),
    CpuBench("moe", ("--tokens", "256", "--hidden", "128", "--ffn-hidden", "256", "--experts",
                     "8", "--top-k", "2", "--pass", "fwd", "--iters", "100", "--warmup", "5")),
    CpuBench("mesh", ("--cp", str(RANKS), "--seq", "256", "--hidden", "256", "--heads", "4",
                      "--pass", "fwd", "--iters", "30", "--warmup", "2")),
    CpuBench("pipeline", ("--pp", str(RANKS), "--schedule", "1f1b", "--iters", "30",
                          "--warmup", "2")),
)


@dataclass
class Tally:
    """Case-verdicts made and how many of them flagged a regression."""

    verdicts: int = 0
    flagged: int = 0

    def add(self, flagged: bool) -> None:
        self.verdicts += 1
        self.flagged += flagged

    @property
    def rate(self) -> float:
        return self.flagged / self.verdicts if self.verdicts else 0.0


def aa_threshold(aa_history: Sequence[Case]) -> float:
    """The case's threshold from its A/A history (noise.py; the fixed rule with too few runs)."""
    return case_threshold([[c.median_s for c in aa_history]], THRESHOLD).threshold


def regressed(base: Case, cand: Case, aa_history: Sequence[Case]) -> bool:
    """run-verdict's verdict on one case: the threshold from the A/A history, then compare.py's
    rule against the baseline (slower past the threshold and past NOISE_K x the noise)."""
    return compare_case(base, cand, aa_threshold(aa_history), NOISE_K).regression


def aa_tally(aa: Sequence[Case], tally: Tally) -> None:
    """Each A/A run judged against each other one as the baseline, with the threshold from
    the A/A runs but itself (leave-one-out); every flag is a false alarm."""
    for i, cand in enumerate(aa):
        others = [*aa[:i], *aa[i + 1:]]
        for base in others:
            tally.add(regressed(base, cand, others))


def slowed_tally(aa: Sequence[Case], slowed: Sequence[Case], tally: Tally) -> None:
    """Each slowed run judged against each A/A run as the baseline, with the threshold from
    all of them; every flag is a detection."""
    for cand in slowed:
        for base in aa:
            tally.add(regressed(base, cand, aa))


@dataclass
class BenchOutcome:
    """One benchmark's case-verdicts: the A/A ones and those of each slowdown."""

    cases: int = 0
    false_alarms: Tally = field(default_factory=Tally)
    detections: dict[float, Tally] = field(default_factory=dict)
    thresholds: list[float] = field(default_factory=list)  # each case's, from all A/A runs
    noises: list[float] = field(default_factory=list)  # each A/A run's p10..p90 half-width

    def smallest_detected(self) -> float | None:
        """The smallest slowdown found, None when none is or the A/A runs flag too often."""
        if self.false_alarms.rate > MAX_FALSE_ALARMS:
            return None
        found = [s for s, t in sorted(self.detections.items()) if t.rate >= DETECTED]
        return found[0] if found else None


def tally_runs(runs: dict[float, list[dict[str, Case]]]) -> BenchOutcome:
    """The counts over every case of the runs {slowdown (0: A/A): [{case key: case}, ...]}; a
    case missing from a run is left out of that run."""
    aa_runs = runs[0.0]
    keys = sorted({k for run in aa_runs for k in run})
    outcome = BenchOutcome(cases=len(keys))
    for key in keys:
        aa = [run[key] for run in aa_runs if key in run and run[key].median_s]
        aa_tally(aa, outcome.false_alarms)
        outcome.thresholds.append(aa_threshold(aa))
        outcome.noises.extend(n for n in map(case_noise, aa) if n is not None)
        for slowdown, slowed_runs in runs.items():
            if slowdown > 0:
                slowed = [run[key] for run in slowed_runs if key in run and run[key].median_s]
                slowed_tally(aa, slowed, outcome.detections.setdefault(slowdown, Tally()))
    return outcome


@dataclass
class Load:
    """The machine's load over the runs: 1-minute load averages and the cores other processes
    took (host_load.py's measure), one per run."""

    averages: list[float] = field(default_factory=list)
    other: list[float] = field(default_factory=list)

    def text(self) -> str:
        if not self.averages:
            return "no runs"
        mean = sum(self.averages) / len(self.averages)
        busy = (f", other processes {sum(self.other) / len(self.other):.1f} cores"
                if self.other else "")
        return f"load average {mean:.1f} ({min(self.averages):.1f}..{max(self.averages):.1f}){busy}"


def run_once(bench: CpuBench, slowdown: float, out: Path, build: Path,
             load: Load) -> dict[str, Case]:
    """One run of the benchmark with the slowdown injected; its cases."""
    mpirun = shutil.which("mpirun") or "mpirun"
    cmd = [mpirun, "-np", str(RANKS), "--oversubscribe", str(build / "bin" / bench.name),
           "--backend", "cpu", "--out", str(out), *bench.flags]
    env = {**os.environ, "SUITE_TEST_SLOWDOWN": f"{slowdown:g}"}
    busy0, own0, t0 = busy_cpu_seconds(), children_cpu_seconds(), time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    busy1, own1, wall = busy_cpu_seconds(), children_cpu_seconds(), time.monotonic() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
    load.averages.append(os.getloadavg()[0])
    if busy0 is not None and busy1 is not None and wall > 0:
        load.other.append(other_cores(busy1 - busy0, own1 - own0, wall))
    return dict(read_results(out, load_datasets=False, warn=False).cases)


def measure(bench: CpuBench, runs: int, slowdowns: list[float], build: Path,
            tmp: Path, load: Load) -> dict[float, list[dict[str, Case]]]:
    """`runs` rounds of one run per level (A/A first), printing each round."""
    found: dict[float, list[dict[str, Case]]] = {s: [] for s in [0.0, *slowdowns]}
    for round_ in range(runs):
        t0 = time.monotonic()
        for slowdown in found:
            out = tmp / f"{bench.name}_{slowdown:g}_{round_:03d}.h5"
            found[slowdown].append(run_once(bench, slowdown, out, build, load))
            out.unlink()
        print(f"  {bench.name}: round {round_ + 1}/{runs} ({len(found)} runs, "
              f"{time.monotonic() - t0:.1f} s, load average {os.getloadavg()[0]:.1f})",
              file=sys.stderr, flush=True)
    return found


def aa_medians_text(aa_runs: list[dict[str, Case]]) -> str:
    """Each case's A/A median step times in run order, in ms: the run-to-run spread."""
    keys = sorted({k for run in aa_runs for k in run})
    return "; ".join(k.split("/")[-1] + ": " + " ".join(
        f"{run[k].median_s * 1e3:.3g}" for run in aa_runs if k in run and run[k].median_s)
        for k in keys)


def table_row(name: str, outcome: BenchOutcome, slowdowns: list[float]) -> str:
    fa = outcome.false_alarms
    cells = [f"{outcome.detections[s].rate:.0%}" for s in slowdowns]
    smallest = outcome.smallest_detected()
    found = (f"{smallest:.0%}" if smallest is not None
             else "none (false alarms)" if fa.rate > MAX_FALSE_ALARMS else "none")
    threshold = "/".join(f"{t:.1%}" for t in outcome.thresholds)
    noise = f"{median(outcome.noises):.1%}" if outcome.noises else "-"
    return (f"| {name} | {outcome.cases} | {threshold} | {noise} | {fa.flagged}/{fa.verdicts} "
            f"({fa.rate:.2%}) | " + " | ".join(cells) + f" | {found} |")


def table_header(slowdowns: list[float]) -> str:
    levels = " | ".join(f"found at +{s:.0%}" for s in slowdowns)
    return (f"| benchmark | cases | threshold (A/A) | p10..p90 noise (median) | false alarms "
            f"(A/A case-verdicts) | {levels} | smallest found in >= {DETECTED:.0%}, false alarms "
            f"<= {MAX_FALSE_ALARMS:.0%} |\n|---|---|---|---|---|" + "---|" * len(slowdowns)
            + "---|")


def parse_args(argv: list[str] | None) -> argparse.Namespace | None:
    parser = argparse.ArgumentParser(prog="suite sensitivity --cpu", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20,
                        help="A/A runs, and runs per slowdown (default 20)")
    parser.add_argument("--slowdowns", default="0.01,0.02,0.05,0.1,0.2",
                        help="injected slowdowns (default %(default)s)")
    parser.add_argument("--bench", default=",".join(b.name for b in BENCHES),
                        help="benchmarks measured (default all: %(default)s)")
    parser.add_argument("--build", type=Path, default=ROOT / "build",
                        help="the CPU build (default build)")
    args = parser.parse_args(argv)
    try:
        args.slowdowns = sorted(float(s) for s in args.slowdowns.split(","))
    except ValueError:
        print(f"error: --slowdowns {args.slowdowns}: comma-separated numbers", file=sys.stderr)
        return None
    known = {b.name: b for b in BENCHES}
    names = args.bench.split(",")
    if args.runs <= MIN_SAMPLES or min(args.slowdowns) <= 0 or not set(names) <= set(known):
        print(f"error: --runs {args.runs} (more than {MIN_SAMPLES}: the leave-one-out threshold "
              f"needs {MIN_SAMPLES} A/A runs), --slowdowns {','.join(map(str, args.slowdowns))} "
              f"(all positive), --bench {args.bench} (of {', '.join(known)})", file=sys.stderr)
        return None
    args.benches = [known[n] for n in names]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args is None:
        return 2
    started = time.monotonic()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for bench in args.benches:
            load = Load()
            runs = measure(bench, args.runs, args.slowdowns, args.build, Path(tmp), load)
            rows.append((table_row(bench.name, tally_runs(runs), args.slowdowns), load.text()))
            print(f"  {bench.name}: {load.text()}; A/A medians {aa_medians_text(runs[0.0])}",
                  file=sys.stderr, flush=True)
    print(table_header(args.slowdowns))
    for row, _ in rows:
        print(row)
    print(f"\n{args.runs} A/A runs and {args.runs} per slowdown, {RANKS} ranks, "
          f"{time.monotonic() - started:.0f} s in all; per benchmark: "
          + "; ".join(f"{b.name} {text}" for b, (_, text) in zip(args.benches, rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
