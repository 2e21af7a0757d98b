"""A case's op timeline (docs/BENCHMARKS.md, section pipeline): the `timeline` dataset's rows
(one op each: rank, kind, micro-batch, chunk, stage, start and end in seconds from the step's
first op) read as records, for the Gantt chart (plot_pipeline.py) and the Chrome trace export
(chrome_trace.py)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from scripts.results.suite_results import Case

DEFAULT_KINDS = ["F", "B", "W", "BW"]


class Span(NamedTuple):
    rank: int
    kind: str
    microbatch: int
    chunk: int
    stage: int
    start_s: float
    end_s: float


def spans(case: Case) -> list[Span]:
    """The case's ops in the order written; empty when the case has no timeline."""
    rows = case.datasets.get("timeline")
    if rows is None:
        return []
    rows = np.asarray(rows, dtype=float).reshape(-1, 7)
    kinds = [k.decode() if isinstance(k, bytes) else str(k) for k in case.datasets.get("op_kinds", DEFAULT_KINDS)]
    return [Span(int(r[0]), kinds[int(r[1])], int(r[2]), int(r[3]), int(r[4]), float(r[5]), float(r[6]))
            for r in rows]


def idle_gaps(ops: list[Span]) -> dict[int, list[tuple[float, float]]]:
    """Per rank, the intervals between 0 and the step's end where it ran no op: the bubble."""
    if not ops:
        return {}
    step = max(s.end_s for s in ops)
    gaps: dict[int, list[tuple[float, float]]] = {}
    for rank in sorted({s.rank for s in ops}):
        t = 0.0
        for s in sorted((s for s in ops if s.rank == rank), key=lambda s: s.start_s):
            if s.start_s > t:
                gaps.setdefault(rank, []).append((t, s.start_s))
            t = max(t, s.end_s)
        if step > t:
            gaps.setdefault(rank, []).append((t, step))
    return gaps
