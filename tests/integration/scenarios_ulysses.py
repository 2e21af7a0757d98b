#!/usr/bin/env python3
"""Integration scenarios for ulysses, one per ctest test (CPU backend under mpirun).

Bytes are checked against the all-to-all and ring block sizes computed here, the output
against attention computed with numpy from the saved inputs.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_scenario import Env, expect, model_prediction, expect_refused, run_cli  # noqa: E402
from scenarios_ring import attention, attention_backward  # noqa: E402

BIN = "ulysses"


def run_ok(env: Env, ranks: int, out: Path, *args: str) -> subprocess.CompletedProcess:
    proc = env.mpirun(ranks, BIN, "--backend", "cpu", "--iters", "3", "--warmup", "1", "--out", str(out), *args)
    expect(proc.returncode == 0, f"{BIN} failed", proc)
    expect(proc.stdout.count("Ulysses, hybrids and ring") == 1, "summary table not printed once", proc)
    return proc


def expected_bytes(a: h5py.AttributeManager, e: int) -> tuple[int, int]:
    """(Ulysses all-to-all bytes, ring bytes) one rank sends per step."""
    u, n_c, s = int(a["u"]), int(a["n_c"]), int(a["s"])
    heads, kv, d, b = int(a["heads"]), int(a["kv_heads"]), int(a["head_dim"]), int(a["batch"])
    t = s // n_c
    kv_per_rank = kv // u if kv >= u else 1
    q_block = t * b * (heads // u) * d * e
    kv_block = t * b * kv_per_rank * d * e
    uly = (u - 1) * (2 * q_block + 2 * kv_block)
    groups = n_c // u
    ring = (groups - 1) * 2 * (u * t) * b * kv_per_rank * d * e
    return uly, ring


def check_file(path: Path, ranks: int, e: int) -> dict[str, h5py.AttributeManager]:
    seen = {}
    with h5py.File(path) as f:
        expect(f.attrs["complete"] == 1, "file not complete")
        for name, g in f[BIN].items():
            a = g.attrs
            expect(a["check_passed"] == 1, f"{name}: check_passed {a['check_passed']} ({a.get('check_note', '')})")
            uly, ring = expected_bytes(a, e)
            expect(a["pred_ulysses_bytes_sent_per_rank"] == uly, f"{name}: predicted a2a bytes {a['pred_ulysses_bytes_sent_per_rank']} != {uly}")
            expect(list(np.ravel(g["ulysses_bytes_sent"][()])) == [uly] * ranks, f"{name}: a2a bytes {g['ulysses_bytes_sent'][()]} != {uly}")
            expect(list(np.ravel(g["ring_bytes_sent"][()])) == [ring] * ranks, f"{name}: ring bytes {g['ring_bytes_sent'][()]} != {ring}")
            # The harness's dataset counts the step's traffic on every communicator it used.
            expect(list(np.ravel(g["bytes_sent"][()])) == [uly + ring] * ranks, f"{name}: bytes_sent {g['bytes_sent'][()]} != {uly + ring}")
            if int(a["u"]) > 1:
                for phase in ("pack", "a2a_q", "a2a_k", "a2a_v", "attention", "a2a_out", "unpack"):
                    expect(g[f"phase_{phase}_s"].shape == (3, ranks), f"{name}: phase {phase} missing")
                if not a["kv_replicated"]:
                    expect(np.isclose(a["pred_ulysses_bytes_no_replication"], uly), f"{name}: METHODS.md form differs")
                else:
                    expect(uly > a["pred_ulysses_bytes_no_replication"], f"{name}: replication must cost bytes")
            seen[name] = dict(a)
    return seen


def scenario_np2(env: Env) -> None:
    out = env.workdir / "u2.h5"
    run_ok(env, 2, out, "--dtype", "fp64", "--seq", "8,12", "--causal", "0,1", "--heads", "4", "--kv-heads", "2")
    seen = check_file(out, 2, 8)
    expect({int(a["u"]) for a in seen.values()} == {1, 2}, f"degrees {[a['u'] for a in seen.values()]}")


def scenario_np4(env: Env) -> None:
    out = env.workdir / "u4.h5"
    # Within the GQA limit: 8 heads, 4 K/V heads, u in {1, 2, 4}; hybrids on every layout.
    run_ok(env, 4, out, "--seq", "16,32", "--causal", "0,1", "--heads", "8", "--kv-heads", "4",
           "--layout", "contiguous,zigzag,striped")
    seen = check_file(out, 4, 4)
    expect({int(a["u"]) for a in seen.values()} == {1, 2, 4}, "degrees")
    expect(sum(int(a["u"]) == 2 for a in seen.values()) == 12, "hybrid cases per layout")
    # The default sweep (all degrees) under a GQA limit says which degree it leaves out.
    proc = run_ok(env, 4, out, "--seq", "16", "--heads", "4", "--kv-heads", "2")
    expect({int(a["u"]) for a in check_file(out, 4, 4).values()} == {1, 2}, "degrees under GQA")
    expect(proc.stderr.count("skips u = 4 for N_c = 4") == 1 and "--kv-replicate" in proc.stderr,
           "no note on the skipped degree", proc)
    # Beyond the limit: 2 K/V heads on 4 ranks only with replication.
    run_ok(env, 4, out, "--seq", "16", "--heads", "4", "--kv-heads", "2", "--ulysses-degree", "4",
           "--kv-replicate")
    seen = check_file(out, 4, 4)
    expect(all(a["kv_replicated"] == 1 for a in seen.values()), "replication not recorded")


def scenario_weak_scaling(env: Env) -> None:
    """s and N_c grow together (--seq-per-rank, --cp list): Ulysses bytes per rank stay flat."""
    out = env.workdir / "weak.h5"
    run_ok(env, 4, out, "--seq-per-rank", "8", "--cp", "2,4", "--ulysses-degree", "2", "--causal", "1")
    seen = check_file(out, 4, 4)
    by_nc = {int(a["n_c"]): a for a in seen.values()}
    expect(set(by_nc) == {2, 4} and by_nc[4]["s"] == 32 and by_nc[2]["s"] == 16, f"cases {sorted(seen)}")
    expect(by_nc[2]["ulysses_bytes_sent_per_rank"] == by_nc[4]["ulysses_bytes_sent_per_rank"], "bytes per rank changed")


def scenario_save_tensors(env: Env) -> None:
    out = env.workdir / "t.h5"
    run_ok(env, 4, out, "--dtype", "fp64", "--seq", "16", "--heads", "4", "--kv-heads", "2", "--ulysses-degree", "2",
           "--layout", "zigzag", "--save-tensors")
    with h5py.File(out) as f:
        (g,) = f[BIN].values()
        s, a, kv, d = 16, 4, 2, int(g.attrs["head_dim"])
        q = g["tensor_q"][()].reshape(s, 1, a, d)
        k = g["tensor_k"][()].reshape(s, 1, kv, d)
        v = g["tensor_v"][()].reshape(s, 1, kv, d)
        o, _ = attention(q, k, v, np.arange(s), np.arange(s), True)
        expect(np.allclose(g["tensor_o"][()].reshape(o.shape), o, atol=1e-9), "saved O is not attention of saved Q, K, V")


def scenario_bad_input(env: Env) -> None:
    cases = {
        "heads not divisible by the degree": (["--heads", "6", "--ulysses-degree", "4"], "query heads"),
        "s not divisible": (["--seq", "30"], "multiple of the 4 ranks"),
        "degree not dividing N_c": (["--ulysses-degree", "3"], "must divide the context-parallel group"),
        "beyond the K/V heads": (["--kv-heads", "2", "--ulysses-degree", "4"], "--kv-replicate"),
        "unsupported head dim": (["--head-dim", "80"], "64 or 128"),
        "two sequence lengths": (["--seq", "64", "--seq-per-rank", "16"], "excludes"),
        # Before the degree was checked, 0 divided by zero on every rank (SIGFPE).
        "degree zero": (["--ulysses-degree", "2,0"], "--ulysses-degree: 0 is out of range"),
        "no tokens per rank": (["--seq-per-rank", "0"], "--seq-per-rank 0 must be >= 1"),
    }
    expect_refused(env, BIN, cases)


def scenario_plots(env: Env) -> None:
    out = env.workdir / "p.h5"
    run_ok(env, 4, out, "--seq", "16,32", "--pass", "fwd,fwd_bwd")
    plots = env.workdir / "plots"
    script = Path(__file__).resolve().parents[2] / "scripts" / "plot.py"
    proc = subprocess.run([sys.executable, str(script), str(out), "--out", str(plots)], capture_output=True, text=True)
    expect(proc.returncode == 0, f"plot.py failed: {proc.stderr}")
    names = sorted(p.name for p in plots.glob("*.png"))
    for want in ("ulysses_bytes.png", "ulysses_time_causal.png", "ulysses_phases_causal_s32.png",
                 "ulysses_phases_causal_s32_fwd_bwd.png", "ulysses_bytes_bwd.png"):
        expect(want in names, f"{want} not in {names}")


def scenario_model_agrees(env: Env) -> None:
    """`model --section ulysses --ulysses-degree u` predicts the bytes per rank each case of
    the benchmark predicts (and measures): plain ring, hybrid and plain Ulysses, full and GQA,
    two sequences per micro-batch."""
    for kv in (4, 2):
        out = env.workdir / f"model_kv{kv}.h5"
        run_ok(env, 4, out, "--seq", "64", "--batch", "2", "--heads", "4", "--kv-heads", str(kv),
               "--head-dim", "64", "--causal", "1", "--layout", "zigzag")
        for name, a in check_file(out, 4, 4).items():
            pred = model_prediction(env, "--section", "ulysses", "--seq", "64", "--batch", "2", "--hidden", "256",
                                    "--heads", "4", "--kv-heads", str(kv), "--cp", "4",
                                    "--ulysses-degree", str(int(a["u"])), "--dtype", "fp32", "--causal")
            expect(pred["bytes_per_rank"] == a["pred_bytes_sent_per_rank"] == a["bytes_sent_per_rank"],
                   f"{name}: model {pred['bytes_per_rank']} vs bench {a['pred_bytes_sent_per_rank']}")


def scenario_backward(env: Env) -> None:
    """--pass fwd_bwd on 4 ranks, every degree (plain ring, hybrids on every layout, plain
    Ulysses, replicated K/V heads): gradients checked, and the backward's bytes: dO, dQ, dK, dV
    take the forward's all-to-alls (the same bytes), the hybrid's ring moves K/V N_c/u - 1 hops
    and the dK/dV partial sums N_c/u hops."""
    for kv, extra in ((4, ["--layout", "contiguous,zigzag,striped"]), (2, ["--kv-replicate"])):
        out = env.workdir / f"bwd_kv{kv}.h5"
        run_ok(env, 4, out, "--seq", "16", "--causal", "0,1", "--heads", "8", "--kv-heads", str(kv),
               "--pass", "fwd_bwd", *extra)
        with h5py.File(out) as f:
            degrees = set()
            for name, g in f[BIN].items():
                a = g.attrs
                expect(a["check_passed"] == 1, f"{name}: check_passed {a['check_passed']} ({a.get('check_note', '')})")
                u, n_c, s = int(a["u"]), int(a["n_c"]), int(a["s"])
                degrees.add(u)
                uly, ring = expected_bytes(a, 4)
                groups = n_c // u
                # The ring backward: K/V as in the forward, plus one more hop of the partial sums.
                ring_bwd = ring + (groups * ring // (groups - 1) if groups > 1 else 0)
                expect(list(np.ravel(g["bwd_ulysses_bytes_sent"][()])) == [uly] * 4,
                       f"{name}: backward a2a bytes {g['bwd_ulysses_bytes_sent'][()]} != the forward's {uly}")
                expect(a["pred_bwd_ulysses_bytes_sent_per_rank"] == uly, f"{name}: predicted backward a2a bytes")
                expect(list(np.ravel(g["bwd_ring_bytes_sent"][()])) == [ring_bwd] * 4,
                       f"{name}: backward ring bytes {g['bwd_ring_bytes_sent'][()]} != {ring_bwd}")
                expect(a["pred_bwd_ring_bytes_sent_per_rank"] == ring_bwd, f"{name}: predicted backward ring bytes")
                expect(list(np.ravel(g["bytes_sent"][()])) == [2 * uly + ring + ring_bwd] * 4,
                       f"{name}: the step's bytes {g['bytes_sent'][()]}")
                if u > 1:
                    for phase in ("bwd_pack", "bwd_a2a_do", "bwd_attention", "bwd_a2a_dq", "bwd_a2a_dk",
                                  "bwd_a2a_dv", "bwd_unpack"):
                        expect(g[f"phase_{phase}_s"].shape == (3, 4), f"{name}: phase {phase} missing")
            want = {1, 2, 4}
            expect(degrees == want, f"degrees {degrees}, expected {want}")


def scenario_backward_tensors(env: Env) -> None:
    """Saved dQ, dK, dV of a hybrid and of plain Ulysses with replicated K/V heads equal the
    gradients numpy computes from the saved Q, K, V and dO."""
    out = env.workdir / "bwd_t.h5"
    run_ok(env, 4, out, "--dtype", "fp64", "--seq", "16", "--heads", "4", "--kv-heads", "2",
           "--ulysses-degree", "2,4", "--kv-replicate", "--layout", "zigzag", "--pass", "fwd_bwd",
           "--save-tensors")
    with h5py.File(out) as f:
        expect(len(f[BIN]) == 2, f"cases {list(f[BIN])}")
        for name, g in f[BIN].items():
            s, a, kv, d = 16, 4, 2, int(g.attrs["head_dim"])
            q = g["tensor_q"][()].reshape(s, 1, a, d)
            k = g["tensor_k"][()].reshape(s, 1, kv, d)
            v = g["tensor_v"][()].reshape(s, 1, kv, d)
            d_o = g["tensor_d_o"][()].reshape(s, 1, a, d)
            grads = attention_backward(q, k, v, d_o, np.arange(s), np.arange(s), True)
            for t, want in zip(("dq", "dk", "dv"), grads):
                got = g["tensor_" + t][()].reshape(want.shape)
                expect(np.allclose(got, want, atol=1e-9),
                       f"{name}: saved {t} differs from numpy's by {np.abs(got - want).max():.3g}")


SCENARIOS = {
    "ulysses_bwd_np4": scenario_backward,
    "ulysses_bwd_tensors": scenario_backward_tensors,
    "ulysses_np2_fp64": scenario_np2,
    "ulysses_np4_fp32": scenario_np4,
    "ulysses_weak_scaling": scenario_weak_scaling,
    "ulysses_save_tensors": scenario_save_tensors,
    "ulysses_bad_input": scenario_bad_input,
    "ulysses_plots": scenario_plots,
    "ulysses_model_agrees": scenario_model_agrees,
}


if __name__ == "__main__":
    sys.exit(run_cli(SCENARIOS, __doc__))
