"""Run a benchmark on a cluster of M nodes emulated on this machine: each node a network
namespace with its own host name, ranks of one node talking over shared memory, ranks of
different nodes over TCP through the node's NIC, a veth to a bridge shaped by tc to RATE.

    emulated_cluster.py --nodes 2 --ranks-per-node 2 --nic 1gbit -- build/bin/moe --dispatch flat,hierarchical
    emulated_cluster.py --link emulated-2x2-1g -- CMD ARGS     the same cluster, by its label
    emulated_cluster.py --nodes 2 --ranks-per-node 2 --nic 1gbit --dry-run -- CMD   (no root)
    emulated_cluster.py --nodes 2 --ranks-per-node 1 --nic 1gbit --check            can it?

The command is the benchmark and its flags, without mpirun: the script starts Open MPI's mpirun
itself, in a launcher namespace, with one daemon per node (`plm_rsh_agent` is a small script that
runs the daemon inside the node's namespace and UTS namespace, host name cn<i>), hosts named by
their addresses inside the bridge's network, `--bind-to none`, ob1 with the btls self, vader (shared
memory inside a node) and tcp (across nodes, on the bridge's subnet only), `btl_tcp_links 4` and
`mpi_yield_when_idle 1` (the settings that brought one TCP pair from 55 to 112-117 MB/s of a shaped
125 MB/s here, docs/EMULATED_CLUSTER.md). Every suite benchmark takes SUITE_LINK_LABEL
(`emulated-<M>x<P>-<rate>`) as its `--link` when none is given and stores SUITE_LINK_ENV (nodes,
ranks per node, NIC rate, burst, latency, kernel, the Open MPI settings, the machine's cores) as
the attribute `link_env`.

The topology, all of it in namespaces of this invocation (suite-ec<pid>-...), never the host's
interfaces or addresses: a bridge in a namespace of its own; per node a veth pair created inside
the bridge's namespace, its one end moved into the node as eth0; tc tbf at RATE on both ends (the
node's egress on eth0, its ingress on the bridge's port), with the burst rule of
scripts/envs/shaped_link.py; `--nic-latency` adds netem's delay on both ends where the kernel has it.
A second run at the same time builds its own namespaces (the subnet is private to each bridge).
Everything is removed on every way out: the command's end, an error, SIGINT, SIGTERM, SIGHUP.

Bad input (not root, no ip / tc / unshare / mpirun, a rate of 0 or one tc cannot read, more than
MAX_NODES nodes, a command not found, a kernel without tbf or netem when asked for): one `error:`
line, exit 2, nothing left. Otherwise the exit status is the command's (mpirun's).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from scripts.envs import shaped_link
from scripts.envs.shaped_link import LinkError, format_rate, parse_rate, parse_time_us, run_checked

PREFIX = "suite-ec"
MAX_NODES = 16
MAX_RANKS_PER_NODE = 64
SUBNET = "10.231.0"  # private to each invocation's bridge namespace: runs never see each other's
MTU = 9000
# Open MPI across the nodes: shared memory inside one, TCP on the bridge's subnet between them.
# btl_tcp_links 4 and mpi_yield_when_idle 1: one TCP connection per pair reached 55 MB/s of a
# 125 MB/s NIC here, four 93 MB/s, four with yielding waiters 112-117 MB/s.
OMPI_SETTINGS = {
    "pml": "ob1",
    "btl": "self,vader,tcp",
    "btl_tcp_if_include": f"{SUBNET}.0/24",
    "oob_tcp_if_include": f"{SUBNET}.0/24",
    "btl_tcp_links": "4",
    "mpi_yield_when_idle": "1",
    "plm_rsh_no_tree_spawn": "1",
}


def ompi_settings() -> dict[str, str]:
    """OMPI_SETTINGS, each overridden by OMPI_MCA_<name> where that is in the environment."""
    return {k: os.environ.get(f"OMPI_MCA_{k}", v) for k, v in OMPI_SETTINGS.items()}


NCCL_ENV = {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_NET": "Socket", "NCCL_IB_DISABLE": "1"}


@dataclass(frozen=True)
class Cluster:
    nodes: int
    ranks_per_node: int
    rate_bit: int
    latency_us: int = 0

    @property
    def ranks(self) -> int:
        return self.nodes * self.ranks_per_node

    @property
    def burst_b(self) -> int:
        return shaped_link.default_shape(self.rate_bit).burst_b

    @property
    def label(self) -> str:
        rate = shaped_link.label_for(self.rate_bit).removeprefix("shaped-")
        lat = f"-{self.latency_us}us" if self.latency_us else ""
        return f"emulated-{self.nodes}x{self.ranks_per_node}-{rate}{lat}"

    def address(self, node: int) -> str:
        return f"{SUBNET}.{node + 1}"

    def describe(self) -> str:
        lat = f", +{self.latency_us} us each way (netem)" if self.latency_us else ""
        return (f"{self.nodes} nodes x {self.ranks_per_node} ranks, NIC {format_rate(self.rate_bit)} "
                f"each way (tbf burst {self.burst_b} B{lat}), shared memory inside a node")


def check_counts(nodes: int, ranks_per_node: int) -> None:
    if not 1 <= nodes <= MAX_NODES:
        raise LinkError(f"--nodes {nodes}: between 1 and {MAX_NODES} (each node is a namespace "
                        f"and a daemon on this one machine)")
    if not 1 <= ranks_per_node <= MAX_RANKS_PER_NODE:
        raise LinkError(f"--ranks-per-node {ranks_per_node}: between 1 and {MAX_RANKS_PER_NODE}")


def parse_label(label: str) -> Cluster:
    """`emulated-2x2-1g`, `emulated-4x2-500mbit`, `emulated-2x2-10g-50us` -> the cluster."""
    m = re.fullmatch(r"emulated-(\d+)x(\d+)-([0-9a-z.]+?)(?:-(\d+)us)?", label.strip())
    if not m:
        raise LinkError(f"link {label!r}: emulated-<nodes>x<ranks per node>-<rate>[-<latency>us] "
                        f"(e.g. emulated-2x2-1g, emulated-2x2-500mbit)")
    rate = m.group(3)
    bits = shaped_link.PRESETS.get(f"shaped-{rate}") or parse_rate(rate)
    nodes, per_node = int(m.group(1)), int(m.group(2))
    check_counts(nodes, per_node)
    return Cluster(nodes, per_node, bits, int(m.group(4) or 0))


def machine_cores() -> int:
    return len(os.sched_getaffinity(0))


def node_cpus(nodes: int) -> list[str]:
    """The CPUs each node's daemon and ranks may use: the machine's split evenly where there are
    at least as many as nodes (so that one node's ranks never take another's cores), else all."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < nodes:
        return [",".join(map(str, cpus))] * nodes
    share = len(cpus) // nodes
    return [",".join(map(str, cpus[i * share:(i + 1) * share])) for i in range(nodes)]


def link_env(cluster: Cluster, tc_readback: str = "") -> str:
    """SUITE_LINK_ENV: what the results file keeps as `link_env`."""
    parts = {"emulated": "namespaces", "nodes": cluster.nodes, "ranks_per_node": cluster.ranks_per_node,
             "nic": format_rate(cluster.rate_bit), "shaper": "tbf", "burst": f"{cluster.burst_b}B",
             "latency": f"{cluster.latency_us}us", "mtu": MTU, "kernel": shaped_link.kernel_release(),
             "machine_cores": machine_cores()}
    if tc_readback:
        parts["tc"] = tc_readback
    parts.update({f"OMPI_MCA_{k}": v for k, v in ompi_settings().items()})
    return " ".join(f"{k}={v}" for k, v in parts.items())


@dataclass
class Tools:
    ip: str
    tc: str
    unshare: str
    mpirun: str


def find_tools(mpirun: str) -> Tools:
    if os.geteuid() != 0:
        raise LinkError("an emulated cluster needs root (network namespaces, veths and tc); run as "
                        "root or use a simulated one (scripts/envs/simulate.py)")
    found = {n: shutil.which(n) for n in ("ip", "tc", "unshare")}
    found["mpirun"] = shutil.which(mpirun)
    missing = [n for n, p in found.items() if p is None]
    if missing:
        raise LinkError(f"an emulated cluster needs {', '.join(missing)} on PATH (Debian: iproute2 "
                        f"for ip and tc, util-linux for unshare, openmpi-bin for mpirun)")
    return Tools(found["ip"], found["tc"], found["unshare"], found["mpirun"])


class EmulatedCluster:
    """The namespaces, bridge and veths of one invocation; removed on exit with what runs in them."""

    def __init__(self, tools: Tools, cluster: Cluster):
        self.tools, self.cluster = tools, cluster
        self.base = ""
        self.created: list[str] = []
        self.agent_dir = ""
        self.tc_readback = ""

    @property
    def bridge(self) -> str:
        return f"{self.base}-br"

    @property
    def launcher(self) -> str:
        return f"{self.base}-l"

    def node(self, i: int) -> str:
        return f"{self.base}-n{i}"

    def _add_netns(self, name: str) -> None:
        run_checked([self.tools.ip, "netns", "add", name], "creating a namespace")
        self.created.append(name)

    def _ip(self, ns: str, *args: str, what: str) -> None:
        run_checked([self.tools.ip, "-n", ns, *args], what)

    def _tc(self, ns: str, dev: str) -> None:
        """The NIC's shaping on one end of a node's link: netem's delay (if asked) with tbf under
        it, else tbf alone."""
        tc = [self.tools.ip, "netns", "exec", ns, self.tools.tc, "qdisc", "add", "dev", dev]
        shape = shaped_link.default_shape(self.cluster.rate_bit)
        tbf = ["tbf", *shape.tbf_args()]
        if self.cluster.latency_us:
            run_checked([*tc, "root", "handle", "1:", "netem", "delay", f"{self.cluster.latency_us}us"],
                 "adding the NIC's latency (does this kernel have sch_netem?)")
            run_checked([*tc, "parent", "1:1", "handle", "10:", *tbf], "shaping the NIC (sch_tbf?)")
        else:
            run_checked([*tc, "root", *tbf], "shaping the NIC (does this kernel have sch_tbf?)")

    def create(self) -> None:
        existing = set(shaped_link.list_netns(self.tools.ip))
        base = f"{PREFIX}{os.getpid()}"
        self.base = next(b for b in (base, *(f"{base}-{i}" for i in range(1, 100)))
                         if f"{b}-br" not in existing)
        try:
            self._add_netns(self.bridge)
            self._ip(self.bridge, "link", "set", "lo", "up", what="the bridge's loopback")
            self._ip(self.bridge, "link", "add", "br0", "type", "bridge", what="creating the bridge")
            self._ip(self.bridge, "link", "set", "br0", "up", what="bringing up the bridge")
            members = [(self.node(i), f"port{i}", self.cluster.address(i)) for i in range(self.cluster.nodes)]
            members.append((self.launcher, "portl", f"{SUBNET}.254"))
            for ns, port, addr in members:
                self._add_netns(ns)
                self._ip(self.bridge, "link", "add", port, "mtu", str(MTU), "type", "veth", "peer", "name",
                         "eth0", "mtu", str(MTU), "netns", ns, what="creating a node's link")
                self._ip(self.bridge, "link", "set", port, "master", "br0", "up", what="joining the bridge")
                self._ip(ns, "link", "set", "lo", "up", what="a node's loopback")
                self._ip(ns, "addr", "add", f"{addr}/24", "dev", "eth0", what="a node's address")
                self._ip(ns, "link", "set", "eth0", "up", what="bringing up a node's link")
                if ns != self.launcher:  # the launcher's link carries only the daemons' start-up
                    self._tc(ns, "eth0")
                    self._tc(self.bridge, port)
            shown = run_checked([self.tools.ip, "netns", "exec", self.node(0), self.tools.tc, "qdisc", "show",
                          "dev", "eth0"], "reading tc back")
            m = re.search(r"rate (\S+) burst (\S+)", shown)
            self.tc_readback = ",".join(m.groups()) if m else ""
            self.agent_dir = tempfile.mkdtemp(prefix=f"{self.base}-")
            self._write_agent()
        except BaseException:
            self.remove()
            raise

    def _write_agent(self) -> None:
        """Open MPI's rsh agent: `agent HOST COMMAND...` runs COMMAND (the node's daemon) in the
        node of that address, in a UTS namespace of its own named cn<i>."""
        cpus = node_cpus(self.cluster.nodes)
        cases = "\n".join(f"  {self.cluster.address(i)}) ns={self.node(i)}; name=cn{i}; cpus={cpus[i]} ;;"
                          for i in range(self.cluster.nodes))
        script = f"""#!/bin/sh
# Written by emulated_cluster.py for one run; removed with its namespaces.
host=$1; shift
case "$host" in
{cases}
  *) echo "emulated_cluster agent: no node has the address $host" >&2; exit 1 ;;
esac
exec {shlex.quote(self.tools.ip)} netns exec "$ns" {shlex.quote(self.tools.unshare)} --uts \\
  taskset -c "$cpus" sh -c "hostname $name || exit 1; $*"
"""
        path = Path(self.agent_dir) / "agent.sh"
        path.write_text(script)
        path.chmod(0o755)

    @property
    def agent(self) -> str:
        return str(Path(self.agent_dir) / "agent.sh")

    def mpirun_command(self, command: list[str], extra: list[str]) -> list[str]:
        c = self.cluster
        hosts = ",".join(f"{c.address(i)}:{c.ranks_per_node}" for i in range(c.nodes))
        mca = [w for k, v in ompi_settings().items() for w in ("--mca", k, v)]
        forwarded = [w for k in ("SUITE_LINK_ENV", "SUITE_LINK_LABEL", *NCCL_ENV) for w in ("-x", k)]
        return [self.tools.ip, "netns", "exec", self.launcher, self.tools.mpirun, "-np", str(c.ranks),
                "--host", hosts, "--bind-to", "none", "--mca", "plm_rsh_agent", self.agent, *mca,
                *forwarded, *extra, *command]

    def remove(self) -> None:
        with shaped_link.SignalsHeld():
            if self.created:
                shaped_link.end_processes_in(self.tools.ip, self.created)
            for name in reversed(self.created):
                subprocess.run([self.tools.ip, "netns", "del", name], capture_output=True, timeout=30)
            left = [n for n in self.created if n in shaped_link.list_netns(self.tools.ip)]
            if left:
                print(f"warning: emulated_cluster: could not remove {' '.join(left)}; remove them "
                      f"with: ip netns del NAME", file=sys.stderr)
            self.created = []
            if self.agent_dir:
                shutil.rmtree(self.agent_dir, ignore_errors=True)
                self.agent_dir = ""

    def tbf_counters(self) -> list[int]:
        """Bytes each node's NIC sent (tbf's counter on its eth0)."""
        sent = []
        for i in range(self.cluster.nodes):
            out = subprocess.run([self.tools.ip, "netns", "exec", self.node(i), self.tools.tc, "-s",
                                  "qdisc", "show", "dev", "eth0"], capture_output=True, text=True,
                                 timeout=30).stdout
            m = re.search(r"tbf .*?Sent (\d+) bytes", out, re.S)
            sent.append(int(m.group(1)) if m else -1)
        return sent

    def __enter__(self) -> "EmulatedCluster":
        self.create()
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def cleanup_stale(ip: str) -> list[str]:
    """Removes suite-ec<pid>-... namespaces whose process is gone (a run killed by SIGKILL)."""
    removed = []
    for name in shaped_link.list_netns(ip):
        m = re.fullmatch(re.escape(PREFIX) + r"(\d+)(?:-\d+)?-(?:br|l|n\d+)", name)
        if not m or Path(f"/proc/{m.group(1)}").exists() or shaped_link.netns_pids(ip, name):
            continue
        subprocess.run([ip, "netns", "del", name], capture_output=True, timeout=30)
        removed.append(name)
    return removed


def child_environment(cluster: Cluster, tc_readback: str = "") -> dict[str, str]:
    env = dict(os.environ)
    env.update(NCCL_ENV)
    env["SUITE_LINK_ENV"] = link_env(cluster, tc_readback)
    env["SUITE_LINK_LABEL"] = cluster.label
    if os.geteuid() == 0:  # Open MPI refuses root without these
        env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
    return env


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    ours, command = shaped_link.split_command(argv)
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, metavar="M", help=f"nodes (namespaces), 1 to {MAX_NODES}")
    p.add_argument("--ranks-per-node", type=int, metavar="P", help="MPI ranks on each node")
    p.add_argument("--nic", metavar="RATE",
                   help="each node's NIC, each way: a number and one of tc's units (1gbit, 500mbit, "
                        "10gbit, 125mbps = bytes/s)")
    p.add_argument("--nic-latency", metavar="TIME",
                   help="added one-way latency at each end of a node's link (us, ms; netem, where "
                        "the kernel has it); default none")
    p.add_argument("--link", metavar="LABEL",
                   help="the cluster by its results label instead of the three flags above: "
                        "emulated-<M>x<P>-<rate>[-<latency>us], e.g. emulated-2x2-1g")
    p.add_argument("--mpirun", default="mpirun", help="Open MPI's mpirun (default: the one on PATH)")
    p.add_argument("--mpirun-flag", action="append", default=[], metavar="FLAG",
                   help="one more word for mpirun, before the command (repeatable), e.g. "
                        "--mpirun-flag=--mca --mpirun-flag=btl_base_verbose --mpirun-flag=100")
    p.add_argument("--dry-run", action="store_true",
                   help="print the namespaces, ip/tc commands, mpirun line and environment; run "
                        "nothing (no root needed)")
    p.add_argument("--check", action="store_true",
                   help="build the cluster, remove it, say ok (exit 0) or why not (exit 2)")
    p.add_argument("--label", action="store_true", help="print the cluster's results label and exit")
    p.add_argument("--cleanup-stale", action="store_true",
                   help="remove suite-ec<pid>-... namespaces left by a run killed with SIGKILL")
    p.add_argument("--quiet", "-q", action="store_true", help="no `emulated_cluster:` lines on stderr")
    return p.parse_args(ours), command


def cluster_of(args: argparse.Namespace) -> Cluster:
    if args.link:
        if args.nodes or args.ranks_per_node or args.nic or args.nic_latency:
            raise LinkError("--link names the whole cluster: give it or --nodes/--ranks-per-node/--nic")
        return parse_label(args.link)
    if args.nodes is None or args.ranks_per_node is None or args.nic is None:
        raise LinkError("give --nodes, --ranks-per-node and --nic (or --link emulated-MxP-RATE)")
    check_counts(args.nodes, args.ranks_per_node)
    latency = parse_time_us(args.nic_latency, "--nic-latency") if args.nic_latency else 0
    return Cluster(args.nodes, args.ranks_per_node, parse_rate(args.nic), latency)


def main(argv: list[str] | None = None) -> int:
    args, command = parse_args(sys.argv[1:] if argv is None else argv)
    # Every way out runs the cleanup: the signals unwind through it (restored when main returns).
    with shaped_link.signals_handled_by(shaped_link.raise_interrupted):
        return _main(args, command)


def _main(args: argparse.Namespace, command: list[str]) -> int:
    say = (lambda *_: None) if args.quiet else (
        lambda msg: print(f"emulated_cluster: {msg}", file=sys.stderr, flush=True))
    try:
        if args.cleanup_stale:
            for name in cleanup_stale(find_tools(args.mpirun).ip):
                say(f"removed stale namespace {name}")
            return 0
        cluster = cluster_of(args)
        if args.label:
            print(cluster.label)
            return 0
        if not command and not args.check:
            raise LinkError("no command: emulated_cluster.py --nodes M --ranks-per-node P --nic RATE "
                            "-- BENCHMARK [FLAGS...]")
        if command and not args.dry_run and shutil.which(command[0]) is None:
            raise LinkError(f"command not found: {command[0]}")
        if args.dry_run:
            fake = EmulatedCluster(Tools("ip", "tc", "unshare", args.mpirun), cluster)
            fake.base, fake.agent_dir = f"{PREFIX}{os.getpid()}", "$AGENT_DIR"
            print(f"{cluster.label}: {cluster.describe()}")
            print(f"  namespaces: {fake.bridge} (bridge br0), "
                  f"{', '.join(fake.node(i) for i in range(cluster.nodes))} (nodes), {fake.launcher}")
            shape = shaped_link.default_shape(cluster.rate_bit)
            print(f"  on each node's eth0 and its bridge port: tc qdisc add ... tbf {' '.join(shape.tbf_args())}")
            for key, value in sorted(child_environment(cluster).items()):
                if key.startswith("SUITE_") or key in NCCL_ENV:
                    print(f"  export {key}={shlex.quote(value)}")
            print(f"  {shlex.join(fake.mpirun_command(command or ['CMD'], args.mpirun_flag))}")
            return 0
        tools = find_tools(args.mpirun)
        with EmulatedCluster(tools, cluster) as ec:
            if args.check:
                print(f"ok: {cluster.label} built and removed ({cluster.describe()}, kernel "
                      f"{shaped_link.kernel_release()})")
                return 0
            cores = machine_cores()
            over = (f"; {cluster.ranks} ranks on {cores} cores of this machine: ranks share cores, "
                    f"waits and TCP's work compete with compute") if cluster.ranks > cores else ""
            say(f"{cluster.label}: {cluster.describe()}; namespaces {ec.base}-*{over}")
            rc = shaped_link.run_inside([], ec.mpirun_command(command, args.mpirun_flag),
                                        child_environment(cluster, ec.tc_readback))
            sent = ec.tbf_counters()
            say("bytes each node's NIC sent (tbf): " + ", ".join(f"cn{i} {b}" for i, b in enumerate(sent)))
            return rc
    except LinkError as err:
        print(f"error: emulated_cluster: {err}", file=sys.stderr)
        return 2
    except shaped_link.Interrupted as sig:
        say(f"interrupted by signal {sig.signum}; cluster removed")
        return 128 + sig.signum


if __name__ == "__main__":
    sys.exit(main())
