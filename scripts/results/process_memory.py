"""Peak memory of a process tree, sampled from /proc while it runs (Linux).

Two figures, because they differ where it matters: SMPI's shared malloc (modeled compute's
placeholder tensors) maps one block of memory over and over, and the kernel's resident set
(RSS, what `ru_maxrss` and `ps` report) counts a shared page once per mapping, so it reads
gigabytes that were never allocated. The proportional set size (PSS) counts each physical page
once, split among the processes that map it: the memory the run really takes.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

PROC = Path("/proc")


def parent(pid: int) -> int:
    """pid's parent now; -1 once it is gone. The command name in /proc/PID/stat may hold
    spaces and parentheses: the fields after its last ')' are fixed."""
    try:
        return int((PROC / str(pid) / "stat").read_text().rpartition(")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        return -1


def _children(pid: int) -> list[int]:
    """pid's children now; none once it is gone. Every read is guarded: a process of the tree
    can end between any two of them (a shell's `$(...)` lives for a millisecond)."""
    out: list[int] = []
    try:
        tasks = os.listdir(PROC / str(pid) / "task")
    except OSError:
        return out
    for task in tasks:
        try:
            out += [int(c) for c in (PROC / str(pid) / "task" / task / "children").read_text().split()]
        except (OSError, ValueError):
            pass
    return out


def tree(pid: int) -> list[tuple[int, int]]:
    """(process, its parent) for pid and its descendants alive now (pid's own parent as -1)."""
    seen: dict[int, int] = {}  # process -> parent, in the order found
    todo = [(pid, -1)]
    while todo:
        p, up = todo.pop()
        if p not in seen:
            seen[p] = up
            todo += [(c, p) for c in _children(p)]
    return list(seen.items())


def rollup(pid: int, expected_parent: int = -1) -> tuple[int, int]:
    """(rss, pss) of one process in bytes; (0, 0) once it is gone or unreadable, or when its
    parent is no longer `expected_parent` (given): a descendant that ended between the listing
    and the reading can have its number taken by an unrelated process, which must not count
    (a machine that runs many processes, a CI job's, wraps around the 32768 numbers)."""
    rss = pss = 0
    try:
        for line in (PROC / str(pid) / "smaps_rollup").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("Rss", "Pss"):
                kib = int(rest.split()[0]) * 1024
                rss, pss = (kib, pss) if key == "Rss" else (rss, kib)
    except (OSError, ValueError, IndexError):
        pass
    if expected_parent >= 0 and parent(pid) != expected_parent:
        return 0, 0  # taken over before or while it was read
    return rss, pss


class PeakMemory:
    """Samples the tree under `pid` on a thread until the `with` block ends: the peaks of the
    summed RSS and PSS (bytes), the number of samples taken and of samples that failed (the
    thread goes on after one). Without /proc (not Linux) all stay 0. The first samples come
    0.05 s apart, the gap doubling up to `period`, so a run of a second is sampled as well as a
    long one. The kernel walks every mapping to answer, which for a simulation of a thousand
    ranks (tens of thousands of mappings) takes a while: the sampler then waits 20 times its
    last sample, so it never takes more than about 5% of a core from the run."""

    FIRST_GAP_S = 0.05

    def __init__(self, pid: int, period: float = 0.5):
        self.pid, self.period = pid, period
        self.peak_rss = self.peak_pss = 0
        self.samples = self.errors = 0
        self.last_error = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "PeakMemory":
        if os.path.isdir(PROC):
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def sample(self) -> None:
        rss = pss = 0
        for p, up in tree(self.pid):
            r, s = rollup(p, up)
            rss, pss = rss + r, pss + s
        self.peak_rss, self.peak_pss = max(self.peak_rss, rss), max(self.peak_pss, pss)

    def _run(self) -> None:
        gap = self.FIRST_GAP_S
        while not self._stop.is_set():
            start = time.monotonic()
            try:
                self.sample()
                self.samples += 1
            except Exception as err:  # noqa: BLE001 - one bad sample must not end the sampling
                self.errors += 1
                self.last_error = repr(err)
            self._stop.wait(max(gap, 20 * (time.monotonic() - start)))
            gap = min(2 * gap, self.period)
