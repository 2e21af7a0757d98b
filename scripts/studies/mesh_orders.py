"""What the order of a mesh's axes buys: the same degrees in several orders on a simulated
two-tier cluster, measured beside the model.

    mesh_orders.py --nodes 2 --tp 8 --cp 2 [--dp 1] --orders tp,cp,ep,dp/cp,ep,dp,tp
                   [--sim-flops 4e14] [--link nvlink-ib] [--csv OUT.csv] -- <mesh's block flags>

One SMPI run (scripts/envs/simulate.py, `fattree` with --nodes nodes of 8 GPUs, modeled compute:
every GEMM's and attention's FLOPs injected at --sim-flops, so the times are the same on any
host) of `mesh --pass fwd_bwd` over every order, and `model --section mesh` for the same block
with the platform's rates: per order, the step time and each axis's exposed time, simulated
beside predicted, and which axes cross nodes. Prints a Markdown table (and writes the rows to
--csv).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from scripts import ROOT
from scripts.studies.mesh_runs import GPUS_PER_NODE, simulate_mesh, write_rows
from scripts.envs.sim_platform import LINKS

AXES = ("tp", "cp", "ep", "dp")


def block_flag(flags: list[str], name: str, default: str) -> str:
    """The value of `--name` among the mesh's flags (the model needs the same block)."""
    return flags[flags.index(name) + 1] if name in flags else default


def model_rows(args: argparse.Namespace, flags: list[str]) -> dict[str, dict[str, float]]:
    """`model --section mesh` for every order, with the simulated links' rates: a route inside
    a node crosses two NVLink links, one across nodes two NIC links and the switches'."""
    link = LINKS[args.link]
    cmd = [str(args.model), "--section", "mesh", "--tp", str(args.tp), "--cp", str(args.cp),
           "--dp", str(args.dp), "--order", args.orders, "--ranks-per-node", str(GPUS_PER_NODE),
           "--flops", str(args.sim_flops), "--bw", str(link.intra_bw), "--lat", str(2 * link.intra_lat),
           "--bw-inter", str(link.net_bw), "--lat-inter", str(4 * link.net_lat),
           "--dtype", block_flag(flags, "--dtype", "bf16"), "--grad-dtype", "fp32",
           "--cp-method", block_flag(flags, "--cp-method", "ring")]
    for ours, theirs in (("--seq", "--seq"), ("--batch", "--batch"), ("--hidden", "--hidden"),
                         ("--heads", "--heads"), ("--kv-heads", "--kv-heads"), ("--ffn-hidden", "--d-ff"),
                         ("--experts", "--experts"), ("--top-k", "--top-k"), ("--ep", "--ep")):
        if ours in flags:
            cmd += [theirs, block_flag(flags, ours, "")]
    if block_flag(flags, "--kv-heads", "0") == "0" and "--heads" in flags:
        cmd += ["--kv-heads", block_flag(flags, "--heads", "")]
    if block_flag(flags, "--causal", "1") == "1":
        cmd.append("--causal")
    if block_flag(flags, "--mlp", "gelu") == "swiglu":
        cmd.append("--swiglu")
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    rows = {}
    for line in out.splitlines():
        if line.startswith("prediction: section=mesh"):
            kv = dict(item.split("=", 1) for item in line.split()[1:])
            rows[kv["order"]] = {k: float(v) for k, v in kv.items() if k not in ("section", "order")}
    return rows


def simulated_rows(args: argparse.Namespace, flags: list[str], out: Path) -> dict[str, dict[str, float]]:
    cases = simulate_mesh(nodes=args.nodes, ranks=args.tp * args.cp * args.dp, link=args.link,
                          sim_flops=args.sim_flops, build=args.build, out=out,
                          mesh_flags=["--tp", str(args.tp), "--cp", str(args.cp), "--dp", str(args.dp),
                                      "--order", args.orders, "--pass", "fwd_bwd", "--ranks-per-node",
                                      str(GPUS_PER_NODE), "--iters", "1", "--warmup", "0", *flags])
    return {str(a["order"]): {"step_s": float(a["time_median_s"]),
                              **{f"{x}_s": float(a[f"{x}_exposed_s"]) for x in AXES},
                              **{f"{x}_bytes": float(a[f"{x}_bytes_per_rank"]) for x in AXES}}
            for a in cases}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ours, flags = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, required=True, help="nodes of 8 GPUs (fattree)")
    p.add_argument("--tp", type=int, required=True)
    p.add_argument("--cp", type=int, required=True)
    p.add_argument("--dp", type=int, default=1)
    p.add_argument("--orders", required=True, help="orders inner to outer, separated by '/'")
    p.add_argument("--sim-flops", type=float, default=4e14, help="modeled FLOP/s (default 4e14)")
    p.add_argument("--link", default="nvlink-ib", choices=sorted(LINKS))
    p.add_argument("--build", type=Path, help="the SMPI build (default build-sim)")
    p.add_argument("--model", type=Path, default=ROOT / "build" / "bin" / "model")
    p.add_argument("--csv", type=Path, help="also write the rows here")
    args = p.parse_args(ours)
    if args.tp * args.cp * args.dp > args.nodes * GPUS_PER_NODE:
        p.error(f"{args.tp} x {args.cp} x {args.dp} ranks do not fit {args.nodes} nodes of {GPUS_PER_NODE}")
    with tempfile.TemporaryDirectory(prefix="mesh_orders_") as tmp:
        sim = simulated_rows(args, flags, Path(tmp) / "mesh.h5")
    model = model_rows(args, flags)
    header = ["order", "step sim ms", "step model ms", "error", *[f"{x.upper()} sim / model ms" for x in AXES]]
    print("| " + " | ".join(header) + " |")
    print("| " + " | ".join("---" for _ in header) + " |")
    rows = []
    for order, s in sim.items():
        m = model[order]
        err = (m["step_s"] - s["step_s"]) / s["step_s"]
        cells = [f"`{order}`", f"{s['step_s'] * 1e3:.3f}", f"{m['step_s'] * 1e3:.3f}", f"{100 * err:+.1f}%"]
        cells += [f"{s[f'{x}_s'] * 1e3:.3f} / {m[f'{x}_s'] * 1e3:.3f}" for x in AXES]
        print("| " + " | ".join(cells) + " |")
        rows.append({"order": order, "step_sim_s": s["step_s"], "step_model_s": m["step_s"],
                     **{f"{x}_sim_s": s[f"{x}_s"] for x in AXES}, **{f"{x}_model_s": m[f"{x}_s"] for x in AXES},
                     **{f"{x}_bytes": s[f"{x}_bytes"] for x in AXES}})
    if args.csv:
        write_rows(args.csv, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
