"""The two-tier methods three ways: the model, a simulated cluster (SMPI) and the cluster emulated
on this machine (emulated_cluster.py), the same configurations and the same rates.

    two_tier_table.py --out-dir results/two_tier [--nic 1gbit] [--only moe|mesh|ulysses|sp_tp]

On 2 nodes x 2 ranks with a NIC of RATE each way (default 1 Gbit/s): moe's flat against its
hierarchical dispatch, the mesh (tp2 x cp2) with TP inside the node against CP inside it,
ulysses' hybrid (u 2, a ring of 2) with Ulysses inside the node against the ring inside it, and
sp_tp's TP+SP layer with its TP group inside a node against across (ranks dealt round robin
over the nodes, --map-by node, in both the emulated cluster and SMPI).
Each configuration runs alone (so the NIC's byte counter, tbf's, is that configuration's) on

- the emulated cluster: real Open MPI, shared memory inside a node, TCP through the shaped NIC;
- SMPI (`make sim`): fattree with 2 nodes of 2, the NIC at the same RATE, pcie-host's 25 GB/s
  inside a node, executed compute (this host's kernels, 1:1);
- the model: the bytes that cross the NIC per rank and step (the routing's count for moe, the
  crossing axes' bytes for the mesh, both from the run's own results) over RATE, the
  communication time the two-tier link adds.

Prints a Markdown table (and writes it to OUT_DIR/two_tier.md) with each one's step time and
bytes across the NIC per rank and step: the emulated cluster's from tbf's counter (every byte
the node's NIC sent over the whole run, divided by its steps: TCP/IP headers, set-up, moe's
calibration and Open MPI's own traffic included), beside the run's own count. Needs root (the emulated cluster) and build-sim/ (SMPI); without either that column
says why.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import h5py

from scripts import ROOT as REPO, module_command
from scripts.envs.shaped_link import parse_rate

NODES, PER_NODE = 2, 2


@dataclass(frozen=True)
class Config:
    name: str
    bench: str
    flags: tuple[str, ...]
    crossing: str  # how the bytes across the NIC are read from the results (crossing_bytes)
    steps: int  # steps the run makes (warm-up and timed): tbf's count is over all of them
    map_by: str = "slot"  # Open MPI's --map-by: node deals consecutive ranks over the nodes


MOE = ("--tokens", "2048", "--hidden", "512", "--ffn-hidden", "512", "--experts", "8", "--top-k", "2",
       "--pass", "fwd", "--iters", "5", "--warmup", "1", "--check", "0")
MESH = ("--tp", "2", "--cp", "2", "--seq", "1024", "--hidden", "512", "--heads", "8", "--pass", "fwd_bwd",
        "--iters", "3", "--warmup", "1", "--check", "0")
# The hybrid's Ulysses groups and sp_tp's TP groups are consecutive ranks: inside a node as Open
# MPI places ranks by default, across nodes when it deals them round robin (--map-by node).
ULYSSES = ("--seq", "1024", "--cp", "4", "--ulysses-degree", "2", "--heads", "16", "--kv-heads", "4",
           "--head-dim", "64", "--layout", "zigzag", "--causal", "1", "--pass", "fwd", "--iters", "10",
           "--warmup", "1", "--check", "0")
LAYER = ("--mode", "layer", "--tp", "2", "--seq", "1024", "--hidden", "512", "--heads", "8",
         "--variants", "tp_sp", "--pass", "fwd", "--iters", "5", "--warmup", "1", "--check", "0")
CONFIGS = [
    Config("moe flat dispatch", "moe", (*MOE, "--dispatch", "flat"), "moe", 6),
    Config("moe hierarchical dispatch", "moe", (*MOE, "--dispatch", "hierarchical"), "moe", 6),
    Config("mesh tp2 x cp2, TP inside the node", "mesh", (*MESH, "--order", "tp,cp,ep,dp"),
           "cp_bytes_per_rank+dp_bytes_per_rank", 4),
    Config("mesh tp2 x cp2, CP inside the node", "mesh", (*MESH, "--order", "cp,ep,dp,tp"), "tp_bytes_per_rank", 4),
    Config("ulysses u2 x ring 2, Ulysses inside the node", "ulysses", ULYSSES, "ring_bytes_sent_per_rank", 11),
    Config("ulysses u2 x ring 2, ring inside the node", "ulysses", ULYSSES, "ulysses_bytes_sent_per_rank", 11,
           "node"),
    Config("sp_tp layer tp2 (TP+SP), TP inside the node", "sp_tp", LAYER, "none", 6),
    Config("sp_tp layer tp2 (TP+SP), TP across nodes", "sp_tp", LAYER, "fwd_comm_bytes_per_rank", 6, "node"),
]


def one_case(path: Path) -> h5py.Group:
    f = h5py.File(path)
    group = f[next(iter(f.keys() - {"ranks"}))]
    return group[next(iter(group.keys()))]


def crossing_bytes(case: h5py.Group, how: str) -> float:
    """Bytes per rank and step that cross the NIC: moe's dispatch and combine (the routing's
    count, the combine sending the dispatch's rows back), or the sum of the named attributes
    (the mesh's crossing axes, with TP inside the node CP and the gradient sums over DP x CP;
    the hybrid's part across nodes; sp_tp's collectives when its TP group spans them)."""
    if how == "moe":
        return 2.0 * float(case.attrs["dispatch_inter_node_bytes_per_rank"])
    if how == "none":  # every group inside a node
        return 0.0
    return sum(float(case.attrs[name]) for name in how.split("+"))


def run_emulated(cfg: Config, nic: str, out: Path, build: Path) -> tuple[float, float, float] | str:
    """(step s, bytes across the NIC per rank by tbf, by the run's own count) or why not."""
    cmd = [*module_command("envs.emulated_cluster"), "--nodes", str(NODES),
           "--ranks-per-node", str(PER_NODE), "--nic", nic, "--mpirun-flag=--map-by", f"--mpirun-flag={cfg.map_by}",
           "--", str(build / "bin" / cfg.bench),
           "--backend", "cpu", *cfg.flags, "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    if proc.returncode != 0:
        return f"not run: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}"
    m = re.search(r"bytes each node's NIC sent \(tbf\): (.*)", proc.stderr)
    sent = [int(x) for x in re.findall(r"cn\d+ (\d+)", m.group(1))] if m else []
    case = one_case(out)
    return (float(case.attrs["time_median_s"]), sum(sent) / (NODES * PER_NODE * cfg.steps),
            crossing_bytes(case, cfg.crossing))


def run_smpi(cfg: Config, nic_Bps: float, out: Path, sim_build: Path,
             sim_flops: float | None) -> tuple[float, float] | str:
    if not (sim_build / "bin" / cfg.bench).exists():
        return f"not run: no {sim_build.name} (make sim)"
    cmd = [*module_command("envs.simulate"), cfg.bench, "--platform", "fattree",
           "--nodes", str(NODES), "--gpus-per-node", str(PER_NODE), "--link", "pcie-host",
           "--bw", f"{nic_Bps:g}", "--ranks", str(NODES * PER_NODE), "--map-by", cfg.map_by, "--out", str(out),
           "--no-plot", "--build", str(sim_build), *(["--sim-flops", f"{sim_flops:g}"] if sim_flops else []),
           "--", *cfg.flags]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    if proc.returncode != 0:
        return f"not run: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}"
    case = one_case(out)
    return float(case.attrs["time_median_s"]), crossing_bytes(case, cfg.crossing)


SPREAD = " (best, median of the runs)"


def steps_text(times: list[float]) -> str:
    """One run's step, or the best of several and their median (ms). The best is the headline:
    on a shared host a run's compute can slow by half (another tenant, the clock), which the
    placements' differences must not be read through."""
    ms = sorted(t * 1e3 for t in times)
    if len(ms) == 1:
        return f"{ms[0]:.1f} ms"
    return f"{ms[0]:.1f}, {statistics.median(ms):.1f} ms"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out-dir", type=Path, default=REPO / "results" / "two_tier")
    p.add_argument("--nic", default="1gbit", help="each node's NIC, each way (tc units; default 1gbit)")
    p.add_argument("--only", choices=sorted({c.bench for c in CONFIGS}), help="one benchmark's rows")
    p.add_argument("--build", type=Path, default=REPO / "build", help="the build the emulated cluster runs")
    p.add_argument("--sim-build", type=Path, default=REPO / "build-sim", help="the SMPI build (make sim)")
    p.add_argument("--sim-flops", type=float,
                   help="SMPI's compute modeled at this FLOP/s instead of executed on this host: its steps "
                        "then do not depend on the host's speed or load (default: executed)")
    p.add_argument("--repeat", type=int, default=1,
                   help="runs of every configuration (each way): the table gives each step's best and median")
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error(f"--repeat {args.repeat}: at least 1")
    nic_Bps = parse_rate(args.nic) / 8
    args.out_dir.mkdir(parents=True, exist_ok=True)
    rows = ["| configuration (2 nodes x 2 ranks, NIC " + args.nic + ") | model: NIC bytes/rank, NIC time "
            f"| SMPI: step{SPREAD if args.repeat > 1 else ''} | emulated: step{SPREAD if args.repeat > 1 else ''} "
            "| emulated: NIC bytes/rank/step (tbf / run's count) |",
            "|---|---|---|---|---|"]
    configs = [c for c in CONFIGS if not args.only or c.bench == args.only]
    # Repeats outermost: a drift of the host's speed then touches every configuration alike.
    emu: dict[str, list] = {c.name: [] for c in configs}
    sim: dict[str, list] = {c.name: [] for c in configs}
    for r in range(args.repeat):
        for i, cfg in enumerate(configs):
            print(f"[{r * len(configs) + i + 1}/{args.repeat * len(configs)}] {cfg.name}", file=sys.stderr, flush=True)
            stem = re.sub(r"\W+", "_", cfg.name) + (f"_{r}" if args.repeat > 1 else "")
            emu[cfg.name].append(run_emulated(cfg, args.nic, args.out_dir / f"{stem}_emulated.h5", args.build))
            sim[cfg.name].append(run_smpi(cfg, nic_Bps, args.out_dir / f"{stem}_smpi.h5", args.sim_build,
                                          args.sim_flops))
    for cfg in configs:
        e = [x for x in emu[cfg.name] if isinstance(x, tuple)]
        m = [x for x in sim[cfg.name] if isinstance(x, tuple)]
        counted = e[0][2] if e else m[0][1] if m else None
        model = (f"{counted / 2**20:.2f} MiB, {counted / nic_Bps * 1e3:.1f} ms" if counted is not None
                 else "needs a run")
        sim_txt = steps_text([x[0] for x in m]) if m else sim[cfg.name][0]
        emu_txt = steps_text([x[0] for x in e]) if e else emu[cfg.name][0]
        emu_bytes = (f"{statistics.median(x[1] for x in e) / 2**20:.2f} / {e[0][2] / 2**20:.2f} MiB" if e else "")
        rows.append(f"| {cfg.name} | {model} | {sim_txt} | {emu_txt} | {emu_bytes} |")
    table = "\n".join(rows)
    (args.out_dir / "two_tier.md").write_text(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
