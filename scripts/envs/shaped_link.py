"""Run a command over a real slow link on one machine: a fresh network namespace whose loopback
is shaped by tc's token bucket filter (tbf), with Open MPI told to use TCP over that loopback.

    shaped_link.py shaped-1g -- mpirun -np 2 build/bin/ring_attention --link shaped-1g ...
    shaped_link.py shaped:500mbit -- CMD ARGS...      any rate: a number and a tc unit
    shaped_link.py shaped-1g --dry-run -- CMD          print what would be done; needs no root
    shaped_link.py shaped-1g --check                   set up and remove one namespace: can it?
    shaped_link.py --list                              the presets and their settings

LINK is `shaped-1g`, `shaped-10g`, or `shaped:RATE` / `shaped-RATE` with RATE a positive number
and one of tc's units (bit, kbit, mbit, gbit, tbit, the IEC kibit... and the byte rates bps,
kbps, mbps, gbps, tbps, kibps...; `kbps` is kilobytes per second, as in tc). The results label
is the canonical name (`shaped:1gbit` is `shaped-1g`, `shaped:500mbit` is `shaped-500mbit`):
pass it to the benchmark as `--link LABEL` (the child also gets it as SUITE_LINK_LABEL).

What it does, as root: `ip netns add suite-shaped-<pid>` (a new name for every invocation),
`ip link set lo mtu MTU up` and `tc qdisc add dev lo root tbf rate RATE burst BURST latency
LATENCY` inside that namespace, then `ip netns exec` of the command with OMPI_MCA_pml=ob1,
OMPI_MCA_btl=tcp,self, OMPI_MCA_btl_tcp_if_include=lo and OMPI_MCA_oob_tcp_if_include=lo (the
NCCL equivalents too: sockets over lo, P2P and SHM off), and SUITE_LINK_ENV set to what the link
is (rate, burst, queue, MTU, the kernel release), which every benchmark stores in its results as
the attribute `link_env`. Afterwards, and on every other way out (an error, SIGINT, SIGTERM,
SIGHUP), the processes left in the namespace are ended and the namespace removed. The host's own
interfaces are never touched: every ip and tc command runs inside the new namespace.

What the rate means: the namespace has ONE shaped loopback, and every byte any rank sends to any
other crosses it once. N ranks all sending at once (a ring round, an all-to-all) share RATE, so
each rank's bandwidth W is RATE / N: 2 ranks on shaped-1g measure W = 62.5 MB/s each way.

Bad input (an unknown link, a rate of 0, a unit tc does not have, not root, no `ip` or `tc`, a
command that is not found, a kernel without tbf): one `error:` line, exit status 2, nothing left
behind (no namespace, no qdisc, no file). Otherwise the exit status is the command's (128 + the
signal's number when a signal ended it). Standard library only.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

NETNS_PREFIX = "suite-shaped-"
PRESETS = {"shaped-1g": 10**9, "shaped-10g": 10**10}
MIN_RATE_BIT = 10**6  # below 1 Mbit/s a benchmark's smallest sweep would run for hours

# tc's rate units (iproute2 get_rate64, case-insensitive): bits or bytes per second.
_RATE_UNITS = {"bit": 1, "bps": 8}
for _p, (_si, _iec) in {"k": (10**3, 2**10), "m": (10**6, 2**20), "g": (10**9, 2**30),
                        "t": (10**12, 2**40)}.items():
    _RATE_UNITS.update({f"{_p}bit": _si, f"{_p}ibit": _iec,
                        f"{_p}bps": 8 * _si, f"{_p}ibps": 8 * _iec})
# Sizes (burst, limit) in bytes; k/m/g are powers of 1024, as tc reads them.
_SIZE_UNITS = {"": 1, "b": 1, "k": 2**10, "kb": 2**10, "m": 2**20, "mb": 2**20}
_TIME_UNITS = {"us": 1, "usec": 1, "ms": 1000, "msec": 1000, "s": 10**6, "sec": 10**6}

# The mpirun environment: Open MPI's ob1 over TCP on the loopback only (the UCX PML and the
# shared-memory BTL would bypass the shaped device), and NCCL's socket transport on lo.
CHILD_ENV = {
    "OMPI_MCA_pml": "ob1",
    "OMPI_MCA_btl": "tcp,self",
    "OMPI_MCA_btl_tcp_if_include": "lo",
    "OMPI_MCA_oob_tcp_if_include": "lo",
    "NCCL_SOCKET_IFNAME": "lo",
    "NCCL_NET": "Socket",
    "NCCL_P2P_DISABLE": "1",
    "NCCL_SHM_DISABLE": "1",
    "NCCL_IB_DISABLE": "1",
}

# Seconds a signalled command gets to end before it is sent SIGTERM, then SIGKILL.
GRACE_S = 5.0


class LinkError(ValueError):
    """Bad input or a machine that cannot shape: one `error:` line, exit 2, nothing left."""


# ---------------------------------------------------------------------------------------------
# Parsing


def parse_rate(text: str) -> int:
    """`1gbit`, `500mbit`, `2.5gbit`, `125mbps` (bytes/s, as tc reads it) -> bits per second."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([a-z]+)", text.strip().lower())
    if not m or m.group(2) not in _RATE_UNITS:
        raise LinkError(f"rate {text!r}: a positive number and one of tc's units "
                        f"(e.g. 500mbit, 2gbit, 125mbps)")
    bits = round(float(m.group(1)) * _RATE_UNITS[m.group(2)])
    if bits <= 0:
        raise LinkError(f"rate {text!r}: must be positive")
    if bits < MIN_RATE_BIT:
        raise LinkError(f"rate {text!r}: below 1mbit, which no benchmark here finishes on")
    return bits


def parse_size(text: str, what: str) -> int:
    """`20480`, `20kb`, `64k`, `1mb` -> bytes (k and m are powers of 1024, as in tc)."""
    m = re.fullmatch(r"(\d+)([a-z]*)", text.strip().lower())
    if not m or m.group(2) not in _SIZE_UNITS or int(m.group(1)) <= 0:
        raise LinkError(f"{what} {text!r}: a positive whole number of bytes, optionally with "
                        f"b, kb or mb")
    return int(m.group(1)) * _SIZE_UNITS[m.group(2)]


def parse_time_us(text: str, what: str) -> int:
    """`100ms`, `1s`, `500us` -> microseconds."""
    m = re.fullmatch(r"(\d+)([a-z]+)", text.strip().lower())
    if not m or m.group(2) not in _TIME_UNITS or int(m.group(1)) <= 0:
        raise LinkError(f"{what} {text!r}: a positive whole number with us, ms or s")
    return int(m.group(1)) * _TIME_UNITS[m.group(2)]


def format_rate(bits: int) -> str:
    """The shortest exact tc spelling: 1000000000 -> `1gbit`, 2500000000 -> `2500mbit`."""
    for unit, scale in (("tbit", 10**12), ("gbit", 10**9), ("mbit", 10**6), ("kbit", 10**3)):
        if bits % scale == 0:
            return f"{bits // scale}{unit}"
    return f"{bits}bit"


def is_shaped(name: str) -> bool:
    """Whether a `--link` name is one of this script's (and not a slurm/link_presets.json one)."""
    return name == "shaped" or name.startswith(("shaped-", "shaped:"))


def label_for(bits: int) -> str:
    """The results label of a rate: the preset's name, else `shaped-<rate>`."""
    for name, rate in PRESETS.items():
        if rate == bits:
            return name
    return f"shaped-{format_rate(bits)}"


# ---------------------------------------------------------------------------------------------
# The shaped link


@dataclass(frozen=True)
class Shape:
    """One shaped loopback: tbf's rate, bucket and queue, and the loopback's MTU."""

    rate_bit: int
    burst_b: int
    latency_us: int
    mtu: int

    @property
    def label(self) -> str:
        return label_for(self.rate_bit)

    @property
    def rate_Bps(self) -> float:
        """The rate in bytes per second, shared by every flow on the loopback."""
        return self.rate_bit / 8

    def per_rank_W(self, ranks: int) -> float:
        """Each rank's bandwidth when `ranks` ranks send at once (a ring round, an all-to-all):
        they share the one shaped loopback."""
        return self.rate_Bps / max(ranks, 1)

    @property
    def limit_b(self) -> int:
        """The queue tbf holds before it drops, as tc derives it: rate x latency + burst."""
        return int(self.rate_Bps * self.latency_us / 1e6) + self.burst_b

    def tbf_args(self) -> list[str]:
        return ["rate", f"{self.rate_bit}bit", "burst", str(self.burst_b),
                "latency", f"{self.latency_us}us"]

    def describe(self) -> str:
        return (f"tbf rate {format_rate(self.rate_bit)} burst {self.burst_b} B latency "
                f"{self.latency_us / 1000:g} ms (queue {self.limit_b} B), lo mtu {self.mtu}")


def default_shape(rate_bit: int) -> Shape:
    """The bucket, queue and MTU, chosen by measurement (docs/SHAPED_LINKS.md, 2-core VM).

    A bucket of B bytes refills while the link idles, and what fits in it passes at the
    loopback's own speed: a round whose message (both directions) fits in the bucket after a
    pause is not slowed by the link at all. So the bucket is small: 20 kB at a 9000-byte MTU
    (two packets and a little: a bucket of one MTU stalled TCP until its connection timed out),
    which kept a 2-rank exchange within 1 to 4% of the rate from 32 KiB to 8 MiB at 500 Mbit/s
    and 1 Gbit/s, where a 131 kB bucket at a 64 KiB MTU let an 8 KiB exchange through at 1.5x
    the rate and a ring round of 32 KiB blocks at line rate while it computed. Above that, tbf
    needs the bucket to hold about 96 us of the rate to keep up on this host (10 Gbit/s: 20 kB
    gave 43% of the rate, 120 kB 91 to 101% from 128 KiB up). The queue (latency 100 ms) is
    long enough that tbf never drops: a drop costs TCP a retransmission timeout."""
    mtu = 9000
    burst = max(20_000, rate_bit // 8 * 96 // 10**6)  # 20 kB, or 96 us of the rate
    return Shape(rate_bit, burst, 100_000, mtu)


def parse_link(name: str, burst: str | None = None, latency: str | None = None,
               mtu: int | None = None) -> Shape:
    """`shaped-1g`, `shaped-10g`, `shaped:RATE` or `shaped-RATE`, with optional overrides."""
    if name in PRESETS:
        bits = PRESETS[name]
    elif name.startswith(("shaped:", "shaped-")) and len(name) > len("shaped:"):
        bits = parse_rate(name[len("shaped:"):])
    else:
        raise LinkError(f"unknown shaped link {name!r}: {', '.join(PRESETS)} or shaped:RATE "
                        f"(e.g. shaped:500mbit)")
    shape = default_shape(bits)
    if mtu is not None:
        if not 1280 <= mtu <= 65536:
            raise LinkError(f"--mtu {mtu}: between 1280 and 65536")
        shape = Shape(shape.rate_bit, max(shape.burst_b, 2 * mtu), shape.latency_us, mtu)
    if burst is not None:
        shape = Shape(shape.rate_bit, parse_size(burst, "--burst"), shape.latency_us, shape.mtu)
    if latency is not None:
        shape = Shape(shape.rate_bit, shape.burst_b, parse_time_us(latency, "--latency"), shape.mtu)
    if shape.burst_b < 2 * shape.mtu:
        raise LinkError(f"--burst {shape.burst_b} B is below two packets of the MTU ({shape.mtu}): "
                        f"tbf stalls or drops full-sized packets (a bucket of one MTU stalled TCP "
                        f"until its connection timed out)")
    return shape


def kernel_release() -> str:
    return os.uname().release


def link_env(shape: Shape, netns: str, tc_readback: str = "") -> str:
    """SUITE_LINK_ENV: `key=value` pairs, what the results file keeps as `link_env`."""
    parts = {"shaper": "tbf", "rate": format_rate(shape.rate_bit), "burst": f"{shape.burst_b}B",
             "latency": f"{shape.latency_us / 1000:g}ms", "limit": f"{shape.limit_b}B",
             "mtu": str(shape.mtu), "kernel": kernel_release(), "netns": netns}
    if tc_readback:
        parts["tc"] = tc_readback
    return " ".join([f"{k}={v}" for k, v in parts.items()] +
                    [f"{k}={v}" for k, v in CHILD_ENV.items()])


def child_environment(shape: Shape, netns: str, tc_readback: str = "") -> dict[str, str]:
    env = dict(os.environ)
    env.update(CHILD_ENV)
    env["SUITE_LINK_ENV"] = link_env(shape, netns, tc_readback)
    env["SUITE_LINK_LABEL"] = shape.label
    env["SUITE_SHAPED_NETNS"] = netns
    return env


# ---------------------------------------------------------------------------------------------
# The namespace


@dataclass
class Tools:
    ip: str
    tc: str


def find_tools() -> Tools:
    """Root, `ip` and `tc` on PATH, or LinkError saying which is missing."""
    if os.geteuid() != 0:
        raise LinkError("a shaped link needs root (network namespaces and tc); run as root or "
                        "use a simulated link (scripts/envs/simulate.py)")
    ip, tc = shutil.which("ip"), shutil.which("tc")
    missing = [n for n, p in (("ip", ip), ("tc", tc)) if p is None]
    if missing:
        raise LinkError(f"a shaped link needs {' and '.join(missing)} (Debian: apt-get install "
                        f"iproute2); not found on PATH")
    return Tools(ip, tc)


def run_checked(cmd: list[str], what: str) -> str:
    """Runs an ip or tc command; LinkError with its message where it fails."""
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        detail = " ".join((proc.stderr or proc.stdout).split()) or f"exit {proc.returncode}"
        raise LinkError(f"{what} failed: {shlex.join(cmd)}: {detail}")
    return proc.stdout


def list_netns(ip: str) -> list[str]:
    out = subprocess.run([ip, "netns", "list"], capture_output=True, text=True, timeout=30).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def netns_pids(ip: str, name: str) -> list[int]:
    proc = subprocess.run([ip, "netns", "pids", name], capture_output=True, text=True, timeout=30)
    return [int(p) for p in proc.stdout.split() if p.isdigit()]


def end_processes_in(ip: str, names: list[str]) -> None:
    """Ends what is still running inside the namespaces (only the invocation's own processes can
    be in them): SIGTERM, then SIGKILL after a grace period."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = [p for n in names for p in netns_pids(ip, n)]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + GRACE_S
        while time.monotonic() < deadline and any(netns_pids(ip, n) for n in names):
            time.sleep(0.1)


class ShapedNamespace:
    """A network namespace whose loopback is shaped; removed on exit (with whatever runs in it).

    Every command here is `ip netns add/del NAME` or runs inside NAME (`ip netns exec NAME ...`,
    `ip -n NAME ...`): nothing touches the host's interfaces."""

    def __init__(self, tools: Tools, shape: Shape):
        self.tools, self.shape = tools, shape
        self.name = ""
        self.tc_readback = ""

    def _in(self, *cmd: str) -> list[str]:
        return [self.tools.ip, "netns", "exec", self.name, *cmd]

    def create(self) -> None:
        existing = set(list_netns(self.tools.ip))
        base = f"{NETNS_PREFIX}{os.getpid()}"
        self.name = next(n for n in (base, *(f"{base}-{i}" for i in range(1, 100)))
                         if n not in existing)
        run_checked([self.tools.ip, "netns", "add", self.name], "creating the namespace")
        try:
            run_checked([self.tools.ip, "-n", self.name, "link", "set", "lo", "mtu", str(self.shape.mtu),
                  "up"], "bringing up its loopback")
            run_checked(self._in(self.tools.tc, "qdisc", "add", "dev", "lo", "root", "tbf",
                          *self.shape.tbf_args()),
                 "shaping its loopback (does this kernel have sch_tbf?)")
            shown = run_checked(self._in(self.tools.tc, "qdisc", "show", "dev", "lo"), "reading tc back")
            m = re.search(r"rate (\S+) burst (\S+) lat (\S+)", shown)
            self.tc_readback = ",".join(m.groups()) if m else ""
        except BaseException:
            self.remove()
            raise

    def stats(self) -> str:
        """tbf's counters: bytes and packets sent, drops, overlimits."""
        proc = subprocess.run(self._in(self.tools.tc, "-s", "qdisc", "show", "dev", "lo"),
                              capture_output=True, text=True, timeout=30)
        m = re.search(r"Sent (\d+) bytes (\d+) pkt \(dropped (\d+), overlimits (\d+)", proc.stdout)
        if not m:
            return ""
        return (f"tbf sent {m.group(1)} B in {m.group(2)} packets, dropped {m.group(3)}, "
                f"overlimits {m.group(4)}")

    def end_processes(self) -> None:
        end_processes_in(self.tools.ip, [self.name])

    def remove(self) -> None:
        if not self.name:
            return
        with SignalsHeld():
            self.end_processes()
            subprocess.run([self.tools.ip, "netns", "del", self.name], capture_output=True,
                           timeout=30)
            if self.name in list_netns(self.tools.ip):
                print(f"warning: shaped_link: could not remove network namespace {self.name}; "
                      f"remove it with: ip netns del {self.name}", file=sys.stderr)
            self.name = ""

    def __enter__(self) -> "ShapedNamespace":
        self.create()
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


class Interrupted(BaseException):
    """SIGINT, SIGTERM or SIGHUP outside the command's run: unwinds through the cleanup."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def raise_interrupted(signum, _frame) -> None:
    raise Interrupted(signum)


@contextmanager
def signals_handled_by(handler):
    """Routes SIGINT, SIGTERM and SIGHUP to `handler` inside the block; the previous handlers
    come back when it ends, however it ends."""
    previous = {s: signal.signal(s, handler) for s in HANDLED_SIGNALS}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


class SignalsHeld:
    """Holds SIGINT, SIGTERM and SIGHUP back while the namespace is removed (they are delivered
    afterwards), so that a second Ctrl-C cannot leave it half removed."""

    def __enter__(self) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED_SIGNALS)

    def __exit__(self, *exc) -> None:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, HANDLED_SIGNALS)


def run_inside(enter: list[str], command: list[str], env: dict[str, str]) -> int:
    """Runs `command` in a namespace (`enter`: the words that enter it, `ip netns exec NAME`)
    and returns its exit status (128 + N for signal N).

    The command stays in our process group, so a Ctrl-C at a terminal reaches it directly;
    SIGTERM or SIGHUP sent to this process alone is passed on as SIGTERM. A command still running
    GRACE_S seconds after the first signal gets SIGTERM, then SIGKILL; whatever it left running
    in the namespace is ended by removing it."""
    proc = subprocess.Popen([*enter, *command], env=env)
    received: list[tuple[int, float]] = []

    def on_signal(signum, _frame) -> None:
        received.append((signum, time.monotonic()))
        if signum != signal.SIGINT and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)

    with signals_handled_by(on_signal):
        while True:
            try:
                rc = proc.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                if received and time.monotonic() - received[0][1] > GRACE_S:
                    proc.terminate()
                    try:
                        rc = proc.wait(timeout=GRACE_S)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        rc = proc.wait()
                    break
    if received:
        return 128 + received[0][0]
    return 128 - rc if rc < 0 else rc


def cleanup_stale(ip: str) -> list[str]:
    """Removes namespaces `suite-shaped-<pid>[-i]` whose process is gone (a run killed with
    SIGKILL cannot remove its own); those of live processes are left alone."""
    removed = []
    for name in list_netns(ip):
        m = re.fullmatch(re.escape(NETNS_PREFIX) + r"(\d+)(?:-\d+)?", name)
        if not m or Path(f"/proc/{m.group(1)}").exists():
            continue
        pids = subprocess.run([ip, "netns", "pids", name], capture_output=True, text=True,
                              timeout=30).stdout.split()
        if pids:
            continue
        subprocess.run([ip, "netns", "del", name], capture_output=True, timeout=30)
        removed.append(name)
    return removed


# ---------------------------------------------------------------------------------------------
# Command line


def split_command(argv: list[str]) -> tuple[list[str], list[str]]:
    """Our flags before `--`, the command after it."""
    if "--" not in argv:
        return argv, []
    cut = argv.index("--")
    return argv[:cut], argv[cut + 1:]


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    ours, command = split_command(argv)
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("link", nargs="?",
                   help="shaped-1g, shaped-10g, or shaped:RATE (e.g. shaped:500mbit, shaped:2gbit)")
    p.add_argument("--burst", metavar="SIZE",
                   help="tbf's bucket in bytes (b, kb, mb: powers of 1024), at least two MTUs; "
                        "default 20000, or 96 us of the rate where that is more (10 Gbit/s: "
                        "120000); measured in docs/SHAPED_LINKS.md")
    p.add_argument("--mtu", type=int, metavar="BYTES",
                   help="the namespace's loopback MTU (1280 to 65536; default 9000)")
    p.add_argument("--latency", metavar="TIME",
                   help="tbf's queue, as the longest a packet may wait (us, ms, s; default 100ms: "
                        "long enough that tbf never drops, which would cost TCP a 200 ms timeout)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the namespace, the ip/tc commands and the environment, run nothing "
                        "(no root needed)")
    p.add_argument("--check", action="store_true",
                   help="only check that this machine can shape: create a shaped namespace, remove "
                        "it, say ok (exit 0) or why not (exit 2)")
    p.add_argument("--list", action="store_true", help="list the presets and their settings")
    p.add_argument("--label", action="store_true",
                   help="print LINK's results label (the name to pass as --link) and exit; "
                        "refuses a bad LINK like a run would, needs no root")
    p.add_argument("--cleanup-stale", action="store_true",
                   help="remove suite-shaped-<pid> namespaces whose process is gone (left by a run "
                        "killed with SIGKILL); those of running invocations are left alone")
    p.add_argument("--quiet", "-q", action="store_true",
                   help="no `shaped_link:` lines on stderr (the link set up, tbf's counters after)")
    return p.parse_args(ours), command


def main(argv: list[str] | None = None) -> int:
    args, command = parse_args(sys.argv[1:] if argv is None else argv)
    # Every way out runs the cleanup: the signals unwind through it (restored when main returns).
    with signals_handled_by(raise_interrupted):
        return _main(args, command)


def _main(args: argparse.Namespace, command: list[str]) -> int:
    say = (lambda *_: None) if args.quiet else (lambda msg: print(f"shaped_link: {msg}",
                                                                  file=sys.stderr, flush=True))
    try:
        if args.list:
            for name, bits in PRESETS.items():
                print(f"{name:<12} {default_shape(bits).describe()}")
            generic = default_shape(10**9).describe().replace("1gbit", "RATE", 1)
            print(f"{'shaped:RATE':<12} {generic} (the burst: 96 us of RATE above 1.67 Gbit/s)")
            return 0
        if args.cleanup_stale:
            tools = find_tools()
            for name in cleanup_stale(tools.ip):
                say(f"removed stale namespace {name}")
            return 0
        if not args.link:
            raise LinkError("give a shaped link (shaped-1g, shaped-10g, shaped:RATE) or --list")
        shape = parse_link(args.link, args.burst, args.latency, args.mtu)
        if args.label:
            print(shape.label)
            return 0
        if not command and not args.check:
            raise LinkError("no command: shaped_link.py LINK -- COMMAND [ARGS...]")
        if command and not args.dry_run and shutil.which(command[0]) is None:
            raise LinkError(f"command not found: {command[0]}")
        if args.dry_run:
            name = f"{NETNS_PREFIX}{os.getpid()}"
            print(f"netns {name}: {shape.describe()}")
            print(f"  ip netns add {name}")
            print(f"  ip -n {name} link set lo mtu {shape.mtu} up")
            tbf = " ".join(shape.tbf_args())
            print(f"  ip netns exec {name} tc qdisc add dev lo root tbf {tbf}")
            for key, value in sorted(child_environment(shape, name).items()):
                if key in CHILD_ENV or key.startswith("SUITE_"):
                    print(f"  export {key}={shlex.quote(value)}")
            if command:
                print(f"  ip netns exec {name} {shlex.join(command)}")
            print(f"  ip netns del {name}")
            return 0
        tools = find_tools()
        with ShapedNamespace(tools, shape) as ns:
            if args.check:
                print(f"ok: {ns.name} shaped ({shape.describe()}, kernel {kernel_release()})")
                return 0
            say(f"netns {ns.name}: {shape.describe()}, kernel {kernel_release()}; "
                f"W per rank = {shape.rate_Bps / 1e6:g} MB/s / ranks sending at once")
            rc = run_inside(ns._in(), command, child_environment(shape, ns.name, ns.tc_readback))
            stats = ns.stats()
            if stats:
                say(f"{ns.name}: {stats}")
            return rc
    except LinkError as err:
        print(f"error: shaped_link: {err}", file=sys.stderr)
        return 2
    except Interrupted as sig:
        say(f"interrupted by signal {sig.signum}; namespace removed")
        return 128 + sig.signum


if __name__ == "__main__":
    sys.exit(main())
