"""PyTorch's async tensor parallelism as the peer of `sp_tp --mode layer --tp-overlap`: the four
GEMMs of a TP+SP layer's forward with their sequence-parallel collectives, each timed three ways
on t GPUs (one process each, started by torchrun):

- blocking: all_gather_into_tensor then the GEMM (QKV, fc1), or the GEMM then
  reduce_scatter_tensor (output projection, fc2), as Megatron's SP without overlap runs them;
- fused: torch.ops.symm_mem.fused_all_gather_matmul / fused_matmul_reduce_scatter (async TP,
  torchtitan's `enable_async_tensor_parallel`), which pipeline the collective with the GEMM over
  symmetric memory;
- the GEMM alone and the collective alone, whose sum the blocking time approaches and whose
  larger the fused time can at best reach.

Shapes as sp_tp's layer (s b rows, hidden h, t ranks): QKV [s b, h] x [h, 3h/t], output projection
[s b, h/t] x [h/t, h], fc1 [s b, h] x [h, 4h/t], fc2 [s b, 4h/t] x [4h/t, h]. Each time is the
median over iterations of the slowest rank (CUDA events). The fused outputs are checked against
the blocking ones. Rank 0 prints a table and writes JSON; read it beside sp_tp's per-op phases
(`fwd_<op>_exposed`, `fwd_<op>_gemm`) of a run with the same shapes on the same GPUs.

Usage: python -m torch.distributed.run --standalone --nproc-per-node=N scripts/peers/torch_async_tp_peer.py
Without PyTorch, without symmetric memory, or with fewer than two GPUs it says why and exits 0.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import warnings
from pathlib import Path

OPS = ("qkv", "out_proj", "fc1", "fc2")


def op_shapes(op: str, rows: int, h: int, t: int) -> tuple[int, int, bool]:
    """(K, N, gathers): the GEMM is [rows, K] x [K, N]; gathers: all-gather before (else
    reduce-scatter after)."""
    return {"qkv": (h, 3 * h // t, True), "out_proj": (h // t, h, False),
            "fc1": (h, 4 * h // t, True), "fc2": (4 * h // t, h, False)}[op]


def skip(why: str) -> int:
    if int(os.environ.get("RANK", "0")) == 0:
        print(f"torch_async_tp_peer: {why}: async-TP peer skipped")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seq", type=int, default=8192, help="s, tokens of the sequence")
    ap.add_argument("--batch", type=int, default=1, help="b, sequences")
    ap.add_argument("--hidden", type=int, default=8192, help="h (divisible by t)")
    ap.add_argument("--iters", type=int, default=20, help="timed calls per case (median reported)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed calls before timing")
    ap.add_argument("--out", type=Path, default=Path("torch_async_tp.json"), help="JSON written here")
    args = ap.parse_args(argv)
    if args.iters < 1 or args.warmup < 0:
        ap.error("--iters must be >= 1 and --warmup >= 0")
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        return skip("PyTorch is not installed here")
    if "WORLD_SIZE" not in os.environ:
        return skip("not started by torchrun (python -m torch.distributed.run --nproc-per-node=N)")
    world = int(os.environ["WORLD_SIZE"])
    if world < 2 or torch.cuda.device_count() < 2:
        return skip(f"{world} process(es) on {torch.cuda.device_count()} GPU(s): async TP needs two GPUs or more")
    try:
        import torch.distributed._symmetric_memory as symm_mem  # defines torch.ops.symm_mem.*
        fused_ag = torch.ops.symm_mem.fused_all_gather_matmul
        fused_rs = torch.ops.symm_mem.fused_matmul_reduce_scatter
    except (ImportError, AttributeError, RuntimeError) as e:
        return skip(f"PyTorch {torch.__version__} has no symmetric-memory fused ops ({e})")
    rows = args.seq * args.batch
    t, h = world, args.hidden
    if h % t or rows % t:
        ap.error(f"--hidden {h} and s b = {rows} must be divisible by t = {t}")

    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    group = dist.group.WORLD
    # Needed before PyTorch 2.11 (the ops' workspace relies on it), deprecated since (a
    # FutureWarning), and may be gone in a later release.
    enable = getattr(symm_mem, "enable_symm_mem_for_group", None)
    if enable is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            enable(group.group_name)
    rank = dist.get_rank()
    torch.manual_seed(1234 + rank)
    dev, dt = torch.device("cuda", local), torch.bfloat16

    def timed(fn) -> float:
        """Median over iterations of the slowest rank's seconds per call."""
        for _ in range(args.warmup):
            fn()
        times = []
        for _ in range(args.iters):
            dist.barrier()
            torch.cuda.synchronize()
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            mine = torch.tensor([start.elapsed_time(stop) * 1e-3], device=dev)
            dist.all_reduce(mine, op=dist.ReduceOp.MAX)
            times.append(float(mine.item()))
        return statistics.median(times)

    results = []
    for op in OPS:
        k, n, gathers = op_shapes(op, rows, h, t)
        w = torch.randn(k, n, device=dev, dtype=dt) / k ** 0.5
        if gathers:  # each rank holds rows / t rows of the input, all of the weight's columns shard
            shard = torch.randn(rows // t, k, device=dev, dtype=dt)
            full = torch.empty(rows, k, device=dev, dtype=dt)

            def comm():
                dist.all_gather_into_tensor(full, shard)

            def gemm():
                return full @ w

            def blocking():
                comm()
                return gemm()

            def fused():
                return fused_ag(shard, [w], 0, group.group_name)[1][0]
        else:  # each rank holds all rows of its K shard; the sum over ranks is scattered by rows
            a = torch.randn(rows, k, device=dev, dtype=dt)
            partial = torch.empty(rows, n, device=dev, dtype=dt)
            out = torch.empty(rows // t, n, device=dev, dtype=dt)

            def comm():
                dist.reduce_scatter_tensor(out, partial)

            def gemm():
                return torch.matmul(a, w, out=partial)

            def blocking():
                gemm()
                comm()
                return out

            def fused():
                return fused_rs(a, w, "sum", 0, group.group_name)

        want, got = blocking().float(), fused().float()
        err_t = ((want - got).abs().max() / want.abs().max().clamp_min(1e-30)).reshape(1)
        dist.all_reduce(err_t, op=dist.ReduceOp.MAX)  # every rank's shard, one verdict
        err = float(err_t.item())
        rec = {"op": op, "rows": rows, "k": k, "n": n, "t": t, "collective": "all_gather" if gathers else "reduce_scatter",
               "blocking_s": timed(blocking), "fused_s": timed(fused), "gemm_s": timed(gemm),
               "comm_s": timed(comm), "max_rel_err": err, "check_passed": err < 2e-2}
        rec["fused_over_blocking"] = rec["fused_s"] / rec["blocking_s"]
        # What the fused op left exposed of the collective, and of it what overlap could hide.
        rec["exposed_s"] = max(0.0, rec["fused_s"] - rec["gemm_s"])
        rec["hidden_fraction"] = (1.0 - rec["exposed_s"] / rec["comm_s"]) if rec["comm_s"] > 0 else None
        results.append(rec)

    if rank == 0:
        print(f"\nAsync TP (PyTorch {torch.__version__}, torch.ops.symm_mem), t = {t}, s b = {rows}, h = {h}, bf16; "
              "median of the slowest rank")
        print(f"{'op':9} {'blocking_us':>12} {'fused_us':>10} {'gemm_us':>9} {'comm_us':>9} {'fused/blk':>9} "
              f"{'hidden':>7} {'check':>6}")
        for r in results:
            print(f"{r['op']:9} {r['blocking_s'] * 1e6:12.1f} {r['fused_s'] * 1e6:10.1f} {r['gemm_s'] * 1e6:9.1f} "
                  f"{r['comm_s'] * 1e6:9.1f} {r['fused_over_blocking']:9.3f} {r['hidden_fraction'] or 0:7.2f} "
                  f"{'ok' if r['check_passed'] else 'FAIL'}")
        args.out.write_text(json.dumps({"torch_version": torch.__version__, "gpu": torch.cuda.get_device_name(dev),
                                        "t": t, "seq": args.seq, "batch": args.batch, "hidden": h,
                                        "ops": results}, indent=1))
        print(f"results: {args.out}")
    dist.destroy_process_group()
    return 0 if all(r["check_passed"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
