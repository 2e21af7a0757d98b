#!/usr/bin/env python3
"""Integration scenarios for ring_attention, one per ctest test (CPU backend under mpirun).

Work per round, bytes and the saved tensors are checked against counts and attention computed
here independently of the C++ code (numpy, from the layout definitions of METHODS.md).
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np

from scripts import module_command
from run_scenario import Env, expect, expect_refused, model_lines, model_prediction, run_cli
from run_scenario import model_run as run_model

BIN = "ring_attention"


def positions(layout: str, rank: int, n: int, c: int) -> list[int]:
    if layout == "contiguous":
        return list(range(rank * c, (rank + 1) * c))
    if layout == "zigzag":
        h = c // 2
        return list(range(rank * h, (rank + 1) * h)) + list(range((2 * n - 1 - rank) * h, (2 * n - rank) * h))
    return [rank + n * i for i in range(c)]


def expected_work(layout: str, n: int, c: int, causal: bool, batch: int, variant: str) -> np.ndarray:
    """[rounds, ranks] visible (query, key) pairs; round k of rank r uses rank (r - k) mod n's keys."""
    work = np.zeros((n, n), dtype=np.int64)
    for r in range(n):
        q = np.array(positions(layout, r, n, c))
        for k in range(n):
            keys = np.array(positions(layout, (r - k) % n, n, c))
            vis = (keys[None, :] <= q[:, None]) if causal else np.ones((c, c), bool)
            work[k, r] = vis.sum() * batch
    return work if variant == "ring" else work.sum(axis=0, keepdims=True)


def run_ok(env: Env, ranks: int, out: Path, *args: str) -> subprocess.CompletedProcess:
    proc = env.mpirun(ranks, BIN, "--backend", "cpu", "--iters", "3", "--warmup", "1", "--out", str(out), *args)
    expect(proc.returncode == 0, f"{BIN} failed", proc)
    expect(proc.stdout.count("Ring attention, forward (median") == 1, "summary table not printed once", proc)
    return proc


def check_file(path: Path, ranks: int, cp: int, e: int) -> int:
    n_cases = 0
    with h5py.File(path) as f:
        expect(f.attrs["complete"] == 1, "file not complete")
        for name, g in f[BIN].items():
            a = g.attrs
            n_cases += 1
            c, kv, d, b = int(a["c"]), int(a["kv_heads"]), int(a["head_dim"]), int(a["batch"])
            causal, layout, variant = bool(a["causal"]), a["layout"], a["variant"]
            expect(int(a["n_c"]) == cp, f"{name}: n_c")
            expect(a["check_passed"] == 1, f"{name}: check_passed {a['check_passed']} ({a.get('check_note', '')})")
            block = 2 * c * b * kv * d * e
            pred = (cp - 1) * block
            expect(a["pred_bytes_sent_per_rank_per_layer"] == pred, f"{name}: predicted bytes {a['pred_bytes_sent_per_rank_per_layer']} != {pred}")
            expect(list(g["cp_bytes_sent"][()].ravel()) == [pred] * ranks, f"{name}: bytes sent {g['cp_bytes_sent'][()]} != {pred}")
            work = np.atleast_2d(g["round_work_pairs"][()])  # one-row int tables are stored 1-D
            want = expected_work(layout, cp, c, causal, b, variant)
            want = np.tile(want, (1, ranks // cp))
            expect(work.shape == want.shape and np.array_equal(work, want), f"{name}: work per round\n{work}\n!= {want}")
            rounds = cp if variant == "ring" else 1
            for t in ("round_compute_s", "round_wait_s", "round_transfer_s"):
                expect(g[t].shape == (rounds, ranks), f"{name}: {t} shape {g[t].shape}")
                expect(np.all(g[t][()] >= 0), f"{name}: negative {t}")
            expect(g["compute_only_time_s"].shape == (3, ranks), f"{name}: compute_only_time_s shape")
            expect(a["memory_method_bytes"] == a["pred_memory_bytes"], f"{name}: memory {a['memory_method_bytes']} != predicted {a['pred_memory_bytes']}")
            if a.get("pass", "fwd") == "fwd":  # the allocator's peak: the method's blocks and its scratch, nothing else
                expect(a["memory_allocated_peak_bytes"] == a["memory_method_bytes"] + a["memory_scratch_bytes"],
                       f"{name}: allocated {a['memory_allocated_peak_bytes']} != method + scratch")
            if cp > 1:
                expect(a["measured_W_Bps"] > 0 and a["measured_F_flops"] > 0 and a["c_star_tokens"] > 0, f"{name}: F, W, c*")
    return n_cases


def scenario_ring(env: Env, ranks: int, dtype: str, cp: int) -> None:
    out = env.workdir / "ring.h5"
    run_ok(env, ranks, out, "--dtype", dtype, "--block", "2,6", "--layout", "contiguous,zigzag,striped",
           "--variant", "ring,allgather", "--causal", "0,1", "--heads", "4", "--kv-heads", "2",
           "--cp", str(cp))
    n = check_file(out, ranks, cp, {"fp32": 4, "fp64": 8}[dtype])
    expect(n == 24, f"{n} cases, expected 24")
    # Tiny: one token per zig-zag chunk, batch 2, MHA.
    run_ok(env, ranks, out, "--dtype", dtype, "--block", "2", "--layout", "zigzag", "--heads", "2",
           "--batch", "2", "--head-dim", "128", "--cp", str(cp))
    check_file(out, ranks, cp, {"fp32": 4, "fp64": 8}[dtype])


def visible(qpos, kpos, causal, cu_seqlens=None):
    """[queries, keys] mask: causal (or not) and, with document offsets cu_seqlens, only within a
    document. cu_seqlens may be a Pack (padded documents)."""
    vis = kpos[None, :] <= qpos[:, None] if causal else np.ones((len(qpos), len(kpos)), bool)
    if cu_seqlens is not None:
        pack = cu_seqlens if isinstance(cu_seqlens, Pack) else Pack(np.asarray(cu_seqlens), None)
        dq, dk = pack.doc(qpos), pack.doc(kpos)
        vis = vis & (dq[:, None] == dk[None, :]) & (dq[:, None] >= 0)
    return vis


class Pack:
    """Documents as a results file records them: cu_seqlens (cumulative token counts) and, with
    padding (doc_zigzag), cu_seqlens_padded (slot offsets). doc(p) is -1 for a padding slot."""

    def __init__(self, cu_seqlens, cu_padded):
        self.cu = np.asarray(cu_seqlens)
        self.starts = np.asarray(cu_padded if cu_padded is not None else cu_seqlens)
        self.lengths = np.diff(self.cu)

    @staticmethod
    def of(group) -> "Pack":
        padded = group["cu_seqlens_padded"][()].reshape(-1) if "cu_seqlens_padded" in group else None
        return Pack(group["cu_seqlens"][()].reshape(-1), padded)

    def doc(self, p):
        p = np.asarray(p)
        d = np.searchsorted(self.starts, p, side="right") - 1
        return np.where(p - self.starts[d] < self.lengths[d], d, -1)  # -1: padding, no document

    def tokens(self):
        return np.array([p for p in range(int(self.starts[-1])) if self.doc(p) >= 0])


def attention(q, k, v, qpos, kpos, causal, cu_seqlens=None):
    """Full attention in float64, q [s, b, a, d], k/v [s, b, kv, d]."""
    s, b, a, d = q.shape
    g = a // k.shape[2]
    kk = np.repeat(k, g, axis=2)
    vv = np.repeat(v, g, axis=2)
    scores = np.einsum("ibhd,jbhd->bhij", q, kk) / np.sqrt(d)
    scores = np.where(visible(qpos, kpos, causal, cu_seqlens)[None, None], scores, -np.inf)
    m = scores.max(axis=-1, keepdims=True)
    p = np.exp(scores - m)
    lse = (m + np.log(p.sum(axis=-1, keepdims=True)))[..., 0]
    o = np.einsum("bhij,jbhd->ibhd", p / p.sum(axis=-1, keepdims=True), vv)
    return o, lse.transpose(2, 0, 1)  # lse as [s, b, a]


def attention_backward(q, k, v, d_o, qpos, kpos, causal, cu_seqlens=None):
    """Gradients of sum(d_o * attention(q, k, v)) in float64 (dQ, dK, dV), written from the
    textbook formulas: P = softmax(S), dV = P^T dO, dS = P (dP - rowsum(dO O)), dQ = dS K / sqrt(d),
    dK = dS^T Q / sqrt(d); GQA sums dK, dV over each K/V head's group."""
    s, b, a, d = q.shape
    kv = k.shape[2]
    g = a // kv
    kk, vv = np.repeat(k, g, axis=2), np.repeat(v, g, axis=2)
    scores = np.einsum("ibhd,jbhd->bhij", q, kk) / np.sqrt(d)
    scores = np.where(visible(qpos, kpos, causal, cu_seqlens)[None, None], scores, -np.inf)
    p = np.exp(scores - scores.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    go = np.einsum("ibhd->bhid", d_o)
    o = np.einsum("bhij,jbhd->bhid", p, vv)
    dv = np.einsum("bhij,bhid->jbhd", p, go)
    dp = np.einsum("bhid,jbhd->bhij", go, vv)
    ds = p * (dp - (go * o).sum(axis=-1, keepdims=True))
    dq = np.einsum("bhij,jbhd->ibhd", ds, kk) / np.sqrt(d)
    dk = np.einsum("bhij,ibhd->jbhd", ds, q) / np.sqrt(d)
    fold = lambda x: x.reshape(s, b, kv, g, d).sum(axis=3)  # noqa: E731
    return dq, fold(dk), fold(dv)


def saved_qkv(g) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A --save-tensors group's Q, K, V ([s, 1, heads, d] and [s, 1, kv_heads, d]) of the runs
    below: 2 query heads, 1 key/value head."""
    s, b, a, kv, d = int(g.attrs["s"]), 1, 2, 1, int(g.attrs["head_dim"])
    return (g["tensor_q"][()].reshape(s, b, a, d), g["tensor_k"][()].reshape(s, b, kv, d),
            g["tensor_v"][()].reshape(s, b, kv, d))


def scenario_ring_save_tensors(env: Env) -> None:
    """Saved tensors are in global token order and equal attention computed here from them."""
    out = env.workdir / "tensors.h5"
    run_ok(env, 2, out, "--dtype", "fp64", "--block", "6", "--layout", "zigzag,striped", "--variant",
           "ring", "--causal", "1", "--heads", "2", "--kv-heads", "1", "--save-tensors")
    with h5py.File(out) as f:
        for name, g in f[BIN].items():
            q, k, v = saved_qkv(g)
            s = q.shape[0]
            o, lse = attention(q, k, v, np.arange(s), np.arange(s), True)
            expect(np.allclose(g["tensor_o"][()].reshape(o.shape), o, atol=1e-9), f"{name}: saved O is not attention of saved Q, K, V")
            expect(np.allclose(g["tensor_lse"][()].reshape(lse.shape), lse, atol=1e-9), f"{name}: saved lse")


def scenario_ring_overlap(env: Env) -> None:
    """On the CPU backend polling lets exchanges complete while attention still runs, and the run
    records how it overlaps. That the overlap hides time is shown on a simulated link, where the
    transfer is long enough to measure (scenarios_sim.py, sim_overlap_by_time); with polling off
    nothing is asserted about the fraction, which is 0 by construction there."""
    out = env.workdir / "overlap.h5"
    # Whether one exchange completes during the attention depends on the host: a busy or
    # oversubscribed one may not run the peer then (a third of 3 did, once, under load). With
    # 20 timed steps (20 exchanges on rank 0), at least one completing is what polling must give.
    args = ("--block", "256", "--layout", "contiguous", "--causal", "0", "--heads", "8", "--head-dim", "128")
    run_ok(env, 2, out, *args, "--iters", "20")
    with h5py.File(out) as f:
        (g,) = f[BIN].values()
        frac = g.attrs["transfer_done_during_compute_fraction"]
        print(f"  exchanges completed while attention ran: {frac:.2f}")
        expect(frac > 0, f"no exchange completed while attention ran (fraction {frac}): polling does not progress MPI")
        expect("MPI_Testall" in g.attrs["overlap_mechanism"], "overlap mechanism not recorded")
    run_ok(env, 2, out, *args, "--cpu-progress", "none")
    with h5py.File(out) as f:
        (g,) = f[BIN].values()
        expect("polling off" in g.attrs["overlap_mechanism"], "polling off not recorded")


def scenario_ring_one_rank(env: Env) -> None:
    out = env.workdir / "one.h5"
    run_ok(env, 1, out, "--block", "8", "--layout", "contiguous,zigzag,striped", "--variant", "ring,allgather")
    with h5py.File(out) as f:
        for name, g in f[BIN].items():
            expect(g.attrs["check_passed"] == 1 and g.attrs["bytes_sent_per_rank_per_layer"] == 0, f"{name}: one-rank ring")


def scenario_ring_bad_input(env: Env) -> None:
    cases = {
        "odd zig-zag block": (["--block", "3", "--layout", "zigzag"], "even block size"),
        "heads not a multiple of kv heads": (["--heads", "6", "--kv-heads", "4"], "multiple of --kv-heads"),
        "unsupported head dim": (["--head-dim", "96"], "64 or 128"),
        "unknown layout": (["--layout", "spiral"], "spiral"),
        "group not dividing ranks": (["--cp", "3"], "divisor"),
        "does not fit": (["--block", "64G"], "available"),
        "cudnn on cpu": (["--attn-kernel", "cudnn"], "--backend cuda"),
    }
    expect_refused(env, BIN, cases)


def scenario_ring_plots(env: Env) -> None:
    out = env.workdir / "plots.h5"
    run_ok(env, 2, out, "--block", "4,8", "--layout", "contiguous,zigzag", "--causal", "1", "--pass", "fwd,fwd_bwd")
    plots = env.workdir / "plots"
    python = sys.executable
    proc = subprocess.run([*module_command("plots.plot", python), str(out), "--out", str(plots)], capture_output=True, text=True)
    expect(proc.returncode == 0, f"plot.py failed: {proc.stderr}")
    names = sorted(p.name for p in plots.glob("*.png"))
    expect(any(n.startswith("ring_sweep") for n in names), f"no sweep plot in {names}")
    expect(any(n.startswith("ring_rounds") for n in names), f"no per-round heatmap in {names}")
    expect("ring_sweep_ring_zigzag_causal_fwd_bwd.png" in names, f"no forward-and-backward sweep in {names}")
    expect("ring_rounds_ring_causal_c8_bwd.png" in names, f"no backward per-round heatmap in {names}")


def scenario_ring_model_agrees(env: Env) -> None:
    """`model --section ring` predicts the bytes per rank and the memory the benchmark predicts
    (and measures), for full and causal, MHA and GQA, one and two sequences per micro-batch."""
    for batch, kv, causal in ((1, 4, "0"), (2, 2, "1")):
        out = env.workdir / f"model_b{batch}.h5"
        run_ok(env, 2, out, "--block", "32", "--batch", str(batch), "--heads", "4", "--kv-heads", str(kv),
               "--head-dim", "64", "--causal", causal, "--layout", "zigzag", "--variant", "ring")
        with h5py.File(out) as f:
            for name, g in f["ring_attention"].items():
                a = g.attrs
                pred = model_prediction(env, "--section", "ring", "--seq", "64", "--cp", "2", "--batch", str(batch),
                                        "--hidden", "256", "--heads", "4", "--kv-heads", str(kv), "--dtype", "fp32",
                                        *(["--causal"] if causal == "1" else []))
                expect(pred["bytes_per_rank"] == a["pred_bytes_sent_per_rank_per_layer"]
                       == a["bytes_sent_per_rank_per_layer"], f"{name}: bytes, model {pred['bytes_per_rank']}")
                expect(pred["memory_bytes"] == a["pred_memory_bytes"] == a["memory_method_bytes"],
                       f"{name}: memory, model {pred['memory_bytes']} vs {a['pred_memory_bytes']}")


def check_backward_file(path: Path, ranks: int, cp: int, e: int) -> int:
    """The fwd_bwd cases of a run: checks passed, and the backward's bytes, hops, work and
    tables against counts made here: K/V travel N_c - 1 hops, the dK/dV partial sums N_c."""
    n_cases = 0
    with h5py.File(path) as f:
        for name, g in f[BIN].items():
            a = g.attrs
            if a.get("pass") != "fwd_bwd":
                continue
            n_cases += 1
            c, kv, d, b = int(a["c"]), int(a["kv_heads"]), int(a["head_dim"]), int(a["batch"])
            causal, layout, variant = bool(a["causal"]), a["layout"], a["variant"]
            eg = {"fp32": 4, "fp64": 8, "bf16": 2}[a["grad_dtype"]]
            expect(a["check_passed"] == 1, f"{name}: check_passed {a['check_passed']} ({a.get('check_note', '')})")
            expect(max(a["check_err_dq"], a["check_err_dk"], a["check_err_dv"]) <= a["grad_check_tolerance"],
                   f"{name}: gradient errors above tolerance")
            rows = 2 * c * b * kv * d  # elements of one [K | V] (or [dK | dV]) block
            if variant == "ring":
                pred = (cp - 1) * rows * e + (cp * rows * eg if cp > 1 else 0)
                expect(a["bwd_kv_hops"] == cp - 1 and a["bwd_dkv_hops"] == (cp if cp > 1 else 0), f"{name}: hops")
            else:
                pred = (cp - 1) * rows * eg  # the reduce-scatter of all N_c blocks' partial sums
            expect(a["pred_bwd_bytes_sent_per_rank_per_layer"] == pred,
                   f"{name}: predicted backward bytes {a['pred_bwd_bytes_sent_per_rank_per_layer']} != {pred}")
            expect(list(g["bwd_cp_bytes_sent"][()].ravel()) == [pred] * ranks,
                   f"{name}: backward bytes sent {g['bwd_cp_bytes_sent'][()]} != {pred}")
            want = expected_work(layout, cp, c, causal, b, variant)
            if variant == "ring" and cp > 1:
                want = np.vstack([want, np.zeros((1, cp), np.int64)])  # the home hop: no work
            want = np.tile(want, (1, ranks // cp))
            work = np.atleast_2d(g["bwd_round_work_pairs"][()])
            expect(work.shape == want.shape and np.array_equal(work, want),
                   f"{name}: backward work per round\n{work}\n!= {want}")
            for t in ("bwd_round_compute_s", "bwd_round_wait_s", "bwd_round_transfer_s"):
                expect(g[t].shape == want.shape and np.all(g[t][()] >= 0), f"{name}: {t}")
            if eg == e:
                expect(a["bwd_memory_method_bytes"] == a["pred_bwd_memory_bytes"],
                       f"{name}: backward memory {a['bwd_memory_method_bytes']} != {a['pred_bwd_memory_bytes']}")
            expect(a["time_median_s"] > 0 and a["phase_fwd_median_s"] > 0 and a["phase_bwd_median_s"] > 0,
                   f"{name}: pass times")
            # What the backward allocates on top of the forward, counted here: dO, delta (the
            # lse's size), dQ; ring: this round's contribution and two travelling dK/dV blocks;
            # all-gather: dK/dV of all s tokens, packed per owner, and the own result.
            fwd = f[BIN][name.split("_fwd_bwd")[0]].attrs
            ge = e  # the CPU kernel accumulates in the storage type
            q = c * b * int(a["heads"]) * d
            extra = q * e + b * int(a["heads"]) * c * e + q * ge
            extra += (rows * ge + 2 * rows * eg) if variant == "ring" else (cp * rows * ge + cp * rows * eg + rows * eg)
            got = a["memory_allocated_peak_bytes"] - fwd["memory_allocated_peak_bytes"]
            expect(got == extra, f"{name}: the backward allocated {got} bytes more than the forward, counted {extra}")
            if cp > 1:
                expect(a["bwd_measured_F_flops"] > 0 and a["bwd_measured_W_Bps"] > 0 and a["bwd_c_star_tokens"] > 0,
                       f"{name}: F_b, W_b, c*_bwd")
    return n_cases


def scenario_ring_backward(env: Env, ranks: int, dtype: str, cp: int) -> None:
    out = env.workdir / "ring_bwd.h5"
    e = {"fp32": 4, "fp64": 8}[dtype]
    run_ok(env, ranks, out, "--dtype", dtype, "--block", "2,6", "--layout", "contiguous,zigzag,striped",
           "--variant", "ring,allgather", "--causal", "0,1", "--heads", "4", "--kv-heads", "2",
           "--cp", str(cp), "--pass", "fwd,fwd_bwd")
    n = check_backward_file(out, ranks, cp, e)
    expect(n == 24, f"{n} backward cases, expected 24")
    check_file(out, ranks, cp, e)  # the forward figures of both passes' cases
    # Partial sums in bf16 (rounded at every hop), two sequences per micro-batch.
    run_ok(env, ranks, out, "--dtype", dtype, "--block", "4", "--layout", "zigzag", "--batch", "2",
           "--heads", "4", "--cp", str(cp), "--pass", "fwd,fwd_bwd", "--grad-dtype", "bf16")
    expect(check_backward_file(out, ranks, cp, e) == 1, "bf16 partial sums case missing")


def scenario_ring_backward_tensors(env: Env) -> None:
    """Saved dO, dQ, dK, dV (global token order) equal the gradients numpy computes from the
    saved Q, K, V and dO."""
    out = env.workdir / "bwd_tensors.h5"
    run_ok(env, 2, out, "--dtype", "fp64", "--block", "6", "--layout", "zigzag,striped", "--variant",
           "ring,allgather", "--causal", "0,1", "--heads", "2", "--kv-heads", "1", "--pass", "fwd_bwd",
           "--save-tensors")
    with h5py.File(out) as f:
        for name, g in f[BIN].items():
            q, k, v = saved_qkv(g)
            d_o = g["tensor_d_o"][()].reshape(q.shape)
            pos = np.arange(q.shape[0])
            dq, dk, dv = attention_backward(q, k, v, d_o, pos, pos, bool(g.attrs["causal"]))
            for t, want in (("dq", dq), ("dk", dk), ("dv", dv)):
                got = g["tensor_" + t][()].reshape(want.shape)
                expect(np.allclose(got, want, atol=1e-9), f"{name}: saved {t} differs from numpy's by "
                       f"{np.abs(got - want).max():.3g}")


def scenario_ring_backward_model_agrees(env: Env) -> None:
    """`model --section ring` prints the backward bytes per rank and memory the benchmark
    predicts and measures."""
    out = env.workdir / "bwd_model.h5"
    run_ok(env, 2, out, "--block", "32", "--batch", "2", "--heads", "4", "--kv-heads", "2", "--head-dim", "64",
           "--causal", "1", "--layout", "zigzag", "--variant", "ring", "--pass", "fwd_bwd")
    proc = run_model(env, "--section", "ring", "--seq", "64", "--cp", "2", "--batch", "2", "--hidden", "256",
                     "--heads", "4", "--kv-heads", "2", "--dtype", "fp32", "--causal", "--grad-dtype", "fp32")
    lines = model_lines(proc.stdout)
    value = lambda label: float(next(v for (blk, lab), v in lines.items()  # noqa: E731
                                     if lab.startswith(label)).split()[0])
    with h5py.File(out) as f:
        (g,) = f[BIN].values()
        a = g.attrs
        bytes_ = value("bytes per layer bwd per rank")
        expect(bytes_ == a["pred_bwd_bytes_sent_per_rank_per_layer"] == a["bwd_bytes_sent_per_rank_per_layer"],
               f"backward bytes: model {bytes_}, benchmark {a['pred_bwd_bytes_sent_per_rank_per_layer']}, "
               f"measured {a['bwd_bytes_sent_per_rank_per_layer']}")
        mem = value("backward memory per rank")
        expect(mem == a["pred_bwd_memory_bytes"] == a["bwd_memory_method_bytes"],
               f"backward memory: model {mem}, benchmark {a['pred_bwd_memory_bytes']}")


def scenario_ring_backward_bad_input(env: Env) -> None:
    cases = {
        "unknown pass": (["--pass", "fwd,bwd"], "unknown pass 'bwd'"),
        "empty pass list": (["--pass", ","], "--pass"),
        "unknown grad dtype": (["--pass", "fwd_bwd", "--grad-dtype", "fp16"], "--grad-dtype"),
    }
    expect_refused(env, BIN, cases)


def scenario_ring_docs_tensors(env: Env) -> None:
    """Packed documents, 2 ranks, every layout (per-document zig-zag with its padding and the
    balanced one too) and variant, causal and full within documents, forward and backward: the
    saved O, lse, dQ, dK and dV equal attention numpy computes from the saved inputs and the
    recorded cu_seqlens (padding rows: no output, no gradient), the per-round work is the document
    mask's own count over each rank's recorded rows, and for the plain layouts a skipped block is
    counted where the mask says so.
    Both ways of calling the kernel run it: one call per pair of document runs (the default) and
    one per ring block (--varlen-calls block). Block calls: one per range of adjacent token rows
    that sees a key of the round's block, counted here from the rows and the mask; never more
    than the per-pair calls, fewer for the balanced layout."""
    made = {calls: check_docs_tensors(env, calls) for calls in ("block", "pair")}
    for name, block in made["block"].items():
        pair = made["pair"][name]
        expect(np.all(block <= pair), f"{name}: block calls {block.tolist()} above pair calls {pair.tolist()}")
        if "balanced" in name:
            expect(block.sum() < pair.sum(), f"{name}: block calls {block.sum()}, pair calls {pair.sum()}")


def block_calls(rows: np.ndarray, causal: bool, pack: "Pack") -> np.ndarray:
    """[rounds, ranks] kernel calls of --varlen-calls block: per rank, its ranges of adjacent
    rows that hold tokens, each called once per round in which it sees a key of the block."""
    n = len(rows)
    calls = np.zeros((n, n), dtype=np.int64)
    for r in range(n):
        ranges, run = [], []
        for p in rows[r]:
            if pack.doc(p) >= 0:
                run.append(p)
            elif run:
                ranges.append(np.array(run))
                run = []
        if run:
            ranges.append(np.array(run))
        for rnd in range(n):
            calls[rnd, r] = sum(bool(visible(q, rows[(r - rnd) % n], causal, pack).any()) for q in ranges)
    return calls


def check_docs_tensors(env: Env, calls: str, variants: str = "ring,allgather") -> dict:
    """scenario_ring_docs_tensors with --varlen-calls `calls` for `variants`; returns each ring
    case's recorded kernel calls per round and rank."""
    made = {}
    out = env.workdir / f"docs_{calls}_{variants.replace(',', '_')}.h5"
    proc = run_ok(env, 2, out, "--dtype", "fp64", "--block", "24", "--layout",
                  "contiguous,zigzag,striped,doc_zigzag,balanced", "--variant", variants,
                  "--causal", "0,1", "--heads", "2", "--kv-heads", "1", "--pass", "fwd_bwd",
                  "--docs", "uniform:1:9", "--save-tensors", "--varlen-calls", calls)
    expect("FAIL" not in proc.stdout, "a check failed", proc)
    n = 2
    with h5py.File(out) as f:
        names = list(f[BIN])
        cases = 10 * len(variants.split(","))
        expect(len(names) == cases, f"expected {cases} cases, got {names}")
        for name in names:
            g = f[BIN][name]
            a = g.attrs
            expect(int(a["check_passed"]) == 1, f"{name}: the benchmark's own check failed")
            expect(a.get("varlen_calls") == (calls if a["variant"] == "ring" else None), f"{name}: varlen_calls {a.get('varlen_calls')}")
            pack = Pack.of(g)
            s, c, causal, layout = int(a["s"]), int(a["c"]), bool(a["causal"]), a["layout"]
            lengths = pack.lengths
            expect(pack.starts[0] == 0 and pack.starts[-1] == s and np.all(lengths >= 1)
                   and np.all(lengths[:-1] <= 9), f"{name}: documents {pack.starts} {lengths}")
            if layout == "doc_zigzag":  # TE's rule: every document in a multiple of 2 N_c slots
                slots = np.diff(pack.starts)
                expect(np.all(slots % (2 * n) == 0) and np.all(slots - lengths < 2 * n), f"{name}: padding {slots} {lengths}")
                expect(int(a["docs_pad_slots"]) == int((slots - lengths).sum()), f"{name}: pad slots")
            else:
                expect("cu_seqlens_padded" not in g and int(a["docs_pad_slots"]) == 0, f"{name}: padding")
            expect(int(a["docs_count"]) == len(lengths), f"{name}: docs_count")
            b, heads, kv, d = 1, 2, 1, int(a["head_dim"])
            tok = pack.tokens()
            q = g["tensor_q"][()].reshape(s, b, heads, d)
            k = g["tensor_k"][()].reshape(s, b, kv, d)
            v = g["tensor_v"][()].reshape(s, b, kv, d)
            d_o = g["tensor_d_o"][()].reshape(s, b, heads, d)
            o, lse = attention(q[tok], k[tok], v[tok], tok, tok, causal, pack)
            expect(np.allclose(g["tensor_o"][()].reshape(q.shape)[tok], o, atol=1e-9), f"{name}: O differs")
            expect(np.allclose(g["tensor_lse"][()].reshape(s, b, heads)[tok], lse, atol=1e-9), f"{name}: lse differs")
            pad = np.setdiff1d(np.arange(s), tok)
            for t, want in zip(("dq", "dk", "dv"), attention_backward(q[tok], k[tok], v[tok], d_o[tok], tok, tok, causal, pack)):
                got = g["tensor_" + t][()].reshape((s,) + want.shape[1:])
                expect(np.allclose(got[tok], want, atol=1e-9), f"{name}: {t} differs by {np.abs(got[tok] - want).max():.3g}")
                expect(np.all(got[pad] == 0), f"{name}: {t} of padding slots is not 0")
            # Work per round and rank from each rank's recorded rows and the document mask.
            rows = g["row_positions"][()].reshape(c, n).T  # [c, ranks] as recorded
            expect(sorted(rows.reshape(-1).tolist()) == list(range(s)), f"{name}: rows are not every slot once")
            work = np.zeros((n, n), dtype=np.int64)
            for r in range(n):
                for rnd in range(n):
                    work[rnd, r] = visible(rows[r], rows[(r - rnd) % n], causal, pack).sum()
            if a["variant"] == "allgather":
                work = work.sum(axis=0, keepdims=True)
            got_work = g["round_work_pairs"][()].reshape(work.shape)
            expect(np.array_equal(got_work, work), f"{name}: work {got_work.tolist()} != {work.tolist()}")
            total = work.sum(axis=0)
            expect(abs(float(a["work_max_over_mean"]) - total.max() / total.mean()) < 1e-9, f"{name}: imbalance")
            # The efficiency's first factor is that balance (absent only with the ideal).
            expect("ideal_note" in a or abs(float(a["eff_balance"]) - total.mean() / total.max()) < 1e-9,
                   f"{name}: balance factor {a.get('eff_balance')}")
            if a["variant"] == "ring":
                made[name] = g["round_kernel_calls"][()].reshape(n, n)
                if calls == "block":
                    want = block_calls(rows, causal, pack)
                    expect(np.array_equal(made[name], want), f"{name}: kernel calls {made[name].tolist()} != {want.tolist()}")
            if layout in ("contiguous", "zigzag", "striped"):
                skipped = np.zeros((n, n), dtype=np.int64)
                for r in range(n):
                    for rnd in range(n):
                        for qs in segments(layout, r, n, c):
                            for ks in segments(layout, (r - rnd) % n, n, c):
                                skipped[rnd, r] += visible(np.array(qs), np.array(ks), causal, pack).sum() == 0
                expect(np.array_equal(g["round_blocks_skipped"][()].reshape(n, n), skipped), f"{name}: skipped blocks")
        print(f"  ok: {len(names)} cases against numpy with their documents, {calls} calls")
    return made


def segments(layout: str, rank: int, n: int, c: int) -> list[list[int]]:
    """The runs of a rank's tokens that attention is computed on (the layout's segments)."""
    if layout == "zigzag":
        h = c // 2
        return [list(range(rank * h, (rank + 1) * h)), list(range((2 * n - 1 - rank) * h, (2 * n - rank) * h))]
    return [positions(layout, rank, n, c)]


def scenario_ring_docs_np4(env: Env) -> None:
    """4 ranks, fp32, GQA, long-tailed and lognormal documents, forward and backward: every case
    passes its check against the per-document reference, and the zig-zag layout's predicted
    efficiency is reported beside the measured one."""
    out = env.workdir / "docs4.h5"
    for spec in ("lognormal:40:1", "pareto:8:1.1"):
        proc = run_ok(env, 4, out, "--block", "64", "--layout", "contiguous,zigzag,striped,doc_zigzag,balanced", "--causal", "1",
                      "--heads", "4", "--kv-heads", "2", "--pass", "fwd_bwd", "--docs", spec)
        with h5py.File(out) as f:
            for name, g in f[BIN].items():
                a = g.attrs
                expect(int(a["check_passed"]) == 1, f"{spec} {name}: check failed", proc)
                for key in ("pred_efficiency_lockstep", "pred_efficiency_balance"):
                    expect(0 < float(a[key]) <= 1, f"{spec} {name}: {key} = {a[key]}")
                expect(0 < float(a["efficiency_vs_ideal_fwd"]) < 10, f"{spec} {name}: no measured efficiency")
                for p in ("", "bwd_"):
                    # Measured, and tiny here: bounds that only catch a factor not written.
                    expect(0 < float(a[p + "eff_pair_rate"]) < 100 and 0 < float(a[p + "eff_exchange"]) < 100,
                           f"{spec} {name}: {p}factors")
                expect(1 <= float(a["work_max_over_mean"]) < 4, f"{name}: imbalance {a['work_max_over_mean']}")
        print(f"  ok: {spec}")


def scenario_ring_docs_bad_input(env: Env) -> None:
    """Bad --docs: one message, exit 2, no file."""
    lens = env.workdir.parent / f"{env.workdir.name}-lens.txt"
    lens.write_text("12\n-4\n")
    try:
        expect_refused(env, BIN, {
            "length 0": (["--docs", "fixed:0"], "whole number of tokens >= 1"),
            "unknown distribution": (["--docs", "zipf:2"], "unknown distribution"),
            "bad file": (["--docs", f"file:{lens}"], "line 2"),
            "missing file": (["--docs", "file:/nonexistent/lengths"], "cannot read"),
            "pack too small": (["--docs", "uniform:5000:6000", "--block", "64"], "cannot hold a document"),
            "document layout without documents": (["--layout", "balanced"], "give --docs"),
            "negative chunk": (["--docs", "fixed:8", "--balanced-chunk", "-2"], "--balanced-chunk"),
        })
    finally:
        lens.unlink()


def scenario_ring_watchdog_names_peer(env: Env) -> None:
    """Rank 1 frozen (SIGSTOP) mid-sweep: rank 0, waiting on its data, counts as waiting (twice
    the timeout) and names rank 1 instead of blaming itself."""
    # Frozen 3 s into the first case (after its progress line), whatever start-up takes here.
    proc = env.mpirun_stopping(2, 1, 3.0, BIN, "--backend", "cpu", "--block", "512", "--iters", "100000",
                               "--warmup", "1", "--timeout", "2", "--check", "0", "--pass", "fwd_bwd",
                               "--out", str(env.workdir / "stall.h5"))
    expect(proc.stopped == 1, f"{proc.stopped} processes of rank 1 frozen, expected 1", proc)
    expect(proc.returncode != 0, "a job with a frozen rank exited 0", proc)
    lines = [l for l in proc.stderr.splitlines() if "timed out" in l and l.startswith("[rank 0 ")]
    expect(lines, "rank 0 printed no timeout message", proc)
    print("\n".join(lines))
    expect(all("this rank made no progress" not in l for l in lines), f"rank 0 blames itself: {lines}", proc)
    expect(all("rank 1" in l and "waiting" in l for l in lines), f"rank 0 does not name rank 1: {lines}", proc)
    # Twice the 2 s timeout: over 4 s idle when its watchdog (which looks every 0.1 s) fires,
    # never the 2-3 s of the plain timeout (the check). A busy host may wake that thread late:
    # the ceiling (30 s) only catches a watchdog that does not fire when it should.
    idle = [int(m.group(1)) for l in lines for m in [re.search(r"no progress for (\d+) s", l)] if m]
    expect(len(idle) == len(lines) and all(4 <= s <= 30 for s in idle),
           f"rank 0 did not get the longer timeout (idle {idle} s, expected 4 to 30): {lines}", proc)


SCENARIOS = {
    "ring_docs_tensors": scenario_ring_docs_tensors,
    "ring_docs_np4": scenario_ring_docs_np4,
    "ring_docs_bad_input": scenario_ring_docs_bad_input,
    "ring_bwd_np2_fp64": lambda e: scenario_ring_backward(e, 2, "fp64", 2),
    "ring_bwd_np4_fp32": lambda e: scenario_ring_backward(e, 4, "fp32", 4),
    "ring_bwd_np4_cp2": lambda e: scenario_ring_backward(e, 4, "fp64", 2),
    "ring_bwd_tensors": scenario_ring_backward_tensors,
    "ring_bwd_model_agrees": scenario_ring_backward_model_agrees,
    "ring_bwd_bad_input": scenario_ring_backward_bad_input,
    "ring_watchdog_peer": scenario_ring_watchdog_names_peer,
    "ring_model_agrees": scenario_ring_model_agrees,
    "ring_np2_fp64": lambda e: scenario_ring(e, 2, "fp64", 2),
    "ring_np4_fp32": lambda e: scenario_ring(e, 4, "fp32", 4),
    "ring_np4_cp2": lambda e: scenario_ring(e, 4, "fp64", 2),
    "ring_save_tensors": scenario_ring_save_tensors,
    "ring_overlap": scenario_ring_overlap,
    "ring_one_rank": scenario_ring_one_rank,
    "ring_bad_input": scenario_ring_bad_input,
    "ring_plots": scenario_ring_plots,
}


if __name__ == "__main__":
    sys.exit(run_cli(SCENARIOS, __doc__))
