"""MoE dispatch across nodes at DeepEP's configuration, simulated (METHODS.md 4.4).

For each EP size, one SMPI run of `moe` on `fattree` with `nvlink-ib` (8 GPUs a node, modeled
compute): 4096 tokens per rank, h 7168, 256 experts, top 8, bf16 rows, flat and hierarchical
dispatch, unlimited and node-limited (at most 4 nodes, or every node where there are fewer).
Prints one markdown table row per case: dispatch and combine time, bytes per rank across and
inside nodes, rows per token across nodes (counted from the routing, beside the uniform
prediction), and the per-rank cross-node bandwidth as DeepEP counts it (cross-node bytes a rank
sends / dispatch or combine time). DeepEP's published figures (H800, CX7 400 Gb/s, FP8
dispatch, BF16 combine) are quoted beside.

    suite moe-node-study --ranks 8,16,32,64,128 --csv results/moe_nodes.csv
"""
from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import tempfile
from pathlib import Path

import h5py

from scripts import ROOT, module_command

# DeepEP README, normal kernels: (dispatch GB/s, combine GB/s, which link) per EP size.
DEEPEP = {8: (153, 158, "NVLink"), 16: (43, 43, "RDMA"), 32: (58, 57, "RDMA"), 64: (51, 50, "RDMA")}
CASE = ["--tokens", "4096", "--hidden", "7168", "--ffn-hidden", "2048", "--experts", "256", "--top-k", "8",
        "--dtype", "bf16", "--iters", "1", "--warmup", "0", "--dispatch", "flat,hierarchical", "--ranks-per-node", "8"]


# SMPI's all-to-all(-v) algorithms (its `ompi` selector): every pair at once ("concurrent", basic
# linear) up to 32 ranks, N-1 pairwise steps at 64. At 128 the selector goes back to concurrent,
# whose N^2 flows each finish as an event that re-solved the sharing of all of them while one
# switch link carried every pair of a leaf: a single 1 MB-per-peer all-to-all-v took 35 s of wall
# time at 64 ranks and over 600 s at 128 on this machine (with a latency link per pair of nodes,
# sim_platform's fat tree now, 2.2 s and 11.7 s). From 128 ranks on the study forces pairwise
# steps (every all-to-all, the rail and node exchanges of hierarchical dispatch included), as SMPI
# itself chooses at 64, and as its published table ran.
PAIRWISE_FROM = 128


def a2a_algorithm(ranks: int) -> str:
    return "pairwise (forced)" if ranks >= PAIRWISE_FROM else "pairwise" if ranks >= 64 else "concurrent"


def simulate(ranks: int, out: Path, flops: float, build: Path) -> None:
    nodes = max(1, ranks // 8)
    limits = "0" if nodes == 1 else f"0,{min(4, nodes)}"
    cmd = [*module_command("envs.simulate"), "moe", "--platform", "fattree", "--ranks", str(ranks),
           "--sim-flops", str(flops), "--out", str(out), "--no-plot", "--build", str(build)]
    if ranks >= PAIRWISE_FROM:
        cmd += ["--cfg", "smpi/alltoallv:pair", "--cfg", "smpi/alltoall:pair"]
    cmd += ["--", *CASE, "--max-nodes-per-token", limits]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"simulation of {ranks} ranks failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")


def rows_of(path: Path, ranks: int) -> list[dict]:
    out = []
    with h5py.File(path) as f:
        for g in f["moe"].values():
            a = g.attrs
            hier = a["dispatch"] == "hierarchical"
            t_d, t_c = float(a["phase_dispatch_median_s"]), float(a["phase_combine_median_s"])
            inter = float(a["dispatch_inter_node_bytes_per_rank"])
            out.append({
                "ep": ranks, "nodes": int(a["nodes"]), "max_nodes": int(a["max_nodes_per_token"]),
                "dispatch": str(a["dispatch"]), "dispatch_ms": 1e3 * t_d, "combine_ms": 1e3 * t_c,
                "inter_MB": inter / 1e6, "intra_MB": float(a["dispatch_intra_node_bytes_per_rank"]) / 1e6,
                "inter_rows_per_token": float(a["hier_inter_node_rows_per_token" if hier
                                                 else "flat_inter_node_rows_per_token"]),
                "pred_rows_per_token": float(a["pred_hier_inter_node_rows_per_token" if hier
                                                else "pred_flat_inter_node_rows_per_token"]),
                "dispatch_inter_GBps": inter / t_d / 1e9 if t_d > 0 else 0.0,
                "combine_inter_GBps": inter / t_c / 1e9 if t_c > 0 else 0.0,
                "bytes_match": int(a["bytes_match"]), "a2a": a2a_algorithm(ranks),
            })
    return sorted(out, key=lambda r: (r["max_nodes"], r["dispatch"]))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", default="8,16,32,64,128", help="EP sizes (multiples of 8)")
    p.add_argument("--sim-flops", type=float, default=5e14, help="modeled FLOP/s of a GPU")
    p.add_argument("--csv", type=Path, help="also write the rows here")
    p.add_argument("--build", type=Path, default=ROOT / "build-sim", help="the SMPI build (make sim)")
    args = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(x) for x in args.ranks.split(",")):
            if n % 8:
                sys.exit(f"--ranks: {n} is not a multiple of 8 (8 GPUs a node)")
            path = Path(tmp) / f"moe_{n}.h5"
            simulate(n, path, args.sim_flops, args.build)
            rows.extend(rows_of(path, n))
            print(f"simulated EP {n}", file=sys.stderr, flush=True)
    print("| EP | nodes | max nodes | dispatch | flat all-to-all-v | dispatch ms | combine ms | across MB/rank "
          "| inside MB/rank | rows/token across (uniform pred.) | across GB/s dispatch / combine | DeepEP GB/s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        d = DEEPEP.get(r["ep"])
        # DeepEP's runs: node-limited to 4 nodes (all of them below 4 nodes), hierarchical.
        limited = r["nodes"] == 1 or r["max_nodes"] == min(4, r["nodes"])
        deepep = f"{d[0]} / {d[1]} ({d[2]})" if d and r["dispatch"] == "hierarchical" and limited else ""
        print(f"| {r['ep']} | {r['nodes']} | {r['max_nodes'] or '-'} | {r['dispatch']} | {r['a2a']} "
              f"| {r['dispatch_ms']:.2f} "
              f"| {r['combine_ms']:.2f} | {r['inter_MB']:.1f} | {r['intra_MB']:.1f} "
              f"| {r['inter_rows_per_token']:.2f} "
              f"({r['pred_rows_per_token']:.2f} if unlimited) "
              f"| {r['dispatch_inter_GBps']:.1f} / {r['combine_inter_GBps']:.1f} | {deepep} |")
        if not r["bytes_match"]:
            sys.exit(f"EP {r['ep']}: bytes counted differ from the routing's")
    if args.csv:
        args.csv.parent.mkdir(parents=True, exist_ok=True)
        with args.csv.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
