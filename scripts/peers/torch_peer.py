"""PyTorch peer for kernel_bench and sp_tp's layer: the same shapes, timed the same way (CUDA
events around each call, after warm-up; median), so the suite's rates can be read as ratios of
what a PyTorch user gets on the same GPU in the same run (scripts/peers/peer_ratios.py prints them).

Times torch.matmul (bf16, fp32), scaled_dot_product_attention per backend (flash, cuDNN,
through torch.nn.attention.sdpa_kernel) on kernel_bench's attention shapes and s sweep, its
backward alone (autograd.grad of the SDPA output for q, k, v, the forward run once untimed:
what kernel_bench's attention_bwd_cuda cases time) on kernel_bench's backward shapes, and
one transformer layer like sp_tp's (t = 1: LayerNorm, QKV, attention, projection, dropout +
residual, LayerNorm, GeLU MLP, dropout + residual) with each SDPA backend: its forward, and its
training step (forward and autograd's backward to the input and every weight) as sp_tp's fwd_bwd
cases run it.
PyTorch is not a dependency of the suite: without it (or without a GPU) this prints why and
exits 0 without writing anything.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

# kernel_bench's shapes (bench/kernel_bench/kernel_bench_cuda.cpp): (s, heads, kv_heads, d, causal).
ATTENTION_SHAPES = [(4096, 32, 32, 128, False), (4096, 32, 32, 128, True), (4096, 32, 8, 128, True),
                    (8192, 16, 16, 64, True)]
SWEEP = [(s, 32 if d == 64 else 16, 32 if d == 64 else 16, d, True)
         for d in (64, 128) for s in (1024, 2048, 4096, 8192, 16384, 32768)]
GEMM_SIZES = [2048, 4096, 8192]
PARTS = ("gemm", "attention", "attention_bwd", "layer")


def case_name(s: int, a: int, kv: int, d: int, causal: bool) -> str:
    """kernel_bench's attention_case_name."""
    return f"s{s}_a{a}_kv{kv}_d{d}_{'causal' if causal else 'full'}"


def attention_flops(s: int, a: int, d: int, causal: bool) -> float:
    """kernel_bench's count: 4 d per visible (query, key) pair and head."""
    pairs = s * (s + 1) / 2 if causal else s * s
    return 4.0 * d * a * pairs


def attention_bwd_flops(s: int, a: int, d: int, causal: bool) -> float:
    """kernel_bench's attention_bwd_flops: 10 d per visible pair and head, 2.5x the forward."""
    return 2.5 * attention_flops(s, a, d, causal)


def time_cuda(torch, fn, iters: int, warmup: int) -> list[float]:
    """Seconds of each of `iters` calls of fn, by CUDA events on the current stream."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(iters):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        out.append(start.elapsed_time(stop) * 1e-3)
    return out


def record(kind: str, times: list[float], flops: float | None = None, **params) -> dict:
    median = statistics.median(times)
    rec = {"kind": kind, **params, "median_s": median, "min_s": min(times), "iters": len(times)}
    if flops is not None:
        rec["flops"] = flops
        rec["flop_per_s"] = flops / median if median > 0 else 0.0
    return rec


def sdpa_backends(torch):
    from torch.nn.attention import SDPBackend
    return {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}


def bench_gemm(torch, args, out: list) -> None:
    for dtype_name, dtype in (("bf16", torch.bfloat16), ("fp32", torch.float32)):
        for n in GEMM_SIZES:
            a = torch.randn(n, n, device="cuda", dtype=dtype)
            b = torch.randn(n, n, device="cuda", dtype=dtype)
            times = time_cuda(torch, lambda: torch.matmul(a, b), args.iters, args.warmup)
            out.append(record("gemm", times, 2.0 * n ** 3, op="torch.matmul", dtype=dtype_name, n=n,
                              name=f"gemm_cuda/{dtype_name}/n{n}"))
            print(f"  matmul {dtype_name} n={n}: {out[-1]['flop_per_s'] / 1e12:.1f} TFLOP/s", flush=True)
            del a, b


def time_sdpa(torch, args, out: list, kind: str, backend: str, shape: tuple, flops: float, prepare) -> None:
    """Times the call prepare() returns (SDPA under one backend on one shape) and appends its
    record to out; a backend that refuses the shape (in prepare or the call) is recorded with the
    error, not fatal."""
    s, a, kv, d, causal = shape
    name = case_name(s, a, kv, d, causal)
    label = "sdpa" if kind == "attention" else "sdpa backward"
    try:
        times = time_cuda(torch, prepare(), args.iters, args.warmup)
    except Exception as e:
        out.append({"kind": kind, "backend": backend, "name": name, "error": str(e)[:300]})
        print(f"  {label} {backend} {name}: unavailable ({str(e).splitlines()[0][:120]})", flush=True)
        return
    out.append(record(kind, times, flops, backend=backend, dtype="bf16", name=name, s=s, heads=a,
                      kv_heads=kv, d=d, causal=causal))
    print(f"  {label} {backend} {name}: {out[-1]['flop_per_s'] / 1e12:.1f} TFLOP/s", flush=True)


def bench_attention(torch, args, out: list) -> None:
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel
    shapes = ATTENTION_SHAPES + ([] if args.no_sweep else SWEEP)
    for s, a, kv, d, causal in shapes:
        # The suite's token-major layout [b, s, heads, d], viewed as SDPA's [b, heads, s, d].
        q = torch.randn(1, s, a, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
        k = torch.randn(1, s, kv, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
        v = torch.randn(1, s, kv, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
        for backend, enum in sdpa_backends(torch).items():
            def prepare(enum=enum):
                def call():
                    with sdpa_kernel(enum):
                        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=kv != a)
                return call
            time_sdpa(torch, args, out, "attention", backend, (s, a, kv, d, causal),
                      attention_flops(s, a, d, causal), prepare)
        del q, k, v


def bench_attention_bwd(torch, args, out: list) -> None:
    """SDPA's backward per backend on kernel_bench's backward shapes: the forward runs once
    (untimed) under the backend, then each timed call is autograd.grad of its output for
    q, k, v with a fixed output gradient (retain_graph, so the same graph runs again): the
    backend's backward kernels, including its own rowsum(dO * O) pre-pass."""
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel
    for s, a, kv, d, causal in ATTENTION_SHAPES:
        def leaf(heads):
            x = torch.randn(1, s, heads, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
            return x.detach().requires_grad_(True)
        q, k, v = leaf(a), leaf(kv), leaf(kv)
        for backend, enum in sdpa_backends(torch).items():
            def prepare(enum=enum):
                with sdpa_kernel(enum):
                    o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=kv != a)
                grad = torch.randn_like(o)
                return lambda: torch.autograd.grad(o, (q, k, v), grad, retain_graph=True)
            time_sdpa(torch, args, out, "attention_bwd", backend, (s, a, kv, d, causal),
                      attention_bwd_flops(s, a, d, causal), prepare)
        del q, k, v


def bench_layer(torch, args, out: list) -> None:
    """sp_tp's layer (tp variant, t = 1) in PyTorch: the same GEMMs, softmax attention, GeLU
    (tanh), LayerNorms and dropouts on [s*b, h] rows. Kind "layer": the forward alone (no
    autograd), as sp_tp's fwd cases; kind "layer_step": forward and autograd's backward of every
    weight and the input from a given output gradient, as sp_tp's fwd_bwd cases."""
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel
    s, b, h, a = args.layer_seq, args.layer_batch, args.layer_hidden, args.layer_heads
    ff, d, p = 4 * h, h // a, args.layer_dropout
    dt = torch.bfloat16
    dev = "cuda"
    x = torch.randn(s * b, h, device=dev, dtype=dt)
    w_qkv = torch.randn(h, 3 * h, device=dev, dtype=dt) / h ** 0.5
    w_out = torch.randn(h, h, device=dev, dtype=dt) / h ** 0.5
    w_fc1 = torch.randn(h, ff, device=dev, dtype=dt) / h ** 0.5
    w_fc2 = torch.randn(ff, h, device=dev, dtype=dt) / ff ** 0.5
    ln = [(torch.ones(h, device=dev, dtype=dt), torch.zeros(h, device=dev, dtype=dt)) for _ in range(2)]
    dy = torch.randn(s * b, h, device=dev, dtype=dt)
    trained = [x, w_qkv, w_out, w_fc1, w_fc2] + [t for pair in ln for t in pair]

    def forward():
        y = F.layer_norm(x, (h,), *ln[0], eps=1e-5)
        qkv = (y @ w_qkv).view(s, b, 3, a, d)  # rows are s_idx * b + b_idx, as in the suite
        q, k, v = (qkv[:, :, i].permute(1, 2, 0, 3) for i in range(3))  # [b, a, s, d]
        ctx = F.scaled_dot_product_attention(q, k, v, is_causal=args.layer_causal)
        ctx = ctx.permute(2, 0, 1, 3).reshape(s * b, h)
        h1 = x + F.dropout(ctx @ w_out, p=p, training=True)
        y2 = F.layer_norm(h1, (h,), *ln[1], eps=1e-5)
        mlp = F.gelu(y2 @ w_fc1, approximate="tanh") @ w_fc2
        return h1 + F.dropout(mlp, p=p, training=True)

    def layer(enum):
        with torch.no_grad(), sdpa_kernel(enum):
            return forward()

    def step(enum):
        for t in trained:
            t.grad = None
        with sdpa_kernel(enum):
            forward().backward(dy)

    for kind, fn in (("layer", layer), ("layer_step", step)):
        for t in trained:
            t.requires_grad_(kind == "layer_step")
        for backend, enum in sdpa_backends(torch).items():
            try:
                times = time_cuda(torch, lambda: fn(enum), args.iters, args.warmup)
            except Exception as e:
                out.append({"kind": kind, "backend": backend, "error": str(e)[:300]})
                print(f"  {kind} {backend}: unavailable ({str(e).splitlines()[0][:120]})", flush=True)
                continue
            out.append(record(kind, times, backend=backend, dtype="bf16", s=s, b=b, h=h, heads=a, d_ff=ff,
                              causal=args.layer_causal, dropout=p))
            print(f"  {kind} {backend} s={s} b={b} h={h} a={a}: {out[-1]['median_s'] * 1e3:.2f} ms", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("torch_peer.json"), help="JSON written here")
    ap.add_argument("--iters", type=int, default=20, help="timed calls per case (median reported)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed calls before timing")
    ap.add_argument("--no-sweep", action="store_true", help="skip the s = 1K..32K attention sweep")
    ap.add_argument("--only", default=",".join(PARTS), help="parts to run, comma-separated")
    ap.add_argument("--layer-seq", type=int, default=4096)
    ap.add_argument("--layer-batch", type=int, default=1)
    ap.add_argument("--layer-hidden", type=int, default=4096)
    ap.add_argument("--layer-heads", type=int, default=32)
    ap.add_argument("--layer-dropout", type=float, default=0.1)
    ap.add_argument("--layer-causal", type=int, default=1)
    args = ap.parse_args(argv)
    if args.iters < 1 or args.warmup < 0:
        ap.error("--iters must be >= 1 and --warmup >= 0")
    parts = set(args.only.split(","))
    if not parts <= set(PARTS):
        ap.error(f"--only: unknown part(s) {sorted(parts - set(PARTS))}")
    try:
        import torch
    except ImportError:
        print("torch_peer: PyTorch is not installed here: peer comparison skipped")
        return 0
    if not torch.cuda.is_available():
        print("torch_peer: PyTorch sees no CUDA device: peer comparison skipped")
        return 0
    try:
        import torch.nn.attention  # noqa: F401  (sdpa_kernel: PyTorch >= 2.3)
    except ImportError:
        print(f"torch_peer: PyTorch {torch.__version__} has no torch.nn.attention.sdpa_kernel: skipped")
        return 0
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 GEMMs in fp32, like the suite's
    info = {"torch_version": torch.__version__, "cuda_version": torch.version.cuda,
            "cudnn_version": torch.backends.cudnn.version(), "device": torch.cuda.get_device_name(0),
            "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "timing": f"CUDA events per call, median of {args.iters} after {args.warmup} warm-up calls"}
    print(f"torch_peer: PyTorch {info['torch_version']} on {info['device']} (cuDNN {info['cudnn_version']})")
    cases: list[dict] = []
    if "gemm" in parts:
        bench_gemm(torch, args, cases)
    if "attention" in parts:
        bench_attention(torch, args, cases)
    if "attention_bwd" in parts:
        bench_attention_bwd(torch, args, cases)
    if "layer" in parts:
        bench_layer(torch, args, cases)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"info": info, "cases": cases}, indent=1))
    print(f"torch_peer: {len(cases)} cases -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
