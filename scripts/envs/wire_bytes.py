"""Bytes on the wire per case, counted by the MPI library itself, beside the payload the suite
handed over and the formula (docs/RESULTS_SCHEMA.md, "Bytes on the wire").

    suite wire-bytes results/<stamp>/sp_tp.h5 [--cases REGEX] [--iters 2,6] [--mpirun mpirun]

Each case of the file runs again on its own (`--benchmark_filter`), twice, with Open MPI's pml
monitoring on (scripts/envs/wire_monitoring.py) and a different number of timed iterations. The
difference of the two runs cancels everything that does not repeat with the iterations (set-up,
the harness's own start and end), and per rank

    wire bytes per step = (W_b - W_a) / (P_b - P_a) x payload per step

where W counts what the library sent to every peer (collectives' internal messages included)
and P the payload the suite handed its transports over the whole case
(`payload_bytes_sent_case`), so the library's algorithm shows: a recursive-halving all-reduce
sends another pattern than a ring, and a latency-bound one (recursive doubling for small
messages) sends more than 2 (t-1)/t n. What remains in W beyond the case's own traffic is the
harness's per-iteration bookkeeping (an 8-byte all-reduce of the step time, a barrier): a few
dozen bytes per step, visible only for the smallest messages.

The timed runs of the file are untouched: monitoring is on only in these extra runs; each case
records what it costs (`wire_monitoring_time_ratio`: the monitored run's median step over the
file's). Only Open MPI has these counters: elsewhere each case gets `wire_note` and no figure.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from scripts.results.suite_results import add_case_figures, read_results
from scripts.envs.wire_monitoring import is_open_mpi, monitoring_env, read_run

# Flags of the original command line that these runs set themselves.
DROPPED = ("--out", "--iters", "--warmup", "--check", "--save-tensors", "--benchmark_filter",
           "--benchmark_repetitions", "--benchmark_format", "--benchmark_out", "--benchmark_out_format")
FLAGS_WITHOUT_VALUE = ("--save-tensors",)


def rerun_args(command_line: str) -> tuple[str, list[str]]:
    """The binary and its flags, without those this script sets per run."""
    argv = shlex.split(command_line)
    out, i = [], 1
    while i < len(argv):
        a = argv[i]
        name = a.split("=", 1)[0]
        if name in DROPPED:
            takes_value = "=" not in a and name not in FLAGS_WITHOUT_VALUE and not name.startswith("--benchmark_")
            i += 2 if takes_value else 1
            continue
        out.append(a)
        i += 1
    return argv[0], out


def run_case(mpirun: str, ranks: int, binary: str, args: list[str], bench: str, case: str,
             iters: int, workdir: Path) -> tuple[np.ndarray, np.ndarray, float]:
    """One monitored run of one case: (wire bytes [from, to], whole-case payload per rank,
    median step time)."""
    prefix = workdir / f"prof_{iters}"
    out = workdir / f"run_{iters}.h5"
    env = dict(os.environ, **monitoring_env(prefix))
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = [mpirun, "-np", str(ranks), "--oversubscribe", binary, *args,
           f"--benchmark_filter=^{re.escape(bench)}/{re.escape(case)}/", "--iters", str(iters),
           "--warmup", "0", "--check", "0", "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    wire = read_run(prefix, ranks)
    res = read_results(out)
    (c,) = [c for c in res.cases_of(bench) if c.name == case]
    payload = np.asarray(c.datasets["case_payload_bytes_sent"], np.int64).ravel()
    return wire, payload, float(c.attrs["time_median_s"])


def measure(path: Path, cases: str, iters: tuple[int, int], mpirun: str) -> int:
    res = read_results(path)
    bench, ranks = str(res.attrs["bench"]), int(res.attrs["world_size"])
    binary, args = rerun_args(str(res.attrs["command_line"]))
    selected = [c for c in res.cases_of(bench) if re.search(cases, c.name)]
    if not is_open_mpi(mpirun):
        for c in selected:
            add_case_figures(path, bench, c.name, {"wire_note": f"{mpirun} is not Open MPI: no library byte counters"}, {})
        print(f"wire_bytes: {mpirun} is not Open MPI; noted in {len(selected)} cases", file=sys.stderr)
        return 0
    a, b = iters
    for c in selected:
        with tempfile.TemporaryDirectory() as tmp:
            wire_a, pay_a, _ = run_case(mpirun, ranks, binary, args, bench, c.name, a, Path(tmp))
            wire_b, pay_b, t_b = run_case(mpirun, ranks, binary, args, bench, c.name, b, Path(tmp))
        step_payload = np.asarray(c.datasets["bytes_sent"], np.int64).ravel().astype(float)
        d_payload = (pay_b - pay_a).astype(float)
        d_wire = (wire_b - wire_a).astype(float)
        with np.errstate(divide="ignore", invalid="ignore"):
            scale = np.where(d_payload > 0, step_payload / d_payload, 0.0)
            ratio = np.where(d_payload > 0, d_wire.sum(axis=1) / d_payload, np.nan)
        to_peer = d_wire * scale[:, None]
        sent = to_peer.sum(axis=1)
        attrs = {
            "wire_bytes_sent_per_rank": float(sent.max()),
            "wire_over_payload": float(np.nanmax(ratio)) if np.isfinite(ratio).any() else float("nan"),
            "wire_method": f"Open MPI pml monitoring, runs of {a} and {b} iterations differenced",
            "wire_monitoring_time_ratio": t_b / float(c.attrs["time_median_s"]),
        }
        add_case_figures(path, bench, c.name, attrs, {"wire_bytes_sent": sent, "wire_bytes_to_peer": to_peer})
        print(f"{c.name}: payload {step_payload.max():.0f} B/step, wire {sent.max():.0f} B/step "
              f"(x{attrs['wire_over_payload']:.3f}), monitored run x{attrs['wire_monitoring_time_ratio']:.2f} time")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", type=Path, help="a complete results file of an MPI benchmark")
    p.add_argument("--cases", default="", help="regular expression on case names (default: all)")
    p.add_argument("--iters", default="2,6", help="the two timed-iteration counts (default 2,6)")
    p.add_argument("--mpirun", default="mpirun")
    a = p.parse_args(argv)
    try:
        lo, hi = (int(x) for x in a.iters.split(","))
    except ValueError:
        p.error("--iters takes two counts, e.g. 2,6")
    if not 0 < lo < hi:
        p.error("--iters: two counts 0 < a < b")
    if not a.results.exists():
        p.error(f"{a.results} does not exist")
    try:
        return measure(a.results, a.cases, (lo, hi), a.mpirun)
    except (RuntimeError, FileNotFoundError, KeyError) as e:
        print(f"error: wire_bytes: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
