#!/usr/bin/env python3
"""Integration scenarios of the cluster emulated on one machine (scripts/envs/emulated_cluster.py):
nodes as network namespaces, shared memory inside a node, a tc-shaped NIC between them.

The links are measured with link_probe, the tests' own plain MPI_Sendrecv exchange, and which
path each pair took is read from Open MPI itself (its bml's "Using <btl> btl for send to" lines
at btl_base_verbose 100). Building a cluster needs root, ip, tc, unshare, mpirun and network namespaces: where any is
missing the scenarios that build one skip (exit 77) with a message, and where all are there a
cluster that does not build fails them; emulated_bad_input runs everywhere.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py

from run_scenario import Env, expect, run_cli  # noqa: E402
from scenarios_shaped import attr_str, check_refused_as_nobody  # noqa: E402
from timed_process import run_timed  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "envs" / "emulated_cluster.py"
SKIP = 77
NIC_MBPS = 125.0  # 1 Gbit/s, each way
PROBE_BYTES = 1 << 20


def ours(pid: int) -> list[str]:
    """The namespaces of the emulated_cluster.py process `pid` still present."""
    ip = shutil.which("ip")
    if ip is None:
        return []
    names = subprocess.run([ip, "netns", "list"], capture_output=True, text=True).stdout.split()
    return [n for n in names if n.startswith(f"suite-ec{pid}-")]


def agent_dirs(pid: int) -> list[Path]:
    return list(Path(os.environ.get("TMPDIR", "/tmp")).glob(f"suite-ec{pid}-*"))


def emulated(*args: str, env: dict | None = None, timeout: float = 180, cwd: Path | None = None,
             interrupt_after: float | None = None) -> subprocess.CompletedProcess:
    """Runs emulated_cluster.py; the result also has `left`: that invocation's namespaces and
    agent folders still present after it ended. interrupt_after: SIGINT after that many seconds."""
    cmd = [sys.executable, str(SCRIPT), *args]
    run_env = dict(os.environ)
    run_env.update(env or {})
    proc = run_timed(cmd, run_env, timeout, cwd, interrupt_after)
    proc.left = ours(proc.pid) + [str(p) for p in agent_dirs(proc.pid)]  # type: ignore[attr-defined]
    print(f"$ {' '.join(cmd)}\n-> exit {proc.returncode} in {proc.elapsed:.1f} s")
    return proc


def missing_prerequisite() -> str | None:
    """Why this machine cannot build an emulated cluster at all: not root, a tool missing, or
    network namespaces not allowed here (a container without the privilege); None where it has
    all it needs, so that a cluster that fails to build there is a failure, not a skip."""
    if os.geteuid() != 0:
        return "an emulated cluster needs root (network namespaces, veths, tc)"
    for tool in ("ip", "tc", "unshare", "mpirun"):
        if shutil.which(tool) is None:
            return f"an emulated cluster needs {tool}, not found on PATH"
    proc = subprocess.run([shutil.which("unshare"), "--net", "true"], capture_output=True, text=True,
                          timeout=30)
    if proc.returncode != 0:
        return f"network namespaces are not allowed here (unshare --net: {proc.stderr.strip()})"
    return None


def require_cluster() -> None:
    """Skips (exit 77) where a prerequisite is missing; elsewhere the cluster must build."""
    why = missing_prerequisite()
    if why is not None:
        print(f"SKIP: {why}")
        raise SystemExit(SKIP)
    proc = emulated("--nodes", "2", "--ranks-per-node", "1", "--nic", "1gbit", "--check", timeout=60)
    expect(proc.returncode == 0 and not proc.left,
           f"root, ip, tc, unshare and network namespaces are here, yet the cluster did not build "
           f"(exit {proc.returncode}, left {proc.left})", proc)


def probe(env: Env, nodes: int, per_node: int, pairs: str, verbose: bool = False, size: int = PROBE_BYTES
          ) -> tuple[list[str], dict[tuple[int, int], float], subprocess.CompletedProcess]:
    """link_probe on the cluster: the ranks' host names and each pair's best rate (MB/s, each
    way, of 16 exchanges of `size` bytes, 1 MiB by default, after 4 more)."""
    extra = {"OMPI_MCA_btl_base_verbose": "100"} if verbose else {}
    proc = emulated("--nodes", str(nodes), "--ranks-per-node", str(per_node), "--nic", "1gbit", "--",
                    str(env.bin_dir / "link_probe"), "--bytes", str(size), "--reps", "16",
                    "--warmup", "4", "--pairs", pairs, env=extra, cwd=env.workdir)
    expect(proc.returncode == 0, f"link_probe on {nodes} x {per_node}: exit {proc.returncode}", proc)
    expect(not proc.left, f"left behind: {proc.left}", proc)
    hosts = next(l.split()[1:] for l in proc.stdout.splitlines() if l.startswith("hosts:"))
    rates = {}
    for line in proc.stdout.splitlines():
        m = re.match(r"pair (\d+) (\d+) bytes \d+ best_s \S+ median_s (\S+) rate_MBps (\S+)", line)
        if m:
            rates[(int(m.group(1)), int(m.group(2)))] = float(m.group(4))
            median = size / float(m.group(3)) / 1e6
            print(f"  pair {m.group(1)}-{m.group(2)}: best {float(m.group(4)):.1f} MB/s, median "
                  f"{median:.1f} MB/s each way")
    return hosts, rates, proc


def scenario_bad_input(env: Env) -> None:
    """Bad counts and rates, a bad label, no command, a command not found: one `error:` line,
    exit 2, nothing left; as root also not root (run as nobody), a kernel without netem when a
    latency is asked for, and a benchmark failing inside (its exit status, nothing left)."""
    base = ["--ranks-per-node", "2", "--nic", "1gbit"]
    cases = {
        "no nodes": (["--nodes", "0", *base, "--", "true"], "--nodes 0"),
        "too many nodes": (["--nodes", "17", *base, "--", "true"], "between 1 and 16"),
        "rate 0": (["--nodes", "2", "--ranks-per-node", "2", "--nic", "0gbit", "--", "true"], "positive"),
        "rate unparsable": (["--nodes", "2", "--ranks-per-node", "2", "--nic", "fast", "--", "true"],
                            "tc's units"),
        "bad label": (["--link", "emulated-2by2-1g", "--", "true"], "emulated-<nodes>x"),
        "label and flags": (["--link", "emulated-2x2-1g", "--nodes", "2", "--", "true"], "whole cluster"),
        "no command": (["--nodes", "2", *base], "no command"),
        "command not found": (["--nodes", "2", *base, "--", "no-such-benchmark"], "command not found"),
    }
    for what, (args, needle) in cases.items():
        proc = emulated(*args, cwd=env.workdir, timeout=60)
        expect(proc.returncode == 2, f"{what}: exit {proc.returncode}, expected 2", proc)
        expect(proc.stderr.count("error:") == 1 and needle in proc.stderr,
               f"{what}: expected one error naming {needle!r}", proc)
        expect(not proc.left, f"{what}: left behind: {proc.left}")
        print(f"  ok: {what}")
    label = emulated("--nodes", "4", "--ranks-per-node", "2", "--nic", "500mbit", "--label")
    expect(label.stdout.strip() == "emulated-4x2-500mbit", f"label {label.stdout!r}", label)
    if os.geteuid() != 0:
        proc = emulated("--nodes", "2", *base, "--", "true", timeout=60)
        expect(proc.returncode == 2 and "needs root" in proc.stderr, "not root: not refused", proc)
        return
    check_refused_as_nobody((SCRIPT, REPO / "scripts" / "envs" / "shaped_link.py"),
                            ("--nodes", "2", *base, "--", "true"))
    if shutil.which("ip") and shutil.which("tc") and shutil.which("unshare"):
        proc = emulated("--nodes", "2", *base, "--nic-latency", "50us", "--", "true", timeout=60)
        if proc.returncode != 0:
            expect(proc.returncode == 2 and proc.stderr.count("error:") == 1 and "sch_netem" in proc.stderr,
                   "a latency: neither run nor refused for want of netem", proc)
            print("  ok: no netem in this kernel, a latency refused")
        expect(not proc.left, f"latency: left behind: {proc.left}")
        proc = emulated("--nodes", "2", *base, "--", str(env.bin_dir / "moe"), "--backend", "cpu",
                        "--experts", "3", "--out", str(env.workdir / "bad.h5"), cwd=env.workdir)
        expect(proc.returncode == 2 and "error" in proc.stderr, f"a failing benchmark: exit {proc.returncode}",
               proc)
        expect(not proc.left and not (env.workdir / "bad.h5").exists(), f"left behind: {proc.left}", proc)
        print("  ok: a benchmark failing inside: its exit status 2, nothing left")


def scenario_two_nodes(env: Env) -> None:
    """2 nodes x 1 rank at 1 Gbit/s: the pair's best exchange within 15% of the NIC rate each way,
    the ranks on hosts cn0 and cn1."""
    require_cluster()
    hosts, rates, proc = probe(env, 2, 1, "0:1")
    expect(hosts == ["cn0", "cn1"], f"host names {hosts}", proc)
    rate = rates[(0, 1)]
    expect(0.85 * NIC_MBPS <= rate <= 1.15 * NIC_MBPS,
           f"across nodes {rate:.1f} MB/s each way, not within 15% of the NIC's {NIC_MBPS:g}", proc)
    print(f"across the NIC: {rate:.1f} MB/s each way ({rate / NIC_MBPS:.0%} of 1 Gbit/s)")


def scenario_2x2(env: Env) -> None:
    """2 nodes x 2 ranks: inside a node far above the NIC, across it within 15% of it; Open MPI
    says each pair of one node used shared memory (vader) and each across nodes TCP; and a suite
    benchmark's results file records the cluster (link label, link_env, host names)."""
    require_cluster()
    hosts, rates, proc = probe(env, 2, 2, "0:1,0:2,1:3", verbose=True)
    expect(hosts == ["cn0", "cn0", "cn1", "cn1"], f"host names {hosts}", proc)
    inside, across = rates[(0, 1)], min(rates[(0, 2)], rates[(1, 3)])
    expect(inside >= 4 * NIC_MBPS, f"inside a node only {inside:.1f} MB/s", proc)
    expect(across >= 0.85 * NIC_MBPS and max(rates[(0, 2)], rates[(1, 3)]) <= 1.15 * NIC_MBPS,
           f"across nodes {rates[(0, 2)]:.1f} and {rates[(1, 3)]:.1f} MB/s, not within 15% of "
           f"{NIC_MBPS:g}", proc)
    # Open MPI's own word on each pair's path: "[host:pid] mca: bml: Using vader btl for send to
    # [[job,1],rank] on node ...".
    used = set()
    for m in re.finditer(r"\[(\S+):\d+\] mca: bml: Using (\w+) btl for send to \[\[\d+,\d+\],(\d+)\]",
                         proc.stderr):
        host, btl, peer = m.group(1), m.group(2), int(m.group(3))
        if btl == "self":
            continue
        want = "vader" if hosts[peer] == host else "tcp"
        expect(btl == want, f"{host} to rank {peer} ({hosts[peer]}) used {btl}, expected {want}", proc)
        used.add(btl)
    expect(used == {"vader", "tcp"}, f"Open MPI named the btls {sorted(used)}", proc)
    print(f"inside a node {inside:.0f} MB/s over vader; across {across:.1f} MB/s over tcp")

    out = env.workdir / "moe.h5"
    run = emulated("--nodes", "2", "--ranks-per-node", "2", "--nic", "1gbit", "--",
                   str(env.bin_dir / "moe"), "--backend", "cpu", "--tokens", "64", "--hidden", "64",
                   "--ffn-hidden", "64", "--experts", "8", "--top-k", "2", "--dispatch", "flat,hierarchical",
                   "--iters", "2", "--warmup", "1", "--out", str(out), cwd=env.workdir)
    expect(run.returncode == 0, "moe on the emulated cluster", run)
    expect("4 ranks on" in run.stderr or os.cpu_count() >= 4, "ranks outnumber cores, not said", run)
    with h5py.File(out) as f:
        a = f.attrs
        expect(attr_str(a["link"]) == "emulated-2x2-1g", f"link {attr_str(a['link'])}")
        link_env = attr_str(a["link_env"])
        for needle in ("nodes=2", "ranks_per_node=2", "nic=1gbit", "kernel=", "OMPI_MCA_btl=self,vader,tcp"):
            expect(needle in link_env, f"link_env lacks {needle}: {link_env}")
        expect(attr_str(a["hostnames"]).replace(" ", "").split(",") == ["cn0", "cn1"],
               f"hostnames {attr_str(a['hostnames'])}")
    print("the results file records the cluster")


def nic_bytes(proc: subprocess.CompletedProcess) -> list[int]:
    """What each node's NIC sent over the run, by tc's own counter (emulated_cluster.py's line)."""
    m = re.search(r"bytes each node's NIC sent \(tbf\): (.*)", proc.stderr)
    expect(m is not None, "no tbf byte count", proc)
    return [int(x) for x in re.findall(r"cn\d+ (\d+)", m.group(1))]


def scenario_placement(env: Env) -> None:
    """sp_tp's TP group (2 consecutive ranks) on 2 nodes x 2: inside a node as Open MPI places
    ranks by default, across them with --map-by node. The NICs' own counters say which: with TP
    inside, next to nothing crosses; across, each node's NIC carries at least what its two ranks'
    collectives sent (the run's payload count; more where Open MPI's algorithm moves more than
    the payload: its reduce-scatter of 2 ranks sends the whole buffer one way)."""
    require_cluster()
    sent = {}
    for map_by in ("slot", "node"):
        out = env.workdir / f"layer_{map_by}.h5"
        run = emulated("--nodes", "2", "--ranks-per-node", "2", "--nic", "1gbit", "--mpirun-flag=--map-by",
                       f"--mpirun-flag={map_by}", "--", str(env.bin_dir / "sp_tp"), "--backend", "cpu", "--mode",
                       "layer", "--tp", "2", "--seq", "256", "--hidden", "256", "--heads", "4", "--variants",
                       "tp_sp", "--pass", "fwd", "--iters", "2", "--warmup", "1", "--check", "0", "--out", str(out),
                       cwd=env.workdir)
        expect(run.returncode == 0 and not run.left, f"sp_tp on the emulated cluster, --map-by {map_by}", run)
        with h5py.File(out) as f:
            case = next(iter(f["sp_tp"].values()))
            payload = float(case.attrs["payload_bytes_sent_case"])  # a rank's, over every step
        sent[map_by] = nic_bytes(run)
        print(f"  --map-by {map_by}: NICs sent {sent[map_by]} bytes; a rank's collectives {payload:.0f}")
    expect(payload > 0, "no collective bytes counted")
    for node, b in enumerate(sent["node"]):
        expect(b >= 2 * payload, f"TP across: cn{node}'s NIC sent {b} bytes for 2 ranks' {payload:.0f} each")
    expect(max(sent["slot"]) < 0.1 * min(sent["node"]), f"TP inside a node: NICs sent {sent['slot']}")
    print("the TP group's placement is what --map-by says, by the NICs' counters")


def scenario_two_tier_table(env: Env) -> None:
    """two_tier_table.py's sp_tp rows (TP+SP layer, t 2, s 1024, h 512, fp32, forward), each
    three ways. The model's bytes across the NIC are a hand count: 2 all-gathers and 2
    reduce-scatters, each sending (t-1)/t of s h 4 bytes, 4 MiB a step with TP across nodes and
    none with TP inside. The emulated NICs' counter carries at least that across and next to
    nothing inside; SMPI's hostfile puts the TP pair on one node or on two, and its simulated
    collectives take longer across (a quarter of the NIC's time at least). SMPI's compute is
    modeled here, so its times do not depend on this host's speed or load; no time of the
    emulated cluster is asserted."""
    require_cluster()
    sim_build = REPO / "build-sim"
    if not (sim_build / "bin" / "sp_tp").exists():
        print(f"SKIP: no SMPI build at {sim_build} (make sim)")
        raise SystemExit(SKIP)
    out = env.workdir / "two_tier"
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "studies" / "two_tier_table.py"), "--only", "sp_tp",
                           "--out-dir", str(out), "--build", str(env.bin_dir.parent), "--sim-build", str(sim_build),
                           "--sim-flops", "1e10"],
                          capture_output=True, text=True, timeout=600)
    expect(proc.returncode == 0, "two_tier_table.py --only sp_tp", proc)
    rows = {}
    for line in (out / "two_tier.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0].startswith("sp_tp layer"):
            rows["across" if "across" in cells[0] else "inside"] = cells
    expect(set(rows) == {"inside", "across"}, f"rows {list(rows)}", proc)
    hand = 4 * (2 - 1) / 2 * 1024 * 512 * 4 / 2**20  # MiB a rank sends per step
    nic_ms = hand * 2**20 / 125e6 * 1e3
    expect(rows["across"][1] == f"{hand:.2f} MiB, {nic_ms:.1f} ms" and rows["inside"][1].startswith("0.00 MiB"),
           f"model column {rows['across'][1]!r} / {rows['inside'][1]!r}, hand count {hand:.2f} MiB", proc)
    tbf = {k: float(v[4].split("/")[0]) for k, v in rows.items()}
    expect(tbf["across"] >= hand and tbf["inside"] < 0.05, f"NICs' counter {tbf} MiB/rank/step", proc)
    stems = {"inside": "sp_tp_layer_tp2_TP_SP_TP_inside_the_node", "across": "sp_tp_layer_tp2_TP_SP_TP_across_nodes"}
    hosts = {k: (out / f"{v}_smpi.hosts").read_text().split() for k, v in stems.items()}
    expect(hosts["inside"] == ["node0-gpu0", "node0-gpu1", "node1-gpu0", "node1-gpu1"]
           and hosts["across"] == ["node0-gpu0", "node1-gpu0", "node0-gpu1", "node1-gpu1"], f"SMPI hosts {hosts}")
    comm = {}
    for k, stem in stems.items():
        with h5py.File(out / f"{stem}_smpi.h5") as f:
            comm[k] = float(next(iter(f["sp_tp"].values())).attrs["phase_comm_median_s"]) * 1e3
    expect(comm["across"] - comm["inside"] >= 0.25 * nic_ms, f"SMPI comm phase {comm} ms", proc)
    print((out / "two_tier.md").read_text())
    print(f"SMPI comm phase: inside {comm['inside']:.1f} ms, across {comm['across']:.1f} ms (NIC time {nic_ms:.1f})")


def scenario_interrupted(env: Env) -> None:
    """Two clusters up at once do not collide; Ctrl-C in a run ends it with 128 + SIGINT and
    removes every namespace, veth and the agent's folder."""
    require_cluster()
    args = ["--nodes", "2", "--ranks-per-node", "1", "--nic", "1gbit", "--"]
    first = subprocess.Popen([sys.executable, str(SCRIPT), *args, "sleep", "6"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    time.sleep(2)
    second = emulated(*args, "hostname", timeout=120)
    out, err = first.communicate(timeout=120)
    expect(second.returncode == 0 and sorted(second.stdout.split()) == ["cn0", "cn1"],
           f"a second cluster beside the first: exit {second.returncode}", second)
    expect(first.returncode == 0, f"the first: exit {first.returncode}: {err}")
    expect(not ours(first.pid) and not second.left, "left behind after two at once")
    print("  ok: two clusters at once")
    proc = emulated(*args, "sleep", "60", interrupt_after=4.0, timeout=120)
    expect(proc.returncode == 128 + signal.SIGINT, f"interrupted: exit {proc.returncode}", proc)
    expect(proc.elapsed < 40, f"interrupted run took {proc.elapsed:.0f} s to end", proc)
    expect(not proc.left, f"left behind after Ctrl-C: {proc.left}", proc)
    print("  ok: Ctrl-C removes the cluster")


SCENARIOS = {
    "emulated_bad_input": scenario_bad_input,
    "emulated_two_nodes": scenario_two_nodes,
    "emulated_2x2": scenario_2x2,
    "emulated_interrupted": scenario_interrupted,
    "emulated_placement": scenario_placement,
    "emulated_two_tier_table": scenario_two_tier_table,
}

if __name__ == "__main__":
    run_cli(SCENARIOS, __doc__)
