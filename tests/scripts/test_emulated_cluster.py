"""emulated_cluster.py without root: labels and their parsing, the CPUs each node gets, what the
results record (link_env), the mpirun line it builds (one daemon per node through the agent,
shared memory and TCP on the bridge's subnet), and bad input: one `error:` line, exit 2."""

from __future__ import annotations

import pytest

from scripts.envs import emulated_cluster as ec
from scripts.envs.shaped_link import LinkError
from synthetic_results import run_script


@pytest.mark.parametrize("label, nodes, per_node, bits, lat", [
    ("emulated-2x2-1g", 2, 2, 10**9, 0), ("emulated-4x1-500mbit", 4, 1, 5 * 10**8, 0),
    ("emulated-2x8-10g-50us", 2, 8, 10**10, 50), ("emulated-16x2-2500mbit", 16, 2, 25 * 10**8, 0),
])
def test_labels_round_trip(label, nodes, per_node, bits, lat):
    c = ec.parse_label(label)
    assert (c.nodes, c.ranks_per_node, c.rate_bit, c.latency_us) == (nodes, per_node, bits, lat)
    assert c.label == label and c.ranks == nodes * per_node


@pytest.mark.parametrize("label", ["emulated-2x2", "emulated-0x2-1g", "emulated-17x1-1g", "emulated-2x0-1g",
                                   "emulated-2x2-0gbit", "emulated-2x2-fast", "shaped-1g", "emulated-2x2-1g-5ms"])
def test_bad_labels_are_refused(label):
    with pytest.raises(LinkError):
        ec.parse_label(label)


def test_nodes_get_their_own_cpus_where_there_are_enough(monkeypatch):
    monkeypatch.setattr(ec.os, "sched_getaffinity", lambda _pid: {0, 1, 2, 3, 4, 5, 6, 7})
    assert ec.node_cpus(2) == ["0,1,2,3", "4,5,6,7"]
    assert ec.node_cpus(3) == ["0,1", "2,3", "4,5"]  # the two left over stay unused
    assert ec.node_cpus(9) == ["0,1,2,3,4,5,6,7"] * 9  # fewer CPUs than nodes: all for each


def test_link_env_records_the_topology():
    env = ec.link_env(ec.Cluster(2, 2, 10**9))
    for needle in ("nodes=2", "ranks_per_node=2", "nic=1gbit", "burst=20000B", "kernel=", "machine_cores=",
                   "OMPI_MCA_btl=self,vader,tcp", "OMPI_MCA_btl_tcp_links=4"):
        assert needle in env


def test_mpirun_line_has_one_daemon_per_node():
    cluster = ec.EmulatedCluster(ec.Tools("ip", "tc", "unshare", "mpirun"), ec.Cluster(3, 2, 10**9))
    cluster.base, cluster.agent_dir = "suite-ec1", "/tmp/x"
    cmd = cluster.mpirun_command(["bench", "--flag"], ["--mca", "x", "y"])
    assert cmd[:4] == ["ip", "netns", "exec", "suite-ec1-l"]
    assert cmd[cmd.index("-np") + 1] == "6"
    assert cmd[cmd.index("--host") + 1] == "10.231.0.1:2,10.231.0.2:2,10.231.0.3:2"
    assert cmd[cmd.index("plm_rsh_agent") + 1] == "/tmp/x/agent.sh"
    assert cmd[-5:] == ["--mca", "x", "y", "bench", "--flag"]


def test_dry_run_needs_no_root_and_names_everything():
    proc = run_script("emulated_cluster.py", "--nodes", "2", "--ranks-per-node", "2", "--nic", "1gbit",
                      "--dry-run", "--", "bench")
    assert proc.returncode == 0, proc.stderr
    for needle in ("emulated-2x2-1g", "-br (bridge br0)", "-n0", "-n1", "tbf rate 1000000000bit",
                   "SUITE_LINK_LABEL=emulated-2x2-1g", "--host 10.231.0.1:2,10.231.0.2:2", "bench"):
        assert needle in proc.stdout, needle


@pytest.mark.parametrize("args, needle", [
    (["--nodes", "0", "--ranks-per-node", "2", "--nic", "1gbit", "--", "true"], "--nodes 0"),
    (["--nodes", "2", "--ranks-per-node", "2", "--nic", "0mbit", "--", "true"], "positive"),
    (["--nodes", "2", "--ranks-per-node", "2", "--", "true"], "give --nodes"),
    (["--link", "emulated-2x2-1g", "--nic", "1gbit", "--", "true"], "whole cluster"),
    (["--nodes", "2", "--ranks-per-node", "2", "--nic", "1gbit", "--nic-latency", "5", "--", "true"], "latency"),
])
def test_bad_input_is_one_error(args, needle):
    proc = run_script("emulated_cluster.py", *args)
    assert proc.returncode == 2 and proc.stderr.count("error:") == 1 and needle in proc.stderr, proc.stderr


def test_help_explains_every_flag():
    proc = run_script("emulated_cluster.py", "--help")
    assert proc.returncode == 0
    for flag in ("--nodes", "--ranks-per-node", "--nic", "--nic-latency", "--link", "--mpirun", "--mpirun-flag",
                 "--dry-run", "--check", "--label", "--cleanup-stale", "--quiet"):
        assert flag in proc.stdout, flag
