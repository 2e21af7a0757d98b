"""A tool run as a child the way the network-namespace tests need it: its output captured, a
time limit that kills it (and reaps it) before re-raising, and its wall time and pid kept, so a
test can look for what the child left behind (namespaces, agent folders) after it ended."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path


def run_timed(cmd: list[str], env: dict, timeout: float, cwd: Path | None = None,
              interrupt_after: float | None = None) -> subprocess.CompletedProcess:
    """Runs cmd; the result also has `elapsed` (s) and `pid`. interrupt_after: SIGINT after that
    many seconds."""
    start = time.monotonic()
    popen = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=env, cwd=cwd)
    try:
        if interrupt_after is not None:
            time.sleep(interrupt_after)
            popen.send_signal(signal.SIGINT)
        out, err = popen.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        popen.kill()
        popen.communicate()
        raise
    proc = subprocess.CompletedProcess(cmd, popen.returncode, out, err)
    proc.elapsed = time.monotonic() - start  # type: ignore[attr-defined]
    proc.pid = popen.pid  # type: ignore[attr-defined]
    return proc
