#!/usr/bin/env python3
"""Integration scenarios for the MPI executables, one per ctest test.

Each scenario launches a binary under mpirun (oversubscribed, so 4 ranks fit on 2 cores),
then checks its exit status, its messages and the HDF5 file it wrote, read back with h5py.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import h5py
import numpy as np


# Bounds on wall time are relative to what this host takes now: a job that starts and leaves at
# once (`--help` on the same ranks), timed in the same scenario. A refusal or a watchdog abort
# must end within QUICK_FACTOR times that (and never under the floor the bound had before):
# a slower, faster or busier CPU scales both, while a refusal that waits for a timeout or
# touches the memory it refused takes far longer.
QUICK_FACTOR = 10.0


class Env:
    def __init__(self, bin_dir: Path, mpiexec: str, workdir: Path):
        self.bin_dir = bin_dir
        self.mpiexec = mpiexec
        self.workdir = workdir
        self._startup_s: dict[tuple[int, str], float] = {}

    def startup_s(self, np_: int, binary: str) -> float:
        """Wall time of `binary --help` on `np_` ranks (launch, MPI set-up, exit), measured once
        per scenario: the reference for bounds on how quickly a job must end."""
        key = (np_, binary)
        if key not in self._startup_s:
            proc = self.mpirun(np_, binary, "--help", timeout=240)
            expect(proc.returncode == 0, f"reference run {binary} --help failed", proc)
            self._startup_s[key] = proc.elapsed  # type: ignore[attr-defined]
        return self._startup_s[key]

    def quick_limit_s(self, np_: int, binary: str, extra_s: float = 0.0, floor_s: float = 30.0) -> float:
        """How long a job of `binary` on `np_` ranks that must end at once (plus `extra_s` of
        deliberate waiting) may take here: QUICK_FACTOR x (reference start-up + extra_s), at
        least `floor_s`."""
        return max(floor_s, QUICK_FACTOR * (self.startup_s(np_, binary) + extra_s))

    def mpirun(self, np_: int, binary: str, *args: str, extra_env: dict | None = None,
               timeout: float = 240) -> subprocess.CompletedProcess:
        env = dict(os.environ)
        env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                    "OMPI_MCA_rmaps_base_oversubscribe": "1"})
        env.update(extra_env or {})
        cmd = [self.mpiexec, "-np", str(np_), "--oversubscribe", str(self.bin_dir / binary), *args]
        start = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout,
                              cwd=self.workdir)
        proc.elapsed = time.monotonic() - start  # type: ignore[attr-defined]
        print(f"$ {' '.join(cmd)}\n-> exit {proc.returncode} in {proc.elapsed:.1f} s")
        return proc

    def mpirun_stopping(self, np_: int, rank: int | None, after_s: float, binary: str, *args: str,
                        timeout: float = 180, after_line: str = "[1/",
                        extra_env: dict | None = None) -> subprocess.CompletedProcess:
        """Like mpirun, but freezes rank `rank` with SIGSTOP (a rank hung mid-step) `after_s`
        seconds after rank 0 printed a line starting with `after_line` (default: the first
        case's progress line, so the ranks are past start-up however long this host takes for
        it), and returns once the job has ended. `proc.stopped` counts the processes frozen;
        a job still running after `timeout` seconds is killed (SIGCONT, SIGTERM, SIGKILL).
        rank None freezes nothing (a rank that stops itself, through a test hook in
        `extra_env`): the same end of a job that does not end."""
        env = dict(os.environ)
        env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                    "OMPI_MCA_rmaps_base_oversubscribe": "1"})
        env.update(extra_env or {})
        exe = str(self.bin_dir / binary)
        cmd = [self.mpiexec, "-np", str(np_), "--oversubscribe", exe, *args]
        start = time.monotonic()
        popen = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                 cwd=self.workdir)
        out: list[str] = []
        err: list[str] = []
        started = threading.Event()

        def pump(stream, sink: list[str], marker: str | None) -> None:
            for line in stream:
                sink.append(line)
                if marker is not None and line.startswith(marker):
                    started.set()

        pumps = [threading.Thread(target=pump, args=(popen.stdout, out, None), daemon=True),
                 threading.Thread(target=pump, args=(popen.stderr, err, after_line), daemon=True)]
        for t in pumps:
            t.start()
        deadline = start + timeout
        while not started.wait(0.1) and popen.poll() is None and time.monotonic() < deadline:
            pass
        frozen: list[int] = []
        if started.is_set() and rank is not None:
            time.sleep(after_s)
            # The rank: its executable and rank variable, and a descendant of this job's launcher.
            # Tests run side by side (ctest -j): another job's rank of the same executable must
            # not be frozen (it was, once, and hung that job until its harness timed out).
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    if not open(f"/proc/{pid}/cmdline").read().startswith(exe):
                        continue
                    environ = open(f"/proc/{pid}/environ").read().split("\0")
                except OSError:
                    continue
                if f"OMPI_COMM_WORLD_RANK={rank}" in environ and descends_from(int(pid), popen.pid):
                    os.kill(int(pid), signal.SIGSTOP)
                    frozen.append(int(pid))
        try:
            popen.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            print(f"job still running after {timeout:.0f} s: killing it")
            job = [int(p) for p in filter(str.isdigit, os.listdir("/proc"))
                   if int(p) != popen.pid and descends_from(int(p), popen.pid)]
            for pid in frozen:
                _signal(pid, signal.SIGCONT)
            popen.terminate()
            try:
                popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait()
            for pid in job:
                _signal(pid, signal.SIGKILL)
        for t in pumps:
            t.join(timeout=10)
        proc = subprocess.CompletedProcess(cmd, popen.returncode, "".join(out), "".join(err))
        proc.elapsed = time.monotonic() - start  # type: ignore[attr-defined]
        proc.stopped = len(frozen)  # type: ignore[attr-defined]
        print(f"$ {' '.join(cmd)} (rank {rank}: {len(frozen)} process(es) stopped {after_s} s after "
              f"{after_line!r}{'' if started.is_set() else ' (never printed)'})\n-> exit {proc.returncode} "
              f"in {proc.elapsed:.1f} s")
        return proc


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def descends_from(pid: int, ancestor: int) -> bool:
    """Whether process `pid` is `ancestor` or below it (parents from /proc/<pid>/stat)."""
    while pid > 1:
        if pid == ancestor:
            return True
        try:
            stat = open(f"/proc/{pid}/stat").read()
        except OSError:
            return False
        pid = int(stat.rsplit(")", 1)[1].split()[1])  # the field after the state: the parent
    return False


def fail(msg: str, proc: subprocess.CompletedProcess | None = None) -> None:
    if proc is not None:
        print("--- stdout ---\n" + proc.stdout[-4000:] + "\n--- stderr ---\n" + proc.stderr[-4000:])
    raise SystemExit("FAIL: " + msg)


def expect(cond: bool, msg: str, proc: subprocess.CompletedProcess | None = None) -> None:
    if not cond:
        fail(msg, proc)


def expect_quick_refusal(env: "Env", proc: subprocess.CompletedProcess, what: str, needle: str, out: Path,
                         ranks: int, binary: str) -> None:
    """A refused run (its exit status checked by the caller) came back quickly (within
    Env.quick_limit_s), with one 'error:' line (rank 0's) naming `needle`, and left no results file."""
    limit = env.quick_limit_s(ranks, binary)
    expect(proc.elapsed < limit, f"{what}: took {proc.elapsed:.1f} s, over {limit:.1f} s "
           f"({QUICK_FACTOR:g} x the {env.startup_s(ranks, binary):.2f} s of --help)", proc)
    expect(proc.stderr.count("error:") == 1, f"{what}: expected one 'error:' line (from rank 0 only)", proc)
    expect(needle.lower() in proc.stderr.lower(), f"{what}: message lacks '{needle}'", proc)
    expect(not out.exists() and not Path(str(out) + ".partial").exists(), f"{what}: a results file was left", proc)
    print(f"  ok: {what}")


def expect_refused(env: "Env", binary: str, cases: dict[str, tuple[list[str], str]], ranks: int = 4) -> None:
    """Each bad input: exit 2, one 'error:' line (rank 0's) naming `needle`, no results file,
    quickly (within Env.quick_limit_s: relative to a job that only starts and exits, here)."""
    limit = env.quick_limit_s(ranks, binary)
    for what, (args, needle) in cases.items():
        out = env.workdir / "bad.h5"
        proc = env.mpirun(ranks, binary, "--backend", "cpu", "--out", str(out), "--iters", "2", *args,
                          timeout=2 * limit)
        expect(proc.returncode == 2, f"{what}: exit status {proc.returncode}, expected 2", proc)
        expect_quick_refusal(env, proc, what, needle, out, ranks, binary)


def model_prediction(env: "Env", *args: str) -> dict[str, float]:
    """`model`'s machine-readable prediction line (step_s, bytes_per_rank, memory_bytes) for
    one section (pass --section)."""
    proc = subprocess.run([str(env.bin_dir / "model"), *args], capture_output=True, text=True, timeout=30)
    expect(proc.returncode == 0, f"model {' '.join(args)}", proc)
    line = next(l for l in proc.stdout.splitlines() if l.startswith("prediction:"))
    return {k: float(v) for k, v in (kv.split("=") for kv in line.split()[2:])}


def plan_check_table(text: str, meshes: int, ran: str) -> list[dict]:
    """scripts/planner/plan_check.py's table, read row by row: exactly `meshes` rows of distinct meshes,
    each with its predicted and `ran` (measured, emulated, simulated) step time positive and
    finite and its error present, finite and (pred - ran) / ran of the row's own times (to
    their printed digits); and the summary's median |error| is the rows' median. Fails (the
    text shown) otherwise."""
    def bad(why: str) -> None:
        fail(f"plan_check: {why}:\n{text}")

    lines = text.splitlines()
    head = next((i for i, l in enumerate(lines) if l.startswith("| plan rank |")), None)
    if head is None or f"| {ran} step ms |" not in lines[head]:
        bad(f"no table with a '{ran} step ms' column")
    rows = []
    for line in lines[head + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        try:
            pred, got, err = float(cells[3]), float(cells[4]), float(cells[5].rstrip("%"))
        except (IndexError, ValueError):
            bad(f"a row without its times or error: {line}")
        if not all(np.isfinite(x) for x in (pred, got, err)) or pred <= 0 or got <= 0:
            bad(f"a row not measured: {line}")
        # Printed to 0.01 ms and 0.1%: the error from the printed times within that rounding.
        if abs(err - 100 * (pred - got) / got) > 0.05 + 100 * 0.005 * (1 + pred / got) / got + 1e-9:
            bad(f"the error {err}% is not (predicted - {ran}) / {ran}: {line}")
        rows.append({"mesh": cells[1], "predicted_ms": pred, "ran_ms": got, "error_pct": err})
    if len(rows) != meshes or len({r["mesh"] for r in rows}) != meshes:
        bad(f"{len(rows)} rows of {len({r['mesh'] for r in rows})} meshes, expected {meshes}")
    summary = next((l for l in lines if l.startswith("median |error| ")), "")
    try:
        median = float(summary.split()[2].rstrip("%,"))
    except (IndexError, ValueError):
        bad("no summary line")
    if abs(median - float(np.median([abs(r["error_pct"]) for r in rows]))) > 0.1:
        bad(f"median |error| {median}% is not the rows'")
    return rows


def model_run(env: "Env", *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(env.bin_dir / "model"), *args], capture_output=True, text=True, timeout=30)


def model_lines(stdout: str) -> dict[tuple[str, str], str]:
    """`model`'s figure lines as {(block, label): value}; a block is the section heading (or the
    planning sub-heading `-- ring at ...`) above the line, named by its first word."""
    lines, block = {}, ""
    for line in stdout.splitlines():
        if line.startswith("  -- "):
            block = "plan " + line.split()[1]
        elif line and not line.startswith(" "):
            block = line.split()[0]
        elif line.startswith("  "):
            parts = line.strip().rsplit(None, 2)
            if len(parts) == 3 and parts[2] in ("B", "s", "FLOP", "tokens", "blocks"):
                lines[(block, parts[0].strip())] = parts[1]
            elif "   " in line.strip():  # a text value (counts, yes/no)
                label, value = line.strip().split("   ", 1)
                lines[(block, label.strip())] = value.strip()
    return lines


def lscpu_device_name() -> str | None:
    """The CPU backend's device name as lscpu tells it, not as the suite reads it: `<model
    name> (<N> cores)` (sockets and threads added when there are several / more than cores);
    None without lscpu."""
    try:
        info = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        rows = subprocess.run(["lscpu", "-p=CORE,SOCKET"], capture_output=True, text=True,
                              check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    fields = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
    model = " ".join(fields.get("Model name", "").split())
    pairs = [tuple(r.split(",")) for r in rows.splitlines() if r and not r.startswith("#")]
    cores, sockets = len(set(pairs)), len({s for _, s in pairs})
    count = (f"{sockets} sockets, " if sockets > 1 else "") + f"{cores} core" + "s" * (cores != 1)
    if len(pairs) != cores:
        count += f", {len(pairs)} threads"
    return f"{model} ({count})" if model else None


# Where and on what a run ran: the attributes every results file carries at its root.
FINGERPRINT = ("cpu_model", "cpu_flags", "gpu_driver", "cuda_version", "cudnn_version", "nccl_version",
               "mpi_version", "gemm_library", "blas_core", "node_count", "hostnames", "link", "link_env",
               "git_commit")


def proc_cpuinfo_flags() -> set[str]:
    """The first processor's flags (x86) or Features (Arm) in /proc/cpuinfo."""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return set(value.split())
    return set()


def check_fingerprint(f: h5py.File, openblas_log: str | None = None) -> None:
    """Every FINGERPRINT attribute present and non-empty; node_count the number of distinct hosts
    the ranks ran on; on the CPU backend `none` for the GPU's libraries, cpu_flags a choice of
    /proc/cpuinfo's flags, and blas_core the core gemm_library names. `openblas_log`: the stderr
    of a run under OPENBLAS_VERBOSE=2, whose last `Core:` line is the library's own word on the
    core it ran."""
    a = f.attrs
    text = {k: a[k].decode() if isinstance(a[k], bytes) else a[k] for k in FINGERPRINT if k in a}
    missing = [k for k in FINGERPRINT if k not in a or str(text[k]) == ""]
    expect(not missing, f"fingerprint attributes missing or empty: {missing}")
    hosts = {h.decode() if isinstance(h, bytes) else h for h in f["ranks/hostname"][()]}
    expect(text["node_count"] == len(hosts) == len(text["hostnames"].split(",")),
           f"node_count {text['node_count']}, hosts {sorted(hosts)}, hostnames {text['hostnames']!r}")
    if a["backend"] == "cpu":
        for key in ("gpu_driver", "cuda_version", "cudnn_version", "nccl_version"):
            expect(text[key] == "none", f"{key} {text[key]!r} on the CPU backend")
        expect(f" {text['blas_core']}, " in text["gemm_library"],
               f"blas_core {text['blas_core']!r} is not gemm_library's {text['gemm_library']!r}")
        isa = text["cpu_flags"].split(",")
        expect(isa == ["none"] or set(isa) <= proc_cpuinfo_flags(), f"cpu_flags {text['cpu_flags']!r}")
    if openblas_log is not None:
        cores = [line.split(":", 1)[1].strip() for line in openblas_log.splitlines() if line.startswith("Core:")]
        expect(cores and cores[-1] == text["blas_core"], f"blas_core {text['blas_core']!r}; OpenBLAS said {cores}")


def check_sp_tp_file(path: Path, ranks: int, dtype: str, iters: int, sizes: list[int]) -> None:
    with h5py.File(path) as f:
        a = f.attrs
        expect(a["complete"] == 1, "file not marked complete")
        expect(a["schema_version"] == 1, "schema_version")
        expect(a["world_size"] == ranks, f"world_size {a['world_size']} != {ranks}")
        expect(a["backend"] == "cpu" and a["transport"] == "mpi", "backend/transport attributes")
        expect(a["transport_detail"] == "host buffers", "transport_detail")
        for key in ("git_commit", "created_utc", "command_line", "mpi_version", "hostnames", "link"):
            expect(key in a, f"file attribute {key} missing")
        check_fingerprint(f)
        expect((a["seed"], a["check"]) == (1234, 1), f"seed/check attributes {a['seed']}/{a['check']}")
        expect(a["gemm_library"].startswith("OpenBLAS ") and "1 thread" in a["gemm_library"],
               f"gemm_library {a['gemm_library']}: the CPU backend's GEMMs run on OpenBLAS, one thread per rank")
        # The CPU backend names its device by the CPU model and cores, each rank its own.
        want = lscpu_device_name()
        expect(a["device_names"] != "cpu" and (want is None or a["device_names"] == want),
               f"device_names {a['device_names']!r}, lscpu says {want!r}")
        devices = [d.decode() if isinstance(d, bytes) else d for d in f["ranks/device"][()]]
        expect(devices == [a["device_names"]] * ranks, f"ranks/device {devices}")
        expect(f["ranks/hostname"].shape == (ranks,), "ranks/hostname shape")
        # All ranks run on this host: oversubscribed exactly when they outnumber the threads
        # they may use (mpirun binds within this process's affinity, or not at all).
        threads = len(os.sched_getaffinity(0))
        expect((a["ranks_per_host_max"], a["cpu_threads_per_host_min"]) == (ranks, threads),
               f"placement {a['ranks_per_host_max']} ranks / {a['cpu_threads_per_host_min']} threads")
        expect(a["oversubscribed"] == int(ranks > threads), f"oversubscribed {a['oversubscribed']}")
        cases = f["sp_tp"]
        expected = {f"{op}_{dtype}_n{label}" for op in ("allreduce", "rs_ag") for label in map(fmt, sizes)}
        missing = expected - set(cases)
        expect(not missing, f"missing cases {missing}")
        e = {"fp32": 4, "fp64": 8}[dtype]
        for name, g in cases.items():
            n = int(g.attrs["n_bytes"])
            expect(g.attrs["check_passed"] == 1, f"{name}: check_passed")
            expect(g.attrs["t"] == ranks, f"{name}: t")
            expect(g["time_s"].shape == (iters, ranks), f"{name}: time_s shape {g['time_s'].shape}")
            times = g["time_s"][()]
            expect(np.all(times > 0), f"{name}: non-positive times")
            step = times.max(axis=1)
            expect(abs(np.median(step) - g.attrs["time_median_s"]) <= 1e-12 + 1e-9 * np.median(step),
                   f"{name}: time_median_s is not the median of the max over ranks")
            pred = 2 * (ranks - 1) * n // ranks
            expect(g.attrs["pred_bytes_sent_per_rank"] == pred, f"{name}: prediction {g.attrs['pred_bytes_sent_per_rank']} != {pred}")
            expect(list(g["bytes_sent"][()]) == [pred] * ranks, f"{name}: bytes_sent {g['bytes_sent'][()]} != {pred}")
            expect(list(g["bytes_recv"][()]) == [pred] * ranks, f"{name}: bytes_recv")
            expect(g.attrs["busbw_GBps"] > 0, f"{name}: busbw")
            expect(n % (ranks * e) == 0, f"{name}: size not divisible")
            if g.attrs["op"] == "rs_ag":
                for half in ("reduce_scatter", "all_gather"):
                    algbw = n / g.attrs[f"phase_{half}_median_s"] / 1e9
                    expect(np.isclose(g.attrs[f"{half}_algbw_GBps"], algbw), f"{name}: {half} algbw")
                    expect(np.isclose(g.attrs[f"{half}_busbw_GBps"], algbw * (ranks - 1) / ranks),
                           f"{name}: {half} busbw")
                for phase in ("phase_reduce_scatter_s", "phase_all_gather_s"):
                    expect(g[phase].shape == (iters, ranks), f"{name}: {phase} shape")
                    expect(np.all(g[phase][()] <= times + 1e-6), f"{name}: {phase} longer than the step")
    print(f"{path.name}: {len(expected)}+ cases checked")


def fmt(n: int) -> str:
    for i, suffix in enumerate(("", "K", "M", "G")):
        if n % 1024 or i == 3 or n == 0:
            return f"{n}{suffix}"
        n //= 1024
    return str(n)


def scenario_sp_tp(env: Env, ranks: int, dtype: str) -> None:
    out = env.workdir / f"sp_tp_np{ranks}_{dtype}.h5"
    sizes = [1024, 16384, 262144]
    proc = env.mpirun(ranks, "sp_tp", "--sizes", "1K:256K:x16", "--dtype", dtype, "--iters", "6", "--warmup", "1",
                      "--seq", "64", "--batch", "2", "--hidden", "32", "--out", str(out), "--link", "loopback")
    expect(proc.returncode == 0, "sp_tp failed", proc)
    expect("SP vs TP collectives" in proc.stdout, "no summary table on stdout", proc)
    expect(proc.stdout.count("SP vs TP collectives") == 1, "summary printed by more than one rank", proc)
    check_sp_tp_file(out, ranks, dtype, 6, sizes)
    with h5py.File(out) as f:
        act = f[f"sp_tp/rs_ag_{dtype}_act_s64_b2_h32"]
        expect(act.attrs["layer_bytes_sent_per_rank"] == act.attrs["pred_layer_bytes_sent_per_rank"],
               "activation case: layer bytes differ from 4(t-1)/t n")
        expect(f.attrs["link"] == "loopback", "link label")


def scenario_bad_input(env: Env) -> None:
    cases = {
        "size not divisible": (["--sizes", "1000"], "not a positive multiple"),
        "unknown flag": (["--no-such-flag"], "no-such-flag"),
        "unknown flag with its value, in the order given": (["--grad-dtype", "bf16"],
                                                            "unknown flag or stray value: --grad-dtype bf16"),
        "unknown value": (["--backend", "tpu"], "tpu"),
        "bad range": (["--sizes", "8K:1K:x2"], "begin is larger"),
        "above MPI's int count": (["--sizes", "16G"], "above this transport's limit"),
        "unwritable output": (["--out", "/proc/no/such/dir/x.h5"], "cannot create"),
        "nccl on cpu": (["--backend", "cpu", "--transport", "nccl"], "nccl"),
        "desynchronising gbench flag": (["--benchmark_enable_random_interleaving=true"], "different order"),
        "misspelt gbench flag": (["--benchmark_filtr=rs_ag"], "unknown Google Benchmark flag"),
        "bad gbench format": (["--benchmark_format=xml"], "console, json or csv"),
        "negative repetitions": (["--benchmark_repetitions=-1"], "integer >= 1"),
        "no repetitions": (["--benchmark_repetitions=0"], "integer >= 1"),
        "bad time unit": (["--benchmark_time_unit=xx"], "ns, us, ms or s"),
        "filter not a regex": (["--benchmark_filter=("], "not a regular expression"),
        "unwritable gbench output": (["--benchmark_out=/proc/no/such/x.json"], "cannot write"),
        "filter matching nothing": (["--benchmark_filter=no_such_case"], "matches none"),
        "output is a directory": (["--out", "/tmp"], "is a directory"),
        # The layer's flags are checked in collectives mode too; its training step needs the layer.
        "layer flag typo in collectives mode": (["--attention", "bogus"], "unknown path 'bogus'"),
        "training step without the layer": (["--pass", "fwd_bwd"], "add --mode layer"),
    }
    limit = env.quick_limit_s(4, "sp_tp")
    for what, (args, needle) in cases.items():
        out = env.workdir / "bad.h5"
        out_args = [] if "--out" in args else ["--out", str(out)]
        proc = env.mpirun(4, "sp_tp", *args, *out_args, "--iters", "2", timeout=2 * limit)
        expect(proc.returncode != 0, f"{what}: exit status 0", proc)
        expect_quick_refusal(env, proc, what, needle, out, 4, "sp_tp")


def scenario_killed_run(env: Env) -> None:
    out = env.workdir / "killed.h5"
    out.write_text("a complete file from an earlier run")  # must not survive beside the new .partial
    proc = env.mpirun(2, "sp_tp", "--sizes", "1K:64K:x4", "--iters", "3", "--out", str(out),
                      extra_env={"SUITE_ABORT_AFTER_CASES": "3"}, timeout=60)
    expect(proc.returncode != 0, "the aborted run exited 0", proc)
    expect(not out.exists(), "a killed run left a file under the final name", proc)
    partial = Path(str(out) + ".partial")
    expect(partial.exists(), "no .partial file after the kill", proc)
    with h5py.File(partial) as f:
        expect(f.attrs["complete"] == 0, "partial file claims to be complete")
        expect(len(f["sp_tp"]) == 3, f"expected the 3 finished cases, found {list(f['sp_tp'])}")
        for g in f["sp_tp"].values():
            expect(g["time_s"].shape == (3, 2), "finished case lost its samples")


def scenario_watchdog(env: Env) -> None:
    """Rank 2 stalls in set-up: the job ends within seconds of its 3 s timeout and the stuck
    rank stands out."""
    # Start-up and the 3 s timeout, 10x, and at least the 60 s this bound always allowed.
    limit = env.quick_limit_s(3, "sp_tp", extra_s=3, floor_s=60)
    proc = env.mpirun(3, "sp_tp", "--sizes", "3K", "--activation-case", "0", "--iters", "2", "--timeout", "3",
                      "--out", str(env.workdir / "hang.h5"), extra_env={"SUITE_TEST_STALL_RANK": "2"},
                      timeout=1.5 * limit)
    expect(proc.returncode != 0, "a stalled run exited 0", proc)
    expect(proc.elapsed < limit, f"watchdog took {proc.elapsed:.1f} s, over {limit:.1f} s", proc)
    lines = [l for l in proc.stderr.splitlines() if "timed out" in l]
    expect(lines, "no timeout message", proc)
    stuck = [l for l in lines if l.startswith("[rank 2 ")]
    expect(stuck and all("(setup)" in l and "waiting" not in l for l in stuck),
           f"the stalled rank's message does not say it was in set-up: {stuck}", proc)
    expect(all("this rank made no progress" in l and "another rank" not in l for l in stuck),
           f"the stalled rank's message blames another rank: {stuck}", proc)
    others = [l for l in lines if not l.startswith("[rank 2 ")]
    expect(all("waiting for the other ranks" in l for l in others), f"waiting ranks look stuck: {others}", proc)
    expect(all("sp_tp/allreduce_fp32_n3K" in l for l in lines), "timeout message does not name the case", proc)


def scenario_save_tensors(env: Env) -> None:
    out = env.workdir / "tensors.h5"
    proc = env.mpirun(2, "sp_tp", "--sizes", "64", "--activation-case", "0", "--iters", "2", "--save-tensors",
                      "--dtype", "fp64", "--out", str(out))
    expect(proc.returncode == 0, "sp_tp --save-tensors failed", proc)
    with h5py.File(out) as f:
        g = f["sp_tp/allreduce_fp64_n64"]
        inp, outp = g["tensor_input"][()], g["tensor_output"][()]
        expect(inp.shape == (2, 8) and outp.shape == (2, 8), f"tensor shapes {inp.shape} {outp.shape}")
        expect(np.array_equal(outp[0], inp.sum(axis=0)) and np.array_equal(outp[1], outp[0]),
               "saved output is not the sum of the saved inputs")


def scenario_harness_overhead(env: Env) -> None:
    out = env.workdir / "overhead.h5"
    proc = env.mpirun(2, "harness_overhead", "--sizes", "4K,1M", "--iters", "10", "--out", str(out))
    expect(proc.returncode == 0, "harness_overhead failed", proc)
    with h5py.File(out) as f:
        for g in f["harness_overhead"].values():
            expect(g.attrs["ratio"] > 0 and g.attrs["plain_mpi_median_s"] > 0, "no ratio recorded")
            print(f"  {g.name}: ratio {g.attrs['ratio']:.3f}")


def scenario_help(env: Env) -> None:
    proc = env.mpirun(2, "sp_tp", "--help", timeout=60)
    expect(proc.returncode == 0, "--help failed", proc)
    for flag in ("--backend", "--transport", "--dtype", "--iters", "--warmup", "--out", "--seed", "--check",
                 "--timeout", "--link", "--save-tensors", "--sizes", "--seq", "--benchmark_filter"):
        expect(flag in proc.stdout, f"--help does not explain {flag}", proc)
    expect(proc.stdout.count("--backend") == 1, "help printed by more than one rank", proc)


def scenario_layer(env: Env, ranks: int, dtype: str) -> None:
    """TP and TP+SP layers: SP output == TP output, ledger == METHODS.md within 2%, bytes == 4(t-1)/t sbh e."""
    out = env.workdir / f"layer_np{ranks}.h5"
    s, b, h, a = 128, 2, 256, 4
    proc = env.mpirun(ranks, "sp_tp", "--mode", "layer", "--seq", str(s), "--batch", str(b), "--hidden", str(h),
                      "--heads", str(a), "--attention", "fused,unfused", "--dtype", dtype, "--iters", "2",
                      "--warmup", "1", "--out", str(out))
    expect(proc.returncode == 0, "layer mode failed", proc)
    expect("Transformer layer forward" in proc.stdout, "no layer table", proc)
    e = {"fp32": 4, "fp64": 8}[dtype]
    t = ranks
    sbh = s * b * h
    with h5py.File(out) as f:
        cases = {(g.attrs["variant"], g.attrs["attention"]): g for g in f["sp_tp"].values()}
        expect(set(cases) == {(v, p) for v in ("tp", "tp_sp") for p in ("fused", "unfused")},
               f"cases {sorted(cases)}")
        for (variant, path), g in cases.items():
            name = f"{variant}/{path}"
            expect(g.attrs["check_passed"] == 1, f"{name}: SP output differs from TP ({g.attrs['check_max_abs_err']})")
            if ranks == 2:
                # Two ranks sum in one order whatever the algorithm: SP and TP agree to the bit.
                expect(g.attrs["check_bit_exact"] == 1, f"{name}: not bit-exact with 2 ranks")
            # METHODS.md with this dtype's element size (1-byte masks), written out independently here.
            fixed, split, scores = (4 * e + 2) * sbh, 12 * e * sbh, (2 * e + 1) * a * s * s * b
            if variant == "tp":
                pred = fixed + split / t + (0 if path == "fused" else scores / t)
            else:
                pred = (fixed + split + (0 if path == "fused" else scores)) / t
            expect(abs(g.attrs["pred_activation_bytes"] - pred) < 1e-6 * pred,
                   f"{name}: prediction {g.attrs['pred_activation_bytes']} != {pred}")
            ledger = int(g["ledger_bytes"][()].sum())
            expect(ledger == g.attrs["activation_bytes"], f"{name}: ledger sum != activation_bytes")
            expect(abs(ledger - pred) <= 0.02 * pred, f"{name}: ledger {ledger} vs formula {pred}: > 2%")
            expect(len(g["ledger_name"]) == len(g["ledger_bytes"]), f"{name}: ledger datasets disagree")
            comm_pred = 4 * (t - 1) / t * sbh * e
            expect(g.attrs["pred_layer_comm_bytes_per_rank"] == comm_pred, f"{name}: comm prediction")
            expect(list(g["bytes_sent"][()]) == [comm_pred] * t, f"{name}: measured comm bytes {g['bytes_sent'][()]}")
            for phase in ("phase_compute_s", "phase_comm_s"):
                expect(g[phase].shape == (2, t), f"{name}: {phase} shape")
            expect(g.attrs["phase_compute_median_s"] > 0, f"{name}: compute phase missing")
            names = [n.decode() for n in g["ledger_name"][()]]
            expect(("attn_softmax" in names) == (path == "unfused"), f"{name}: scores stored iff unfused: {names}")
        for path in ("fused", "unfused"):
            expect(cases[("tp_sp", path)].attrs["activation_bytes"] < cases[("tp", path)].attrs["activation_bytes"],
                   f"{path}: SP does not save activation memory")
    print(f"{out.name}: 4 layer cases checked")


def scenario_layer_bad_input(env: Env) -> None:
    cases = {
        "heads not divisible by t": (["--heads", "6", "--hidden", "384"], "not divisible by t"),
        "head dim unsupported": (["--heads", "4", "--hidden", "384"], "head dimension"),
        "seq not divisible": (["--seq", "130", "--heads", "4", "--hidden", "256"], "--seq 130"),
        "unknown variant": (["--variants", "tp,zz", "--heads", "4", "--hidden", "256"], "zz"),
    }
    for what, (args, needle) in cases.items():
        out = env.workdir / "bad_layer.h5"
        proc = env.mpirun(4, "sp_tp", "--mode", "layer", *args, "--out", str(out), timeout=60)
        expect(proc.returncode == 2, f"{what}: exit status {proc.returncode}", proc)
        expect(proc.stderr.count("error:") == 1 and needle in proc.stderr, f"{what}: message lacks '{needle}'", proc)
        expect(not out.exists() and not Path(str(out) + ".partial").exists(), f"{what}: results file left", proc)
        print(f"  ok: {what}")


def scenario_layer_save_tensors(env: Env) -> None:
    out = env.workdir / "layer_tensors.h5"
    proc = env.mpirun(2, "sp_tp", "--mode", "layer", "--seq", "64", "--batch", "1", "--hidden", "128",
                      "--heads", "2", "--iters", "1", "--warmup", "0", "--save-tensors", "--dtype", "fp64",
                      "--out", str(out))
    expect(proc.returncode == 0, "layer --save-tensors failed", proc)
    with h5py.File(out) as f:
        tp = f["sp_tp/layer_tp_fp64_s64_b1_h128_a2_ff512_flash_causal"]
        sp = f["sp_tp/layer_tp_sp_fp64_s64_b1_h128_a2_ff512_flash_causal"]
        expect(tp["tensor_output"].shape == (2, 64 * 128), f"tp output shape {tp['tensor_output'].shape}")
        expect(sp["tensor_output"].shape == (2, 32 * 128), f"sp output shape {sp['tensor_output'].shape}")
        # SP's shards, concatenated in rank order, are TP's (replicated) output.
        expect(np.array_equal(sp["tensor_output"][()].reshape(-1), tp["tensor_output"][0]), "SP shards != TP output")
        expect(np.array_equal(sp["tensor_input"][()].reshape(-1), tp["tensor_input"][1]), "SP input shards != TP input")


def scenario_benchmark_flags(env: Env) -> None:
    """Google Benchmark's flags pass through: filter, repetitions, JSON output from rank 0 only."""
    out, gb = env.workdir / "flags.h5", env.workdir / "gb.json"
    proc = env.mpirun(4, "sp_tp", "--sizes", "1K,4K", "--activation-case", "0", "--iters", "2",
                      "--benchmark_filter=rs_ag", "--benchmark_repetitions=2", f"--benchmark_out={gb}",
                      "--benchmark_out_format=json", "--out", str(out))
    expect(proc.returncode == 0, "run with Google Benchmark flags failed", proc)
    with h5py.File(out) as f:
        names = sorted(f["sp_tp"])
    expect(names == ["rs_ag_fp32_n1K", "rs_ag_fp32_n1K_rep1", "rs_ag_fp32_n4K", "rs_ag_fp32_n4K_rep1"],
           f"filter/repetitions gave cases {names}")
    runs = [b["name"] for b in json.loads(gb.read_text())["benchmarks"] if b.get("run_type") == "iteration"]
    expect(len(runs) == 4 and all("rs_ag" in r for r in runs), f"--benchmark_out holds {runs}")
    # Progress counts the runs the filter and repetitions select.
    progress = [l.split()[0] for l in proc.stderr.splitlines() if l.startswith("[") and "/4] " in l]
    expect(progress == [f"[{i}/4]" for i in range(1, 5)], f"progress lines {progress}", proc)
    # With a machine-readable console format, stdout is that report alone.
    proc = env.mpirun(2, "sp_tp", "--sizes", "1K", "--activation-case", "0", "--iters", "2",
                      "--benchmark_format=json", "--out", str(env.workdir / "json.h5"))
    expect(proc.returncode == 0, "run with --benchmark_format=json failed", proc)
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        raise AssertionError(f"stdout is not JSON ({e}):\n{proc.stdout[-500:]}")
    expect(len(report["benchmarks"]) == 2, f"JSON report holds {len(report['benchmarks'])} runs")
    expect("results:" in proc.stderr and "SP vs TP" in proc.stderr, "summary missing from stderr", proc)


def scenario_failed_check(env: Env) -> None:
    """One rank's failed check fails the case on every rank: recorded, printed once, exit 1."""
    out = env.workdir / "failed.h5"
    proc = env.mpirun(2, "sp_tp", "--sizes", "1K", "--activation-case", "0", "--iters", "2", "--out", str(out),
                      extra_env={"SUITE_TEST_FAIL_CHECK_RANK": "1"})
    expect(proc.returncode == 1, f"exit status {proc.returncode}, expected 1", proc)
    expect(proc.stderr.count("CHECK FAILED") == 2, "expected one CHECK FAILED line per case, from rank 0", proc)
    with h5py.File(out) as f:
        expect(f.attrs["complete"] == 1, "results not kept")
        expect(all(g.attrs["check_passed"] == 0 for g in f["sp_tp"].values()), "check_passed not 0")
    proc = env.mpirun(2, "sp_tp", "--sizes", "1K", "--activation-case", "0", "--iters", "2", "--check", "0",
                      "--out", str(out), extra_env={"SUITE_TEST_FAIL_CHECK_RANK": "1"})
    expect(proc.returncode == 0, "--check 0 still failed", proc)
    with h5py.File(out) as f:
        for g in f["sp_tp"].values():
            expect(g.attrs["check_passed"] == -1 and np.isnan(g.attrs["check_max_abs_err"]), "--check 0 recorded")
    rows = [l.split() for l in proc.stdout.splitlines() if l.startswith("fp32_n1K")]
    expect(rows and all(r[-1] == "off" for r in rows), f"table rows {rows}: unchecked cases must say off", proc)


def scenario_list_and_override(env: Env) -> None:
    """--benchmark_list_tests lists once and writes nothing; a repeated flag takes its last value."""
    out = env.workdir / "list.h5"
    proc = env.mpirun(3, "sp_tp", "--sizes", "3K", "--activation-case", "0", "--benchmark_list_tests",
                      "--out", str(out))
    expect(proc.returncode == 0, "listing failed", proc)
    expect(proc.stdout.count("sp_tp/allreduce_fp32_n3K") == 1, "listing not printed exactly once", proc)
    expect(not out.exists() and not Path(str(out) + ".partial").exists(), "listing wrote a results file", proc)
    proc = env.mpirun(2, "sp_tp", "--sizes", "1K", "--activation-case", "0", "--iters", "7", "--out", str(out),
                      "--iters", "3")
    expect(proc.returncode == 0, "repeated flag refused", proc)
    with h5py.File(out) as f:
        expect(all(g["time_s"].shape[0] == 3 for g in f["sp_tp"].values()), "the last --iters did not win")
    # A value listed twice is one case (the layer's lists as well as the sizes).
    proc = env.mpirun(2, "sp_tp", "--mode", "all", "--sizes", "1K,1K:2K:x2", "--activation-case", "0",
                      "--variants", "tp,tp", "--attention", "fused,fused", "--seq", "64", "--hidden", "128",
                      "--heads", "2", "--benchmark_list_tests")
    expect(proc.returncode == 0, "listing with repeated values failed", proc)
    names = [ln for ln in proc.stdout.splitlines() if ln.startswith("sp_tp/")]
    expect(len(names) == len(set(names)), f"a case is listed twice: {names}", proc)
    expect(sum("_n1K/" in n for n in names) == 2 and sum(n.startswith("sp_tp/layer_") for n in names) == 1,
           f"expected rs_ag and allreduce at 1K once each and one layer case: {names}", proc)


SCENARIOS = {
    "failed_check": scenario_failed_check,
    "list_and_override": scenario_list_and_override,
    "benchmark_flags": scenario_benchmark_flags,
    "layer_np2_fp64": lambda e: scenario_layer(e, 2, "fp64"),
    "layer_np4_fp32": lambda e: scenario_layer(e, 4, "fp32"),
    "layer_bad_input": scenario_layer_bad_input,
    "layer_save_tensors": scenario_layer_save_tensors,
    "sp_tp_np2_fp64": lambda e: scenario_sp_tp(e, 2, "fp64"),
    "sp_tp_np4_fp32": lambda e: scenario_sp_tp(e, 4, "fp32"),
    "sp_tp_np3_fp32": lambda e: scenario_sp_tp_odd(e),
    "bad_input": scenario_bad_input,
    "killed_run": scenario_killed_run,
    "watchdog": scenario_watchdog,
    "save_tensors": scenario_save_tensors,
    "harness_overhead": scenario_harness_overhead,
    "help": scenario_help,
}


def scenario_sp_tp_odd(env: Env) -> None:
    """Three ranks: sizes must be multiples of 3 x 4 bytes."""
    out = env.workdir / "np3.h5"
    proc = env.mpirun(3, "sp_tp", "--sizes", "12,3K", "--iters", "3", "--activation-case", "0", "--out", str(out))
    expect(proc.returncode == 0, "sp_tp with 3 ranks failed", proc)
    check_sp_tp_file(out, 3, "fp32", 3, [12, 3072])


def run_cli(scenarios: dict, description: str | None) -> None:
    """Runs the scenario named on the command line (shared with the scenarios_*.py files)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("scenario", choices=sorted(scenarios))
    p.add_argument("--bin-dir", type=Path, required=True, help="directory holding the built executables")
    p.add_argument("--mpiexec", default="mpirun", help="MPI launcher")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix=f"suite_{args.scenario}_") as tmp:
        scenarios[args.scenario](Env(args.bin_dir.resolve(), args.mpiexec, Path(tmp)))
    print(f"PASS {args.scenario}")


def main() -> None:
    run_cli(SCENARIOS, __doc__)


if __name__ == "__main__":
    sys.exit(main())
