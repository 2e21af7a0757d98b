"""Suite / PyTorch ratios from one GPU run: kernel_bench's JSON (--benchmark_out) and
scripts/peers/torch_peer.py's JSON, optionally sp_tp layer results (.h5) for the layer: its forward
cases against PyTorch's forward, its fwd_bwd cases against PyTorch's training step.

Rates (GEMM, attention forward and backward) print as suite FLOP/s over PyTorch FLOP/s on the
same shape (1.0 = parity, above 1 = faster than PyTorch); the layer prints as PyTorch time over
suite time (same reading). Missing counterparts print as '-'.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path


SUFFIXES = ("manual_time", "real_time", "process_time")


def case_key(run_name: str) -> str:
    """'attention_cuda/bf16/cudnn/s4096_a32_kv32_d128_causal/manual_time' -> without the
    Google Benchmark suffixes (manual_time, iterations:N, min_time:X, repeats:N)."""
    parts = [p for p in run_name.split("/")
             if p not in SUFFIXES and not p.startswith(("iterations:", "min_time:", "repeats:"))]
    return "/".join(parts)


def read_kernel_bench(path: Path) -> tuple[dict[str, float], dict[str, str]]:
    """{case: median FLOP/s over its iteration entries}, {case: label}."""
    data = json.loads(path.read_text())
    rates: dict[str, list[float]] = {}
    labels: dict[str, str] = {}
    for b in data.get("benchmarks", []):
        if b.get("run_type", "iteration") != "iteration" or "FLOP/s" not in b:
            continue
        key = case_key(b.get("run_name", b["name"]))
        rates.setdefault(key, []).append(float(b["FLOP/s"]))
        if b.get("label"):
            labels[key] = b["label"]
    return {k: statistics.median(v) for k, v in rates.items()}, labels


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:6.2f}" if a and b else "     -"


def tflops(x: float | None) -> str:
    return f"{x / 1e12:7.1f}" if x else "      -"


def print_gemm(suite: dict[str, float], peer: list[dict]) -> None:
    rows = [c for c in peer if c.get("kind") == "gemm" and "flop_per_s" in c]
    if not rows:
        return
    print("\nGEMM (TFLOP/s): suite cuBLASLt vs torch.matmul")
    print(f"{'case':<24} {'suite':>7} {'torch':>7} {'ratio':>6}")
    for c in rows:
        s = suite.get(c["name"])
        print(f"{c['name']:<24} {tflops(s)} {tflops(c['flop_per_s'])} {ratio(s, c['flop_per_s'])}")


def print_attention(suite: dict[str, float], peer: list[dict], kind: str = "attention") -> None:
    """The forward (kind attention: kernel_bench's attention_cuda cases) or the backward
    (attention_bwd: attention_bwd_cuda against SDPA's backward alone) of each shape."""
    by_name: dict[str, dict[str, float]] = {}
    for c in peer:
        if c.get("kind") == kind and "flop_per_s" in c:
            by_name.setdefault(c["name"], {})[c["backend"]] = c["flop_per_s"]
    if not by_name:
        return
    if kind == "attention":
        prefix, title = "attention_cuda", "forward, bf16 (TFLOP/s): suite kernels vs PyTorch SDPA backends"
    else:
        prefix, title = ("attention_bwd_cuda", "backward, bf16 (TFLOP/s, 10 d a FLOPs per visible pair): "
                         "suite kernels vs PyTorch SDPA's backward")
    print(f"\nAttention {title}")
    print(f"{'case':<30} {'suite':>7} {'cudnn':>7} {'t.flash':>7} {'t.cudnn':>7} "
          f"{'suite/t.flash':>13} {'cudnn/t.cudnn':>13}")
    for name, backends in by_name.items():
        sf = suite.get(f"{prefix}/bf16/suite-flash/{name}")
        cd = suite.get(f"{prefix}/bf16/cudnn/{name}")
        tf, tc = backends.get("flash"), backends.get("cudnn")
        print(f"{name:<30} {tflops(sf)} {tflops(cd)} {tflops(tf)} {tflops(tc)} "
              f"{ratio(sf, tf):>13} {ratio(cd, tc):>13}")


def print_layer(files: list[Path], peer: list[dict], step: bool = False) -> None:
    """sp_tp's fused tp layer on one rank against PyTorch's: its forward cases against the
    peer's forward ("layer"), or with step its fwd_bwd cases against the peer's training step
    ("layer_step")."""
    kind = "layer_step" if step else "layer"
    torch_layers = {c["backend"]: c for c in peer if c.get("kind") == kind and "median_s" in c}
    if not files or not torch_layers:
        return
    from scripts.results import suite_results
    what = "training step (forward + backward)" if step else "forward"
    print(f"\nLayer {what}, one GPU (ms): suite (sp_tp tp, fused) vs PyTorch; ratio = torch / suite")
    print(f"{'case':<58} {'kernel':<12} {'suite':>8} {'t.flash':>8} {'t.cudnn':>8} {'vs flash':>8} {'vs cudnn':>8}")
    for path in files:
        res = suite_results.read_results(path, load_datasets=False)
        for case in res.cases_of("sp_tp") if "sp_tp" in res.benches() else []:
            p = case.params
            if p.get("mode") != "layer" or p.get("attention") != "fused" or int(p.get("t", 0)) != 1:
                continue
            if (p.get("pass", "fwd") == "fwd_bwd") != step:
                continue
            match = [c for c in torch_layers.values()
                     if (c["s"], c["b"], c["h"], c["heads"], c["dtype"], int(c["causal"])) ==
                     (int(p["s"]), int(p["b"]), int(p["h"]), int(p["heads"]), p["dtype"], int(p["causal"]))]
            if not match:
                continue
            ms = case.median_s * 1e3 if case.median_s else None
            tf = torch_layers.get("flash", {}).get("median_s")
            tc = torch_layers.get("cudnn", {}).get("median_s")
            tf_ms, tc_ms = (tf * 1e3 if tf else None), (tc * 1e3 if tc else None)
            fmt = lambda x: f"{x:8.2f}" if x else "       -"  # noqa: E731
            print(f"{case.name:<58} {str(case.attrs.get('attn_kernel', '?')):<12} {fmt(ms)} {fmt(tf_ms)} "
                  f"{fmt(tc_ms)} {ratio(tf_ms, ms):>8} {ratio(tc_ms, ms):>8}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kernel_bench", type=Path, help="kernel_bench --benchmark_out JSON")
    ap.add_argument("peer", type=Path, help="torch_peer.py JSON")
    ap.add_argument("--layer", type=Path, nargs="*", default=[], help="sp_tp layer-mode results (.h5)")
    args = ap.parse_args(argv)
    if not args.peer.exists():
        print(f"peer_ratios: no peer file {args.peer} (PyTorch absent?): nothing to compare")
        return 0
    suite, _ = read_kernel_bench(args.kernel_bench) if args.kernel_bench.exists() else ({}, {})
    peer = json.loads(args.peer.read_text())
    info = peer.get("info", {})
    print(f"peer: PyTorch {info.get('torch_version', '?')} on {info.get('device', '?')}, "
          f"{info.get('timing', '')}")
    cases = peer.get("cases", [])
    print_gemm(suite, cases)
    print_attention(suite, cases)
    print_attention(suite, cases, kind="attention_bwd")
    layers = [p for p in args.layer if p.exists()]
    print_layer(layers, cases)
    print_layer(layers, cases, step=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
