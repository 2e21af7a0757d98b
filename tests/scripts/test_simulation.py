"""Simulated clusters, the parts that need no SimGrid: platform presets and files, simulate.py's
refusals, the ring crossing, a simulated system kept apart from measured ones in the baseline
registry, compare.py and plot titles, and sweep.py --simulate's plan."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from scripts.results import baselines
from scripts.envs import sim_platform as sp
from scripts.studies.ring_crossing import crossing
from scripts.results.suite_results import read_results
from synthetic_results import ring_cases, run_script, sp_tp_cases

SIM_ATTRS = {"simulated": 1, "sim_platform": "flat", "sim_compute_mode": "executed",
             "sim_platform_detail": "flat: 4 hosts", "sim_flops": float("nan"),
             "smpi_version": "SimGrid 3.32.0"}


def _parse(p: sp.Platform) -> ET.Element:
    text = sp.platform_xml(p)
    return ET.fromstring(text[text.index("<platform"):])  # the DOCTYPE needs no network


def test_presets_and_their_hosts():
    assert set(sp.PRESETS) >= {"flat", "node8", "fattree"}
    assert sp.make_platform("node8").hosts == 8
    ft = sp.make_platform("fattree")
    assert (ft.nodes, ft.gpus_per_node, ft.hosts) == (128, 8, 1024)
    assert ft.host_names()[:2] == ["node0-gpu0", "node0-gpu1"] and ft.host_names()[-1] == "node127-gpu7"
    assert sp.make_platform("flat", nodes=6).host_names() == [f"host{i}" for i in range(6)]


def test_every_link_preset_of_the_suite_has_a_simulated_link():
    import json
    names = json.loads(sp.LINK_PRESETS_FILE.read_text())["presets"]
    assert set(names) <= set(sp.LINKS)
    assert sp.known_links() == list(names)


def test_fattree_file_routes_nvlink_inside_and_the_gpus_nic_between_nodes():
    p = sp.make_platform("fattree", nodes=8)
    root = _parse(p)
    world = root.find("zone")
    nodes = world.findall("zone")
    assert len(nodes) == 8 and len(root.findall(".//host")) == 64
    assert len(world.findall("zoneRoute")) == 8 * 7
    node0 = nodes[0]
    routes = {(r.get("src"), r.get("dst")): [l.get("id") for l in r] for r in node0.findall("route")}
    assert routes[("node0-gpu0", "node0-gpu3")] == ["node0-gpu0-nvl", "node0-gpu3-nvl"]
    assert routes[("node0-gpu5", "node0-gw")] == ["node0-gpu5-nic"]  # the GPU's own NIC
    bw = {l.get("id"): l.get("bandwidth") for l in root.iter("link")}
    assert bw["node0-gpu0-nvl"] == "4.5e+11Bps" and bw["node0-gpu0-nic"] == "5e+10Bps"
    # leaves of 4 nodes: node0 -> node1 stays in its leaf, node0 -> node5 crosses the spine
    zr = {(z.get("src"), z.get("dst")): [l.get("id") for l in z] for z in world.findall("zoneRoute")}
    assert zr[("node0", "node1")] == ["node0-node1"]  # the leaf switch's hop, a link per pair
    assert zr[("node0", "node5")] == ["leaf0-up", "leaf1-up"]
    lat = {l.get("id"): l.get("latency") for l in root.iter("link")}
    assert lat["node0-node1"] == "5e-07s" and lat["leaf0-up"] == "5e-07s"


def test_p2p_off_links_take_the_nic_inside_a_node_and_overrides_apply():
    p = sp.make_platform("node8", link="net")
    routes = {(r.get("src"), r.get("dst")): [l.get("id") for l in r] for r in _parse(p).iter("route")}
    assert routes[("node0-gpu0", "node0-gpu1")] == ["node0-gpu0-nic", "node0-gpu1-nic"]
    flat = sp.make_platform("flat", bw=1e8, lat=2e-6, speed=3e9)
    cluster = _parse(flat).find("cluster")
    assert (cluster.get("bw"), cluster.get("lat"), cluster.get("speed")) == ("1e+08Bps", "2e-06s", "3e+09f")
    assert "100000000 B/s" in flat.detail() or "1e+08 B/s" in flat.detail()


@pytest.mark.parametrize("kwargs, needle", [
    ({"preset": "torus"}, "unknown platform preset"),
    ({"preset": "fattree", "link": "carrier-pigeon"}, "no simulated link"),
    ({"preset": "node8", "nodes": 2}, "one node"),
    ({"preset": "flat", "bw": -1.0}, "--bw"),
    ({"preset": "fattree", "nodes": 0}, "--nodes"),
])
def test_bad_platforms_are_refused(kwargs, needle):
    with pytest.raises(sp.PlatformError, match=needle):
        sp.make_platform(**kwargs)


def test_write_refuses_more_ranks_than_hosts(tmp_path):
    p = sp.make_platform("node8")
    xml, hosts = sp.write(p, 5, tmp_path, "run")
    assert hosts.read_text().split() == [f"node0-gpu{g}" for g in range(5)] and xml.exists()
    with pytest.raises(sp.PlatformError, match="9 ranks but platform node8 has 8 hosts"):
        sp.write(p, 9, tmp_path, "big")


def test_map_by_node_deals_ranks_round_robin_over_the_nodes(tmp_path):
    p = sp.make_platform("fattree", nodes=2, gpus_per_node=2)
    _, hosts = sp.write(p, 4, tmp_path, "slot")
    assert hosts.read_text().split() == ["node0-gpu0", "node0-gpu1", "node1-gpu0", "node1-gpu1"]
    _, hosts = sp.write(p, 4, tmp_path, "node", map_by="node")
    assert hosts.read_text().split() == ["node0-gpu0", "node1-gpu0", "node0-gpu1", "node1-gpu1"]
    three = sp.rank_hosts(sp.make_platform("fattree", nodes=3, gpus_per_node=2), 5, "node")
    assert three == ["node0-gpu0", "node1-gpu0", "node2-gpu0", "node0-gpu1", "node1-gpu1"]
    with pytest.raises(sp.PlatformError, match="--map-by 'core'"):
        sp.rank_hosts(p, 4, "core")


@pytest.mark.parametrize("args, needle", [
    (["--platform", "torus", "--ranks", "4"], "unknown platform preset"),
    (["--platform", "flat", "--ranks", "5"], "5 ranks but platform flat has 4 hosts"),
    (["--platform", "flat", "--ranks", "4", "--sim-flops", "0"], "--sim-flops"),
    (["--platform", "flat", "--ranks", "4", "--sim-flops", "-3"], "--sim-flops"),
    (["--platform", "flat", "--ranks", "4", "--sim-flops", "nan"], "--sim-flops"),
    (["--platform", "fattree", "--ranks", "8", "--link", "bogus"], "no simulated link"),
])
def test_simulate_bad_input_is_one_error_exit_2_and_no_file(tmp_path, args, needle):
    out = tmp_path / "r.h5"
    proc = run_script("simulate.py", "ring_attention", *args, "--out", out,
                      "--build", tmp_path / "no-build", "--", "--block", "64")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("error:") == 1 and needle in proc.stderr, proc.stderr
    assert not list(tmp_path.iterdir())  # no results, platform or hostfile


def test_simulate_needs_the_smpi_build(tmp_path):
    proc = run_script("simulate.py", "moe", "--platform", "flat", "--ranks", "2",
                      "--build", tmp_path, "--out", tmp_path / "r.h5")
    assert proc.returncode == 2 and "make sim" in proc.stderr


def test_crossing_is_where_overlapped_meets_compute():
    c = [64, 128, 192, 256, 320]
    comp = np.array(c, float) ** 2
    # transfer-bound left of c* = 200 (overlapped = transfer, linear in c), compute right of it
    over = np.maximum(comp, 200.0 * np.array(c, float))
    x = crossing(c, over, comp, tol=0.1)
    assert x is not None and 170 < x < 200
    assert crossing(c, comp, comp) is None  # hidden from the first block size
    assert crossing(c, 3 * comp, comp) is None  # never hidden


def test_simulated_runs_are_their_own_system(results_writer, tmp_path):
    def run(name, attrs=None):
        path = results_writer(name, "ring_attention", ring_cases(4, world_size=4), file_attrs=attrs)
        return path, read_results(path, load_datasets=False, warn=False)

    measured, m = run("measured.h5")
    simulated, s = run("sim.h5", SIM_ATTRS)
    _, other = run("sim2.h5", {**SIM_ATTRS, "sim_platform_detail": "flat: 8 hosts"})
    assert baselines.system_key(s).startswith(baselines.system_key(m) + "_sim-flat-executed-")
    assert baselines.system_key(other) != baselines.system_key(s)  # other numbers, other system
    registry = tmp_path / "reg"
    assert run_script("baselines.py", "add", measured, "--registry", registry).returncode == 0
    # only a measured baseline: a simulated run has none (compare says so), never the measured one
    assert baselines.find_baseline(s, registry) is None
    proc = run_script("compare.py", simulated, "--registry", registry, "--require-baseline")
    assert proc.returncode == 2 and "no baseline" in proc.stdout
    assert run_script("baselines.py", "add", simulated, "--registry", registry).returncode == 0
    _, m2 = run("measured2.h5")
    _, s2 = run("sim3.h5", SIM_ATTRS)
    assert baselines.find_baseline(m2, registry).results.attrs.get("simulated") is None
    assert baselines.find_baseline(s2, registry).results.attrs.get("simulated") == 1


def test_compare_refuses_a_simulation_against_a_measurement(results_writer):
    measured = results_writer("m.h5", "sp_tp", sp_tp_cases())
    simulated = results_writer("s.h5", "sp_tp", sp_tp_cases(), file_attrs=SIM_ATTRS)
    for pair in ((measured, simulated), (simulated, measured)):
        proc = run_script("compare.py", *pair)
        assert proc.returncode == 2 and proc.stderr.count("error:") == 1
        assert "never compared with a measurement" in proc.stderr
    assert run_script("compare.py", simulated, simulated).returncode == 0


def test_titles_say_simulated(results_writer, tmp_path):
    res = read_results(results_writer("s.h5", "sp_tp", sp_tp_cases(), file_attrs=SIM_ATTRS))
    assert res.describe().startswith("SIMULATED on flat (executed compute) | sp_tp")
    plots = tmp_path / "plots"
    assert run_script("plot.py", res.path, "--out", plots).returncode == 0
    assert list(plots.glob("*.png"))


def test_sweep_simulate_plans_one_simulation_per_cell(tmp_path):
    proc = run_script("sweep.py", "ring_attention", "--values", "32,64", "--link", "nvlink,ib",
                      "--nodes", "1,2", "--simulate", "--dry-run", "--model", tmp_path / "none",
                      "--sweep-dir", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    lines = [l for l in proc.stdout.splitlines() if "scripts.envs.simulate" in l]
    assert len(lines) == 8 and "8 simulation(s)" in proc.stdout and "executed compute" in proc.stdout
    one = next(l for l in lines if "--nodes 2" in l and "--link ib" in l and "block32" in l)
    assert "--platform fattree" in one and "--ranks 16" in one and "-- --block 32" in one
    assert "--sim-flops" not in one and "--iters 3" in one  # the job script's CPU sizes
    node = next(l for l in lines if "--platform node8" in l)
    assert "--ranks 8" in node
    modeled = run_script("sweep.py", "moe", "--values", "4K", "--nodes", "2", "--simulate",
                         "--dry-run", "-F", "4e14", "--model", tmp_path / "none")
    assert modeled.returncode == 0, modeled.stderr
    line = next(l for l in modeled.stdout.splitlines() if "scripts.envs.simulate" in l)
    assert "--sim-flops 400000000000000.0" in line and "--hidden 4096" in line  # GPU sizes
    assert not (tmp_path / "out").exists()
    bad = run_script("sweep.py", "ring_attention", "--values", "32", "--link", "pcie-host,nope",
                     "--simulate", "--dry-run", "--model", tmp_path / "none")
    assert bad.returncode == 2 and "nope" in bad.stderr


def test_alpha_beta_pairs_near_ranks_for_the_all_reduce_and_far_ones_for_sp():
    from scripts.envs import sim_alpha_beta as ab
    p = sp.make_platform("fattree", nodes=2)
    lk = p.links()
    n = 16e6
    inside = range(0, 8)  # one node: every pair on NVLink
    nvl = sum(2 * lk.intra_lat + n / 2**j / lk.intra_bw for j in (1, 2, 3))
    assert ab.predict(p, "allreduce", n, inside) == pytest.approx(2 * nvl)
    assert ab.predict(p, "rs_ag", n, inside) == pytest.approx(2 * nvl)
    both = range(0, 16)  # two nodes of one leaf: the distance-8 pair crosses the NICs
    nic = 2 * lk.net_lat + ab.LEAF_LAT
    ar = 2 * (sum(2 * lk.intra_lat + n / 2**j / lk.intra_bw for j in (1, 2, 3)) + nic + n / 16 / lk.net_bw)
    sp_ = 2 * (nic + n / 2 / lk.net_bw + sum(2 * lk.intra_lat + n / 2**j / lk.intra_bw for j in (2, 3, 4)))
    assert ab.predict(p, "allreduce", n, both) == pytest.approx(ar)
    assert ab.predict(p, "rs_ag", n, both) == pytest.approx(sp_)
    with pytest.raises(ValueError):
        ab.predict(p, "allreduce", n, range(0, 6))


def test_history_gives_a_simulated_run_its_own_line(results_writer, tmp_path):
    results_writer("measured.h5", "sp_tp", sp_tp_cases(), created_utc="2025-01-01T08:00:00Z")
    results_writer("simulated.h5", "sp_tp", sp_tp_cases(scale=0.5), file_attrs=SIM_ATTRS,
                   created_utc="2025-01-02T08:00:00Z")
    proc = run_script("history.py", tmp_path, "--case", "allreduce_fp32_n1024$")
    assert proc.returncode == 0, proc.stderr
    systems = [l.split()[1] for l in proc.stdout.splitlines() if l.strip().startswith("system ")]
    assert len(systems) == 2 and sum("_sim-flat-executed-" in s for s in systems) == 1
    assert "-50.0%" not in proc.stdout  # the simulated run is not a change of the measured one


def test_the_demo_sweeps_from_a_quarter_to_four_times_c_star():
    from scripts.envs import sim_ring_demo
    for c_star in (137.0, 215.0, 469.0, 2000.0):
        blocks = sim_ring_demo.blocks_around(c_star, 8)
        assert blocks == sorted(set(blocks)) and all(b % 16 == 0 and b >= 16 for b in blocks)
        assert abs(blocks[0] - c_star / 4) <= 8 and abs(blocks[-1] - 4 * c_star) <= 8
        assert len(blocks) >= 6


def test_peak_memory_counts_shared_pages_once_in_pss(tmp_path):
    """A child that maps one 64 MiB shared file four times and touches it: RSS counts it four
    times, PSS once (what modeled compute's placeholders look like to the kernel)."""
    import subprocess
    import sys
    from scripts.results import process_memory
    code = ("import mmap,os,sys,time\n"
            "fd=os.open(sys.argv[1],os.O_RDWR|os.O_CREAT); os.ftruncate(fd,64<<20)\n"
            "maps=[mmap.mmap(fd,64<<20) for _ in range(4)]\n"
            "for m in maps:\n"
            "  for i in range(0,64<<20,4096): m[i]\n"
            "print('ready',flush=True); time.sleep(30)\n")
    with subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "block")],
                          stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout.readline().strip() == "ready"
        peak = process_memory.PeakMemory(proc.pid)
        peak.sample()
        proc.kill()
    assert peak.peak_rss >= 4 * (60 << 20)
    assert (60 << 20) <= peak.peak_pss < 2 * (64 << 20)


def test_peak_memory_skips_a_process_number_taken_by_another(tmp_path):
    """A descendant is counted only while its parent is still the one that listed it: a number
    freed and handed to an unrelated process (PID reuse) reads as nothing. The parent is read
    past a command name that holds spaces and parentheses."""
    import os
    import subprocess
    import sys
    from scripts.results import process_memory
    code = ("import subprocess,sys,time\n"
            "open('/proc/self/comm','w').write('a) b (c')\n"
            "c=subprocess.Popen([sys.executable,'-c','import time; b=bytearray(32<<20); print(1,flush=True); time.sleep(30)'],"
            "stdout=subprocess.PIPE,text=True)\n"
            "c.stdout.readline(); print(c.pid,flush=True); time.sleep(30)\n")
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) as proc:
        child = int(proc.stdout.readline())
        try:
            assert process_memory.parent(proc.pid) == os.getpid()
            assert process_memory.parent(child) == proc.pid
            assert process_memory.tree(proc.pid) == [(proc.pid, -1), (child, proc.pid)]
            assert process_memory.rollup(child, proc.pid)[1] >= 32 << 20
            assert process_memory.rollup(child, os.getpid()) == (0, 0)  # not whose it was listed as
        finally:
            for p in (child, proc.pid):
                os.kill(p, 9)
    # Orphaned (adopted by init) or gone: no longer the listed parent's, so not counted under it.
    assert process_memory.parent(child) != proc.pid
    assert process_memory.rollup(child, proc.pid) == (0, 0)


def test_peak_memory_survives_children_that_end_while_it_reads():
    """A shell forking a child that lives a millisecond, sampled for two seconds: listing the
    tree never raises (it did about once in 270 listings before every /proc read was guarded),
    and the sampler thread keeps sampling, first 0.05 s apart."""
    import subprocess
    import time
    from scripts.results import process_memory
    with subprocess.Popen(["sh", "-c", "while :; do x=$(true); done"]) as proc:
        try:
            end, listings = time.monotonic() + 2, 0
            while time.monotonic() < end:
                process_memory.tree(proc.pid)
                listings += 1
            with process_memory.PeakMemory(proc.pid) as peak:
                time.sleep(2.0)  # 5 samples in the first second; room for a busy host
        finally:
            proc.kill()
    assert listings > 1000
    assert peak.errors == 0, peak.last_error
    assert peak.samples >= 4  # 0, 0.05, 0.15, 0.35, 0.75, 1.25, 1.75 s
    assert peak.peak_pss > 0
