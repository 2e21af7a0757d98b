"""host_load.py: the cores other processes took while a benchmark ran, written into its file."""

from __future__ import annotations

import os
import sys
import time
import types

from scripts.results import host_load
from scripts.results.suite_results import read_results
from synthetic_results import run_script, sp_tp_cases, write_results


def test_busy_time_is_read_from_proc_stat(tmp_path, monkeypatch):
    stat = tmp_path / "stat"
    # user nice system idle iowait irq softirq steal: 150 + 10 + 50 + 5 + 5 + 0 = 220 ticks busy
    stat.write_text("cpu  150 10 50 9000 70 5 5 0 0 0\ncpu0 75 5 25 4500 35 2 3 0 0 0\n")
    monkeypatch.setattr(host_load, "PROC_STAT", stat)
    assert host_load.busy_cpu_seconds() == 220 / os.sysconf("SC_CLK_TCK")
    monkeypatch.setattr(host_load, "PROC_STAT", tmp_path / "absent")
    assert host_load.busy_cpu_seconds() is None


def test_other_cores_is_busy_time_less_the_commands_over_wall_time():
    # 10 CPU seconds busy over 5 s, 6 of them the command's: 4 s of others, 0.8 of a core
    assert host_load.other_cores(busy=10.0, own=6.0, wall=5.0) == 0.8
    assert host_load.other_cores(busy=5.9, own=6.0, wall=5.0) == 0.0  # ticks apart, not < 0


def test_a_command_is_run_and_its_file_gets_the_load(tmp_path):
    out = write_results(tmp_path / "run.h5", "sp_tp", sp_tp_cases()[:1])
    # the command's exit status is host_load's, the attributes are written (their value against
    # a known load: the next test; here other processes' load is whatever this host runs)
    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass"
    proc = run_script("host_load.py", "--out", out, "--", sys.executable, "-c",
                      spin + "\nraise SystemExit(3)")
    assert proc.returncode == 3, proc.stderr  # the command's exit status
    attrs = read_results(out, load_datasets=False, warn=False).attrs
    assert attrs["host_cores"] == os.cpu_count()
    assert 0 <= attrs["host_other_cores"] <= os.cpu_count()


def test_the_commands_own_cpu_is_not_other_processes_load(tmp_path, monkeypatch):
    """The machine's busy time is a /proc/stat that the command itself writes as it ends: busy
    by exactly its own CPU time (what it spent, read by itself) plus OTHER seconds that no
    process spent, so the load other processes took is OTHER over the wall time whatever this
    host runs beside the test. Counting the command's own CPU (a second of spinning) as others'
    would add it."""
    stat = tmp_path / "stat"
    tck = os.sysconf("SC_CLK_TCK")
    base = 1000 * tck

    def write_stat(busy_ticks: int) -> None:  # user nice system idle iowait irq softirq steal
        stat.write_text(f"cpu  {busy_ticks} 0 0 9000000 0 0 0 0 0 0\n")

    monkeypatch.setattr(host_load, "PROC_STAT", stat)
    clock: list[float] = []  # host_load's own readings of the wall clock: its wall time

    def monotonic() -> float:
        clock.append(time.monotonic())
        return clock[-1]

    monkeypatch.setattr(host_load, "time", types.SimpleNamespace(monotonic=monotonic))
    out = write_results(tmp_path / "run.h5", "sp_tp", sp_tp_cases()[:1])
    for other in (0.0, 1.5):
        write_stat(base)
        command = ("import time\nt = time.process_time()\nwhile time.process_time() - t < 1.0: pass\n"
                   f"open({str(stat)!r}, 'w').write('cpu  %d 0 0 9000000 0 0 0 0 0 0\\n' % "
                   f"({base} + round((time.process_time() + {other}) * {tck})))")
        clock.clear()
        assert host_load.main(["--out", str(out), "--", sys.executable, "-c", command]) == 0
        wall = clock[1] - clock[0]
        got = read_results(out, load_datasets=False, warn=False).attrs["host_other_cores"]
        # Within 0.05 CPU seconds (the file's rounding to a tick, the command's CPU after
        # writing it: its exit) and the attribute's three decimals; its own second of CPU
        # would be 1 / wall more.
        assert abs(got * wall - other) <= 0.05 + 0.0005 * wall, (other, got, wall)


def test_no_file_no_attributes(tmp_path):
    proc = run_script("host_load.py", "--out", tmp_path / "none.h5", "--", sys.executable,
                      "-c", "pass")
    assert proc.returncode == 0 and not (tmp_path / "none.h5").exists()
