#!/usr/bin/env python3
"""Integration scenarios for ulysses, one per ctest test (CPU backend under mpirun).

Bytes are checked against the all-to-all and ring block sizes computed here, the output
against attention computed with numpy from the saved inputs.
"""
from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np

from scripts import module_command
from run_scenario import Env, expect, model_prediction, expect_refused, run_cli
from scenarios_ring import Pack, attention, attention_backward

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
    proc = subprocess.run([*module_command("plots.plot"), str(out), "--out", str(plots)], capture_output=True, text=True)
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


def scenario_docs_tensors(env: Env) -> None:
    """Packed documents on 4 ranks, fp64: plain ring, the hybrid (u = 2) with its ring part under
    every layout (per-document zig-zag with its padding and the balanced one too) and plain
    Ulysses, causal and full within documents, forward and backward, GQA: the saved O, dQ, dK and
    dV equal attention numpy computes from the saved inputs and the recorded cu_seqlens (padding
    rows: no output, no gradient), and plain Ulysses' ranks do equal work."""
    out = env.workdir / "docs.h5"
    proc = run_ok(env, 4, out, "--dtype", "fp64", "--seq", "48", "--heads", "4", "--kv-heads", "2",
                  "--ulysses-degree", "1,2", "--layout", "contiguous,zigzag,striped,doc_zigzag,balanced",
                  "--causal", "0,1", "--pass", "fwd_bwd", "--docs", "uniform:1:9", "--save-tensors")
    expect("FAIL" not in proc.stdout, "a check failed", proc)
    run_ok(env, 4, env.workdir / "docs_u4.h5", "--dtype", "fp64", "--seq", "48", "--heads", "4",
           "--ulysses-degree", "4", "--causal", "0,1", "--pass", "fwd_bwd", "--docs", "uniform:1:9",
           "--save-tensors")
    cases = 0
    for path in (out, env.workdir / "docs_u4.h5"):
        with h5py.File(path) as f:
            for name, g in f[BIN].items():
                a = g.attrs
                expect(int(a["check_passed"]) == 1, f"{name}: the benchmark's own check failed")
                pack = Pack.of(g)
                s, causal, heads, kv, d = int(a["s"]), bool(a["causal"]), 4, int(a["kv_heads"]), int(a["head_dim"])
                expect(pack.starts[-1] == s and np.all(pack.lengths[:-1] <= 9), f"{name}: documents {pack.starts}")
                expect(int(a["docs_count"]) == len(pack.lengths), f"{name}: docs_count")
                tok = pack.tokens()
                q = g["tensor_q"][()].reshape(s, 1, heads, d)
                k = g["tensor_k"][()].reshape(s, 1, kv, d)
                v = g["tensor_v"][()].reshape(s, 1, kv, d)
                d_o = g["tensor_d_o"][()].reshape(s, 1, heads, d)
                o, _ = attention(q[tok], k[tok], v[tok], tok, tok, causal, pack)
                got_o = g["tensor_o"][()].reshape(q.shape)
                expect(np.allclose(got_o[tok], o, atol=1e-9), f"{name}: O differs by {np.abs(got_o[tok] - o).max():.3g}")
                pad = np.setdiff1d(np.arange(s), tok)
                for t, want in zip(("dq", "dk", "dv"), attention_backward(q[tok], k[tok], v[tok], d_o[tok], tok, tok, causal, pack)):
                    got = g["tensor_" + t][()].reshape((s,) + want.shape[1:])
                    expect(np.allclose(got[tok], want, atol=1e-9), f"{name}: {t} differs by {np.abs(got[tok] - want).max():.3g}")
                    expect(np.all(got[pad] == 0), f"{name}: {t} of padding slots is not 0")
                if a["layout"] == "doc_zigzag" and int(a["ring_degree"]) > 1:
                    groups = int(a["ring_degree"])  # TE's rule over the ring part's groups
                    expect(np.all(np.diff(pack.starts) % (2 * groups) == 0), f"{name}: padding {pack.starts}")
                if a["method"] == "ulysses":
                    expect(float(a["work_max_over_mean"]) == 1.0, f"{name}: plain Ulysses' work is not equal")
                cases += 1
    # u = 1: 5 layouts; u = 2: 5 layouts; u = 4: one; each causal and full.
    expect(cases == 22, f"{cases} cases, expected 22")
    print(f"  ok: {cases} cases against numpy with their documents")


def model_varlen_rows(env: Env, *args: str) -> list[dict[str, str]]:
    path = env.workdir / "varlen.csv"
    proc = subprocess.run([str(env.bin_dir / "model"), "--section", "varlen", "--csv", str(path), *args],
                          capture_output=True, text=True, timeout=60)
    expect(proc.returncode == 0, f"model --section varlen {' '.join(args)}", proc)
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def scenario_docs_model_agrees(env: Env) -> None:
    """`model --section varlen` predicts from the distribution alone the padding, work max / mean
    and the predicted efficiencies that ring_attention and ulysses count block by block while they
    run: every layout, the all-gather variant, the hybrid and plain Ulysses, 4 ranks."""
    spec, c = "lognormal:40:1", 64
    ring_out = env.workdir / "ring_docs.h5"
    proc = env.mpirun(4, "ring_attention", "--backend", "cpu", "--iters", "1", "--warmup", "0", "--check", "0",
                      "--out", str(ring_out), "--block", str(c), "--layout", "contiguous,zigzag,striped,doc_zigzag,balanced",
                      "--variant", "ring,allgather", "--docs", spec)
    expect(proc.returncode == 0, "ring_attention failed", proc)
    uly_out = env.workdir / "uly_docs.h5"
    run_ok(env, 4, uly_out, "--check", "0", "--seq-per-rank", str(c), "--ulysses-degree", "2,4",
           "--layout", "contiguous,zigzag,striped,doc_zigzag,balanced", "--docs", spec)
    common = ["--docs", spec, "--cp-sweep", "4", "--tokens-per-rank", str(c), "--causal", "--hidden", "512",
              "--heads", "8", "--kv-heads", "8", "--dtype", "fp32"]
    ring_rows = {r["layout"]: r for r in model_varlen_rows(env, *common) if r["u"] == "1"}
    hybrid_rows = {r["layout"]: r for r in model_varlen_rows(env, *common, "--ulysses-degree", "2")}

    def same(row: dict[str, str], a, key: str, attr: str) -> None:
        expect(abs(float(row[key]) - float(a[attr])) <= 1e-9 * max(1.0, abs(float(a[attr]))),
               f"{row['layout']} u={row['u']}: model {key} {row[key]} != benchmark {attr} {a[attr]}")

    checked = 0
    with h5py.File(ring_out) as f:
        for name, g in f["ring_attention"].items():
            a, row = g.attrs, ring_rows[g.attrs["layout"]]
            same(row, a, "padding_fraction", "docs_padding_fraction")
            same(row, a, "work_max_over_mean", "work_max_over_mean")
            same(row, a, "pred_efficiency_balance", "pred_efficiency_balance")
            for key in ("blocks_skipped", "blocks_masked"):  # the census, any variant
                same(row, a, key, key)
            if a["variant"] == "ring":
                same(row, a, "pred_efficiency_lockstep", "pred_efficiency_lockstep")
                same(row, a, "bytes_per_rank", "bytes_sent_per_rank_per_layer")
            checked += 1
    with h5py.File(uly_out) as f:
        for name, g in f[BIN].items():
            a = g.attrs
            row = hybrid_rows["ulysses" if a["method"] == "ulysses" else a["layout"]]
            if a["method"] == "ulysses":
                expect(float(a["work_max_over_mean"]) == 1.0, f"{name}: imbalance {a['work_max_over_mean']}")
            else:
                for key in ("padding_fraction", "work_max_over_mean", "pred_efficiency_lockstep",
                            "blocks_skipped", "blocks_masked"):
                    same(row, a, key, "docs_" + key if key == "padding_fraction" else key)
            # The ring part's work matrix: every ring (one per Ulysses group, u of them) counts
            # each visible pair of the pack once, for its heads; the pack's pairs by hand from
            # the saved document offsets (causal: L (L + 1) / 2 a document).
            lengths = np.diff(np.asarray(g["cu_seqlens"][()], dtype=np.int64))
            work = np.atleast_2d(g["round_work_pairs"][()])
            u = int(a["u"])
            expect(int(work.sum()) == u * int((lengths * (lengths + 1) // 2).sum()),
                   f"{name}: round_work_pairs sums to {work.sum()}, expected {u} x the pack's pairs")
            # Measured against the ideal, with the factors that multiply to it.
            eff = float(a["efficiency_vs_ideal_fwd"])
            product = float(a["eff_balance"]) * float(a["eff_pair_rate"]) * float(a["eff_exchange"])
            expect(eff > 0 and abs(product - eff) <= 1e-9 * eff,
                   f"{name}: efficiency_vs_ideal_fwd {eff}, factors multiply to {product}")
            checked += 1
    expect(checked == 10 + 6, f"{checked} cases compared, expected 16")
    # --balanced-chunk: the benchmark (checked against the reference) and the model lay the
    # documents out alike; the default (c / 64 = 1 token here) and the request are recorded.
    chunk_out = env.workdir / "ring_chunk.h5"
    proc = env.mpirun(4, "ring_attention", "--backend", "cpu", "--iters", "1", "--warmup", "0",
                      "--out", str(chunk_out), "--block", str(c), "--layout", "balanced",
                      "--docs", spec, "--balanced-chunk", "16")
    expect(proc.returncode == 0, "ring_attention --balanced-chunk 16 failed", proc)
    chunk_row = next(r for r in model_varlen_rows(env, *common, "--layout", "balanced", "--balanced-chunk", "16")
                     if r["u"] == "1")
    expect(chunk_row["work_max_over_mean"] != ring_rows["balanced"]["work_max_over_mean"],
           "--balanced-chunk 16 lays these documents out as the default does")
    with h5py.File(chunk_out) as f:
        (a,) = [g.attrs for g in f["ring_attention"].values()]
        expect(int(a["check_passed"]) == 1 and int(a["balanced_chunk"]) == 16,
               f"--balanced-chunk 16: check {a['check_passed']}, recorded {a['balanced_chunk']}")
        for key in ("work_max_over_mean", "pred_efficiency_lockstep"):
            same(chunk_row, a, key, key)
    with h5py.File(ring_out) as f:
        chunks = {int(g.attrs["balanced_chunk"]) for g in f["ring_attention"].values()
                  if g.attrs["layout"] == "balanced"}
        expect(chunks == {1}, f"default balanced_chunk recorded {chunks}, expected c / 64 = 1")
    with h5py.File(uly_out) as f:  # the hybrid's ring part holds u c = 128 tokens a rank
        chunks = {int(g.attrs["balanced_chunk"]) for g in f[BIN].values()
                  if g.attrs["method"] != "ulysses" and g.attrs["layout"] == "balanced"}
        expect(chunks == {2}, f"ulysses hybrid balanced_chunk recorded {chunks}, expected 128 / 64 = 2")
    print(f"  ok: {checked} cases, model == benchmark counts; --balanced-chunk 16 too")


def scenario_docs_bad_input(env: Env) -> None:
    """Bad --docs for ulysses, and the model's varlen section: one message, exit 2, no file."""
    expect_refused(env, BIN, {
        "unknown distribution": (["--docs", "zipf:2"], "unknown distribution"),
        "document layout without documents": (["--ulysses-degree", "2", "--layout", "balanced"], "give --docs"),
        "pack too small": (["--docs", "uniform:5000:6000", "--seq", "64"], "cannot hold a document"),
        "negative chunk": (["--docs", "fixed:8", "--balanced-chunk", "-2"], "--balanced-chunk"),
    })
    for args, want in ((["--docs", "pareto:0:1"], "pareto"), (["--cp-sweep", "4"], "needs --docs"),
                       (["--docs", "fixed:8", "--cp-sweep", "0"], "out of range"),
                       (["--docs", "fixed:8", "--layout", "diagonal"], "unknown layout"),
                       (["--docs", "fixed:8", "--seq", "100", "--cp-sweep", "8"], "not a multiple"),
                       (["--docs", "fixed:8", "--balanced-chunk", "-1"], "--balanced-chunk")):
        csv_path = env.workdir / "refused.csv"
        proc = subprocess.run([str(env.bin_dir / "model"), "--section", "varlen", "--csv", str(csv_path), *args],
                              capture_output=True, text=True, timeout=30)
        errors = [l for l in proc.stderr.splitlines() if l.startswith("error:")]
        expect(proc.returncode == 2 and len(errors) == 1 and want in errors[0],
               f"model varlen {args}: exit {proc.returncode}, {errors}", proc)
        expect(not csv_path.exists(), f"model varlen {args}: left {csv_path}")


SCENARIOS = {
    "ulysses_docs_tensors": scenario_docs_tensors,
    "ulysses_docs_model_agrees": scenario_docs_model_agrees,
    "ulysses_docs_bad_input": scenario_docs_bad_input,
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
