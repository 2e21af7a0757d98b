"""A throw-away one-node Slurm on localhost: munge and Slurm daemons in a temporary directory.

Used by test_slurm_real.py. Everything (key, config, state, logs, sockets) lives under one
directory; nothing is written to /etc. `LocalSlurm.stop()` cancels the jobs, stops the daemons
it started (by pid) and the job step daemons that appeared while it ran.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

PACKAGES = ("slurm-wlm", "munge")
DAEMONS = ("munged", "slurmctld", "slurmd")


class Unavailable(RuntimeError):
    """Slurm cannot be set up here (not root, packages not installable, daemons fail)."""


def ensure_packages(log: Path, timeout: float = 300) -> None:
    """apt-get installs slurm-wlm and munge when a daemon is missing; Unavailable on failure
    (and when not root: slurmd must run as root)."""
    if os.geteuid() != 0:
        raise Unavailable("not root: slurmd runs as root, so this test runs only as root (CI)")
    if all(shutil.which(d) or Path("/usr/sbin", d).exists() for d in DAEMONS):
        return
    if not shutil.which("apt-get"):
        raise Unavailable("slurm is not installed and there is no apt-get to install it")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    with open(log, "a") as out:
        for cmd in (["apt-get", "update", "-qq"],
                    ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *PACKAGES]):
            try:
                rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                    timeout=timeout / 2).returncode
            except subprocess.TimeoutExpired:
                rc = -1
            if rc != 0:
                raise Unavailable(f"`{' '.join(cmd)}` failed (exit {rc}); see {log}")


def _die_with_parent() -> None:
    """In a daemon's child before exec: SIGTERM it when the test process dies, even by SIGKILL
    (a ctest timeout), so no daemon outlives the test."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _stepd_pids() -> set[int]:
    """Pids of running slurmstepd processes (job step daemons detach from slurmd)."""
    pids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == "slurmstepd":
                    pids.add(int(entry.name))
            except OSError:
                pass
    return pids


class LocalSlurm:
    def __init__(self, root: Path, cpus: int = 8):
        self.root = root
        self.cpus = cpus
        self.host = socket.gethostname().split(".")[0]
        self.procs: dict[str, subprocess.Popen] = {}
        self.stepd_before: set[int] = set()
        self.conf = root / "slurm.conf"
        self.env = dict(os.environ, SLURM_CONF=str(self.conf))
        self.deadline = float("inf")  # monotonic time after which every wait gives up

    # ---- set-up ----
    def _write_config(self) -> None:
        r = self.root
        for d in ("state", "spool", "log", "munge", "tmp"):
            (r / d).mkdir(parents=True, exist_ok=True)
        os.chmod(r / "munge", 0o711)
        key = r / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o600)
        port = 6817 + os.getpid() % 1000 * 2  # two ports, clear of a site's defaults
        self.conf.write_text(f"""\
ClusterName=suite-ci
SlurmctldHost={self.host}(127.0.0.1)
SlurmctldPort={port}
SlurmdPort={port + 1}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={r}/munge/munge.socket
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool
TmpFS={r}/tmp
SlurmctldPidFile={r}/slurmctld.pid
SlurmdPidFile={r}/slurmd.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
SlurmdParameters=config_overrides
ReturnToService=2
SchedulerType=sched/builtin
MinJobAge=600
KillWait=5
InactiveLimit=0
NodeName={self.host} NodeAddr=127.0.0.1 CPUs={self.cpus} State=UNKNOWN
PartitionName=ci Nodes={self.host} Default=YES MaxTime=30 State=UP OverSubscribe=YES
""")

    def _spawn(self, name: str, cmd: list[str]) -> None:
        log = open(self.root / "log" / f"{name}.out", "w")
        self.procs[name] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                            env=self.env, start_new_session=True,
                                            preexec_fn=_die_with_parent)

    def start(self, timeout: float = 60) -> None:
        self._write_config()
        self.stepd_before = _stepd_pids()
        r = self.root
        self._spawn("munged", ["munged", "--foreground", "--force",
                               f"--socket={r}/munge/munge.socket",
                               f"--key-file={r}/munge/munge.key",
                               f"--pid-file={r}/munge/munged.pid",
                               f"--log-file={r}/log/munged.log",
                               f"--seed-file={r}/munge/munged.seed"])
        self._wait_for(lambda: (r / "munge" / "munge.socket").exists(), "munged", 15)
        self._spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", str(self.conf)])
        self._spawn("slurmd", ["slurmd", "-D", "-f", str(self.conf), "-N", self.host])
        self._wait_for(self._node_idle, "an idle node in sinfo", timeout)

    def _node_idle(self) -> bool:
        proc = self.run(["sinfo", "-h", "-N", "-o", "%t"], check=False)
        return proc.returncode == 0 and proc.stdout.strip() in ("idle", "mix", "alloc")

    def _wait_for(self, ready, what: str, timeout: float) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise Unavailable(f"{name} exited ({proc.returncode}) while waiting for "
                                      f"{what}:\n{self.logs()}")
            if ready():
                return
            time.sleep(0.5)
        raise Unavailable(f"timed out after {timeout:.0f} s waiting for {what}:\n{self.logs()}")

    # ---- use ----
    def run(self, cmd: list[str], check: bool = True, timeout: float = 60,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=self.env, timeout=timeout,
                              cwd=cwd)
        if check and proc.returncode != 0:
            raise RuntimeError(f"`{' '.join(cmd)}` failed ({proc.returncode}): {proc.stderr}")
        return proc

    def sbatch(self, args: list[str], cwd: Path, env: dict[str, str]) -> str:
        """Submits; returns the job id."""
        proc = subprocess.run(["sbatch", "--parsable", *args], capture_output=True, text=True,
                              env={**self.env, **env}, cwd=cwd, timeout=60)
        if proc.returncode != 0:
            raise RuntimeError(f"sbatch {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc.stdout.strip().split(";")[0]

    def job_state(self, job: str) -> tuple[str, str]:
        """(JobState, ExitCode) from scontrol."""
        out = self.run(["scontrol", "show", "job", "-o", job], check=False).stdout
        fields = dict(f.split("=", 1) for f in out.split() if "=" in f)
        return fields.get("JobState", "UNKNOWN"), fields.get("ExitCode", "?")

    def wait(self, jobs: list[str], timeout: float) -> dict[str, tuple[str, str]]:
        """Waits until every job has ended; {job: (state, exit code)}."""
        end = min(time.monotonic() + timeout, self.deadline)
        states: dict[str, tuple[str, str]] = {}
        while time.monotonic() < end:
            states = {j: self.job_state(j) for j in jobs}
            if all(s not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING")
                   for s, _ in states.values()):
                return states
            time.sleep(1)
        raise TimeoutError(f"jobs still running after {timeout:.0f} s: {states}")

    def logs(self, tail: int = 30) -> str:
        out = []
        for f in sorted((self.root / "log").glob("*")):
            lines = f.read_text(errors="replace").splitlines()[-tail:]
            out.append(f"--- {f.name} ---\n" + "\n".join(lines))
        return "\n".join(out)

    # ---- tear-down ----
    def stop(self) -> None:
        """Cancels jobs, stops the daemons and the step daemons this instance saw appear."""
        if self.procs.get("slurmctld") and self.procs["slurmctld"].poll() is None:
            try:
                self.run(["scancel", "--full", "--user", "root"], check=False, timeout=15)
                end = time.monotonic() + 15
                while time.monotonic() < end and self.run(
                        ["squeue", "-h"], check=False, timeout=10).stdout.strip():
                    time.sleep(0.5)
            except (subprocess.TimeoutExpired, OSError):
                pass
        for name in ("slurmd", "slurmctld", "munged"):
            proc = self.procs.get(name)
            if proc and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)
        for pid in _stepd_pids() - self.stepd_before:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
