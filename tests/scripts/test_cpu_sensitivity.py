"""The counting of `suite sensitivity --cpu` (scripts/results/cpu_sensitivity.py) on hand-made
series whose verdicts are counted by hand, its bad input, and SUITE_TEST_SLOWDOWN stretching a
real run's recorded steps."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from scripts.results import cpu_sensitivity, sensitivity
from scripts.results.cpu_sensitivity import Tally, aa_tally, slowed_tally, tally_runs
from scripts.results.suite_results import Case, read_results

BIN = Path(os.environ.get("SUITE_BIN_DIR", Path(__file__).resolve().parents[2] / "build" / "bin"))


def case(median: float, half_band: float = 0.0) -> Case:
    """A case with this median step time and a p10..p90 band of +-half_band, relative."""
    return Case("b", "c", {}, {"time_median_s": median, "time_p10_s": median * (1 - half_band),
                               "time_p90_s": median * (1 + half_band)})


# Nine A/A runs: three each at 0.99, 1.00 and 1.01. Leave any one out and the other eight have
# median 1.00 and a median absolute deviation of 0.01: threshold 4 x 1.4826 x 1% = 5.93%, as
# with all nine. No two A/A runs differ by more than 1.01/0.99 = 1.0202.
SPREAD = [0.99, 1.00, 1.01] * 3


def test_aa_series_within_its_spread_gives_no_false_alarm():
    tally = Tally()
    aa_tally([case(m) for m in SPREAD], tally)
    assert (tally.verdicts, tally.flagged) == (9 * 8, 0)


def test_slowed_series_is_found_against_the_baselines_it_exceeds():
    aa = [case(m) for m in SPREAD]
    five, ten = Tally(), Tally()
    # 1.05 passes 5.93% only against the three baselines at 0.99 (1.0606); 1.10 against all.
    slowed_tally(aa, [case(1.05)] * 9, five)
    slowed_tally(aa, [case(1.10)] * 9, ten)
    assert (five.verdicts, five.flagged) == (81, 27)
    assert (ten.verdicts, ten.flagged) == (81, 81)


def test_one_outlier_run_is_flagged_against_every_other():
    # Seven runs at 1.00 but one at 1.10. Left out, the outlier faces six equal runs (spread
    # 0: threshold the 2% floor) and is slower than each: 6 false alarms. Each 1.00 run faces
    # five 1.00 (ratio 1) and the outlier (0.91, faster): none. 7 x 6 verdicts.
    tally = Tally()
    aa_tally([case(1.0)] * 6 + [case(1.10)], tally)
    assert (tally.verdicts, tally.flagged) == (42, 6)


def test_per_iteration_noise_keeps_a_slowdown_inside_it_unflagged():
    # The 2% floor is passed by 1.05, but a +-3% band x NOISE_K 2 is a 6% margin.
    quiet, noisy = Tally(), Tally()
    slowed_tally([case(1.0)] * 7, [case(1.05)] * 7, quiet)
    slowed_tally([case(1.0, 0.03)] * 7, [case(1.05, 0.03)] * 7, noisy)
    assert (quiet.flagged, noisy.flagged) == (49, 0)


def test_runs_pool_their_cases_and_name_the_smallest_slowdown_found():
    runs = {0.0: [{"b/c": case(m), "b/d": case(m)} for m in SPREAD],
            0.05: [{"b/c": case(1.05), "b/d": case(1.05)}] * 9,
            0.1: [{"b/c": case(1.10), "b/d": case(1.10)}] * 9}
    outcome = tally_runs(runs)
    assert outcome.cases == 2
    assert (outcome.false_alarms.verdicts, outcome.false_alarms.flagged) == (144, 0)
    assert (outcome.detections[0.05].flagged, outcome.detections[0.1].flagged) == (54, 162)
    assert outcome.smallest_detected() == 0.1
    row = cpu_sensitivity.table_row("b", outcome, [0.05, 0.1])
    assert row == "| b | 2 | 5.9%/5.9% | 0.0% | 0/144 (0.00%) | 33% | 100% | 10% |"


def test_no_slowdown_counts_as_found_while_the_aa_runs_flag_too_often():
    # The outlier series above: 6 of 42 A/A verdicts flag (14%, past 1%). Its threshold from
    # all seven runs is the 2% floor (six equal runs: no spread), so 1.50 is flagged against
    # every baseline, yet it is not reported as found.
    runs = {0.0: [{"b/c": case(1.0)}] * 6 + [{"b/c": case(1.10)}],
            0.5: [{"b/c": case(1.50)}] * 7}
    outcome = tally_runs(runs)
    assert (outcome.false_alarms.flagged, outcome.detections[0.5].flagged) == (6, 49)
    assert outcome.smallest_detected() is None
    row = cpu_sensitivity.table_row("b", outcome, [0.5])
    assert row == "| b | 1 | 2.0% | 0.0% | 6/42 (14.29%) | 100% | none (false alarms) |"


@pytest.mark.parametrize("argv", [["--runs", "6"], ["--slowdowns", "0,0.1"],
                                  ["--slowdowns", "fast"], ["--bench", "sp_tp,nope"]])
def test_bad_input_is_one_line_and_exit_2(argv, capsys):
    assert sensitivity.main(["--cpu", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --")


@pytest.mark.skipif(not (BIN / "sp_tp").exists() or not shutil.which("mpirun"),
                    reason="needs the CPU build's sp_tp and mpirun")
def test_injected_slowdown_stretches_the_recorded_steps(tmp_path):
    # One sp_tp case run as is and with SUITE_TEST_SLOWDOWN=0.5, in turn, twice each. Other
    # processes on the cores stretch a run's median many times over, but only ever add time:
    # the fastest of a run's steps is the one they disturbed least, and the slowed runs'
    # fastest is 1.5 x a step's own time.
    bench = cpu_sensitivity.CpuBench("sp_tp", ("--mode", "collectives", "--sizes", "1M",
                                               "--ops", "allreduce", "--activation-case", "0",
                                               "--iters", "200", "--warmup", "10"))
    build, load = BIN.parent, cpu_sensitivity.Load()
    fastest = {0.0: [], 0.5: []}
    for turn in range(2):
        for slowdown, found in fastest.items():
            out = tmp_path / f"{slowdown}_{turn}.h5"
            assert len(cpu_sensitivity.run_once(bench, slowdown, out, build, load)) == 1
            (only,) = read_results(out, warn=False).cases.values()
            found.append(float(only.step_times().min()))
    ratio = min(fastest[0.5]) / min(fastest[0.0])
    assert 1.25 < ratio < 3.0, fastest
