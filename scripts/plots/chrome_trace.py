"""Export a results file's timelines as Chrome trace-event JSON, which Perfetto
(ui.perfetto.dev) and chrome://tracing open: one process per case, one thread per rank, one
complete event ("ph": "X") per op, in microseconds from the step's first op. Cases without a
`timeline` dataset (benchmarks that record phase durations but not their start times) are
listed on stderr and left out.

    python -m scripts trace results/pipeline_X.h5 -o pipeline.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from scripts.plots.timeline import spans
from scripts.results.suite_results import read_results


def trace_events(path: Path) -> tuple[list[dict], list[str]]:
    """The events of every case with a timeline, and the keys of the cases without one."""
    events: list[dict] = []
    skipped: list[str] = []
    for pid, case in enumerate(read_results(path).cases.values()):
        ops = spans(case)
        if not ops:
            skipped.append(case.key)
            continue
        events.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": case.key}})
        for rank in sorted({s.rank for s in ops}):
            events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": rank,
                           "args": {"name": f"rank {rank}"}})
        for s in ops:
            events.append({"name": f"{s.kind} mb{s.microbatch}" + (f" c{s.chunk}" if s.chunk else ""),
                           "cat": s.kind, "ph": "X", "pid": pid, "tid": s.rank,
                           "ts": s.start_s * 1e6, "dur": (s.end_s - s.start_s) * 1e6,
                           "args": {"microbatch": s.microbatch, "chunk": s.chunk, "stage": s.stage}})
    return events, skipped


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", type=Path, help="a results file (HDF5)")
    p.add_argument("-o", "--out", type=Path, help="the JSON file (default: the results file's name, .json)")
    args = p.parse_args(argv)
    events, skipped = trace_events(args.results)
    for key in skipped:
        print(f"{key}: no timeline (no start times recorded); left out", file=sys.stderr)
    if not events:
        print(f"error: {args.results} holds no case with a timeline", file=sys.stderr)
        return 2
    out = args.out or args.results.with_suffix(".json")
    out.write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}))
    print(f"wrote {out} ({sum(e['ph'] == 'X' for e in events)} ops); open it in ui.perfetto.dev")
    return 0


if __name__ == "__main__":
    sys.exit(main())
