"""The pipeline's transformer-block stages at Llama 3 405B's sizes on a simulated cluster
(docs/PIPELINE_AT_SCALE.md): one SMPI run per row (scripts/envs/simulate.py, `fattree`, 8 GPUs a
node, --link nvlink, modeled compute at 4e14 FLOP/s, one step: the same on any host).

    pipeline_at_scale.py --table full|reduced|cp|cp16 [--build build-sim]

Prints the table's rows as the doc has them, times in ms: schedule | ranks | layers (a stage) |
micro-batches | [seq |] step | bubble | pred_bubble_s | bubble fraction | closed | F | BW. The
wall time and memory the doc gives beside them are the host's, not printed. `full` is 405B's 8K
stage at its mesh (TP 8 x PP 16, 128 ranks, 8192 tokens, 32 and all 126 layers: up to a minute
a row), `reduced` the same block at TP 8 x PP 4, `cp` TP 8 x CP 2 and 4 x PP 4, `cp16` the 131K
mesh's CP 16 at PP 2, 4, 8 and 16 (256 to 2048 ranks; the 2048-rank rows, at 1024 and 131072
tokens, about 6.5 minutes and 5 GiB each on 2 cores).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from scripts.studies.mesh_runs import simulate_mesh

BLOCK = ["--stage", "block", "--hidden", "16384", "--heads", "128", "--ffn-hidden", "53248",
         "--iters", "1", "--warmup", "0"]
SIM_FLOPS = 4e14

# (schedule, layers, micro-batches, seq, TP, CP, PP) per row, in the doc's order.
TABLES = {
    "full": [("1f1b", 32, 32, 8192, 8, 1, 16), ("interleaved", 32, 32, 8192, 8, 1, 16),
             ("1f1b", 126, 32, 8192, 8, 1, 16), ("interleaved", 126, 32, 8192, 8, 1, 16)],
    "reduced": [("1f1b", 4, 8, 256, 8, 1, 4), ("1f1b", 8, 8, 256, 8, 1, 4),
                ("interleaved", 8, 8, 256, 8, 1, 4), ("interleaved", 16, 8, 256, 8, 1, 4),
                ("1f1b", 4, 32, 256, 8, 1, 4), ("1f1b", 8, 32, 256, 8, 1, 4)],
    "cp": [("1f1b", 4, 4, 512, 8, 2, 4), ("1f1b", 4, 4, 1024, 8, 4, 4)],
    "cp16": [("1f1b", 2, 16, 1024, 8, 16, 2), ("1f1b", 4, 16, 1024, 8, 16, 4),
             ("1f1b", 8, 16, 1024, 8, 16, 8), ("1f1b", 16, 16, 1024, 8, 16, 16),
             ("1f1b", 16, 16, 131072, 8, 16, 16)],
}


def row(schedule: str, layers: int, m: int, seq: int, tp: int, cp: int, pp: int, build: Path | None,
        with_seq: bool) -> str:
    ranks = tp * cp * pp
    with tempfile.TemporaryDirectory() as tmp:
        (a,) = simulate_mesh(nodes=ranks // 8, ranks=ranks, link="nvlink", sim_flops=SIM_FLOPS, build=build,
                             mesh_flags=[*BLOCK, "--tp", str(tp), "--cp", str(cp), "--pp", str(pp),
                                         "--schedule", schedule, "--microbatches", str(m),
                                         "--layers", str(layers), "--seq", str(seq)],
                             out=Path(tmp) / "run.h5", bench="pipeline")
    mesh = f"TP {tp} x CP {cp} x PP {pp}" if cp > 1 else f"TP {tp} x PP {pp}"
    name = "interleaved, v 2" if schedule == "interleaved" else schedule
    ms = [f"{a[k] * 1e3:.3f}" for k in ("step_timeline_s", "bubble_s", "pred_bubble_s")]
    rest = [f"{a['bubble_fraction']:.3f}", *(f"{a[k] * 1e3:.3f}" for k in
                                              ("pred_closed_bubble_s", "forward_s", "input_grad_s"))]
    # pipeline gives the first layers % pp stages one layer more
    per_stage = f"{layers // pp}" if layers % pp == 0 else f"{layers // pp + 1} or {layers // pp}"
    cells = [name, f"{ranks} ({mesh})", f"{layers} ({per_stage})", str(m),
             *([str(seq)] if with_seq else []), *ms, *rest]
    return "| " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--table", choices=sorted(TABLES), required=True)
    parser.add_argument("--build", type=Path, default=None, help="the SMPI build (default: simulate.py's)")
    args = parser.parse_args(argv)
    with_seq = args.table != "reduced"
    header = ["schedule", "ranks", "layers (a stage)", "micro-batches", *(["seq"] if with_seq else []),
              "step", "bubble", "pred_bubble_s", "bubble fraction", "closed", "F", "BW"]
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header))
    for spec in TABLES[args.table]:
        print(row(*spec, build=args.build, with_seq=with_seq), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
