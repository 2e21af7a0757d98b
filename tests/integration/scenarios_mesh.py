#!/usr/bin/env python3
"""Integration scenarios of `mesh`, the composed block (CPU backend), one per ctest test.

Each runs bench/mesh under mpirun and reads its HDF5 file with h5py. Every case's own check
compares the output, the input gradient and every summed weight gradient with the single-rank
block on the same global batch (fp64, 1e-10); here its verdict and per-tensor errors are read
back, the bytes each axis sent are recomputed from METHODS.md section 6 (written out here,
independently of common/model), a gradient sum left out must fail the check, the saved tensors
are recomputed by an outside numpy layer, and bad input is refused with one message. With
--pp above 1 the block runs as pipeline's block-stage case under both of pp's places in --order,
and a --pp list runs each value's cases in one job.
"""
from __future__ import annotations

import re
from pathlib import Path

import h5py
import numpy as np

from layer_numpy import reference, shapes  # noqa: E402
from run_scenario import Env, expect, expect_refused, run_cli  # noqa: E402

SHAPE = ["--seq", "64", "--batch", "2", "--hidden", "128", "--heads", "2", "--ffn-hidden", "256"]
S, B, H, A, FF, E = 64, 2, 128, 2, 256, 8  # e: fp64


def run_mesh(env: Env, ranks: int, name: str, *args: str, extra_env: dict | None = None,
             ok: bool = True):
    out = env.workdir / f"{name}.h5"
    proc = env.mpirun(ranks, "mesh", "--backend", "cpu", "--dtype", "fp64", "--iters", "1", "--warmup", "0",
                      *args, "--out", str(out), extra_env=extra_env)
    if ok:
        expect(proc.returncode == 0, f"mesh {name} failed", proc)
    return out, proc


def ar(n: float, ranks: int) -> float:  # an all-reduce of n bytes, per rank
    return 2 * (ranks - 1) / ranks * n


def expected_bytes(a: dict) -> dict[str, float]:
    """METHODS.md section 6 per rank and step, from the case's parameters."""
    T, C, D, Ep = (int(a[k]) for k in ("tp", "cp", "dp", "ep"))
    s, b, h, heads, kv, ff = (int(a[k]) for k in ("s", "b", "h", "heads", "kv_heads", "d_ff"))
    experts, step = int(a["experts"]), a["pass"] == "fwd_bwd"
    d, c = h // heads, s // C
    n = c * b * h * E
    moe = experts > 0
    tp = (2 if moe else 4) * (T - 1) / T * n
    if step:
        tp += (3 if moe else 6) * (T - 1) / T * n + ar(4 * h * E, T) + (ar(h * experts * E, T) if moe else 0)
        if a.get("moe_overlap") == "two-batch":  # the second micro-batch's LayerNorm gradients
            tp += ar(4 * h * E, T)
    method = a["cp_method"]
    kv_block = 2 * c * b * (kv // T) * d * E  # K and V of this rank's tokens and K/V heads
    cp = 0.0
    if method in ("ring", "allgather"):
        cp = (C - 1) * kv_block
        if step:
            cp += (C - 1) * kv_block + C * kv_block if method == "ring" else (C - 1) / C * C * kv_block
    elif method != "none":
        u = C if method == "ulysses" else int(method.split(":")[1])
        a2a = (u - 1) / u * c * b * d * E * (2 * heads // T + 2 * kv // T)  # Q, K, V, output
        cp = a2a * (2 if step else 1)
        groups = C // u  # the ring across Ulysses groups moves the same K/V block
        cp += (groups - 1) * kv_block + (((groups - 1) * kv_block + groups * kv_block) if step and groups > 1 else 0)
    dense = 4 * h + h * (heads + 2 * kv) * d // T + h * h // T + (h * experts if moe else 2 * h * ff // T)
    w1_cols = 2 * ff if a["mlp"] == "swiglu" else ff  # SwiGLU's gate and up side by side
    expert = experts // Ep * (h * w1_cols + ff * h) if moe else 0
    dp = (ar(dense * E, C * D) + (ar(expert * E, T * C * D // Ep) if moe else 0)) if step else 0
    return {"tp": tp, "cp": cp, "dp": dp}


def expert_groups(a: dict) -> tuple[np.ndarray, np.ndarray]:
    """Each world rank's index in its expert group and its group's number, as METHODS.md section 6
    builds them: the expert ranks are the order without cp (first axis fastest), sizes T, E and
    C D / E for dp."""
    T, C, D, Ep = (int(a[k]) for k in ("tp", "cp", "dp", "ep"))
    size = {"tp": T, "ep": Ep, "dp": C * D // Ep}
    axes = [x for x in str(a["order"]).split(",") if x != "cp"]
    index, group = np.zeros(T * C * D, np.int64), np.zeros(T * C * D, np.int64)
    for r in range(T * C * D):
        rest, coords = r, {}
        for x in axes:
            coords[x] = rest % size[x]
            rest //= size[x]
        index[r], group[r] = coords["ep"], coords["tp"] * size["dp"] + coords["dp"]
    return index, group


def ep_bytes_counted(a: dict, chosen: np.ndarray) -> np.ndarray:
    """Each rank's EP bytes in one step from the router's choice ([N k, ranks]): expert j lives on
    index j / (experts / E) of each expert group (the block placement); a token's copy for an
    expert on another rank is one row of h elements out (dispatch) and one back (combine), both
    again in the backward (the gradients retrace them); and the counts' all-to-all sends one
    8-byte count per expert slot of each other rank of the group. Dropless: every copy goes."""
    Ep, experts, h = int(a["ep"]), int(a["experts"]), int(a["h"])
    index, group = expert_groups(a)
    home = chosen // (experts // Ep)  # [N k, ranks]: the expert group index each copy goes to
    ranks = chosen.shape[1]
    rows = np.zeros(ranks, np.int64)
    for r in range(ranks):
        rows[r] = np.sum(home[:, r] != index[r])  # out
        rows[r] += sum(np.sum(home[:, s] == index[r]) for s in range(ranks)
                       if s != r and group[s] == group[r])  # in, and back
    passes = 2 if a["pass"] == "fwd_bwd" else 1
    microbatches = 2 if a.get("moe_overlap") == "two-batch" else 1  # a counts exchange each
    return rows * h * E * passes + microbatches * (Ep - 1) * (experts // Ep) * 8


def check_cases(out: Path, count: int) -> list:
    with h5py.File(out) as f:
        cases = list(f["mesh"].values())
        expect(len(cases) == count, f"{out.name}: {len(cases)} cases, expected {count}")
        seen = []
        for g in cases:
            a = dict(g.attrs)
            name = g.name
            expect(a["check_passed"] == 1, f"{name}: check {a.get('check_detail')}")
            expect(a["check_max_abs_err"] <= 1e-10, f"{name}: error {a['check_max_abs_err']}")
            errs = [k for k in a if k.startswith("check_err_")]
            want = 1 + (1 if a["pass"] == "fwd_bwd" else 0)
            expect(len([k for k in errs if k.startswith("check_err_grad_")]) >= (8 if a["pass"] == "fwd_bwd" else 0),
                   f"{name}: gradients checked: {errs}")
            expect(len(errs) >= want, f"{name}: {errs}")
            for axis, value in expected_bytes(a).items():
                got = a[f"{axis}_bytes_per_rank"]
                expect(abs(got - value) <= 1e-9 * max(1.0, value), f"{name}: {axis} bytes {got} != {value}")
                expect(a[f"{axis}_bytes_per_rank_min"] == got, f"{name}: {axis} bytes differ between ranks")
                expect(abs(a[f"pred_{axis}_bytes_per_rank"] - value) <= 1e-9 * max(1.0, value),
                       f"{name}: pred_{axis} {a[f'pred_{axis}_bytes_per_rank']} != {value}")
            table = g["axis_bytes_sent"][()]
            expect(table.shape == (4, int(a["world"])), f"{name}: axis_bytes_sent {table.shape}")
            if int(a["experts"]) > 0:
                ep = ep_bytes_counted(a, g["router_chosen_experts"][()])
                expect(np.array_equal(table[2], ep), f"{name}: EP bytes {table[2].tolist()} != {ep.tolist()} "
                       "counted from the router's choice")
                expect(a["ep_bytes_per_rank"] == ep.max() > 0 and a["ep_bytes_per_rank_min"] == ep.min(),
                       f"{name}: EP bytes {a['ep_bytes_per_rank']}, counted {ep.tolist()}")
            seen.append(a)
        return seen


def scenario_dense_np4(env: Env) -> None:
    """tp2 x cp2, cp2 x dp2, tp2 x dp2 and cp4 (and dp4) in one sweep: forward and training step."""
    out, proc = run_mesh(env, 4, "dense4", *SHAPE, "--tp", "1,2", "--cp", "1,2,4", "--dp", "0",
                         "--pass", "fwd,fwd_bwd")
    seen = check_cases(out, 10)
    shapes_run = {(int(a["tp"]), int(a["cp"]), int(a["dp"])) for a in seen}
    expect(shapes_run == {(1, 1, 4), (1, 2, 2), (2, 1, 2), (2, 2, 1), (1, 4, 1)}, f"meshes {shapes_run}")
    expect("Composed block on the mesh" in proc.stdout, "summary table", proc)
    print(f"{out.name}: {len(seen)} cases equal the single-rank block; bytes per axis as METHODS.md 6")


def scenario_np8(env: Env) -> None:
    """tp2 x cp2 x dp2 on 8 ranks, Megatron's order and cp innermost."""
    out, _ = run_mesh(env, 8, "mesh8", *SHAPE, "--tp", "2", "--cp", "2", "--dp", "2", "--pass", "fwd_bwd",
                      "--order", "tp,cp,ep,dp/cp,ep,dp,tp")
    seen = check_cases(out, 2)
    expect({a["order"] for a in seen} == {"tp,cp,ep,dp", "cp,ep,dp,tp"}, "orders")
    print(f"{out.name}: tp2 x cp2 x dp2 in two orders equal the single-rank block")


def scenario_cp_methods(env: Env) -> None:
    """cp4 with Ulysses, the hybrid (Ulysses 2 x ring 2) and the all-gather; tp2 x cp2 with GQA
    and TP+SP's collectives as rings beside their GEMMs."""
    out, _ = run_mesh(env, 4, "cp4", "--seq", "64", "--batch", "1", "--hidden", "256", "--heads", "4",
                      "--ffn-hidden", "256", "--cp", "4", "--cp-method", "ulysses,hybrid:2,allgather",
                      "--pass", "fwd_bwd")
    seen = check_cases(out, 3)
    expect({a["cp_method"] for a in seen} == {"ulysses", "hybrid:2", "allgather"}, "methods")
    out, _ = run_mesh(env, 4, "gqa", "--seq", "64", "--batch", "1", "--hidden", "256", "--heads", "4",
                      "--kv-heads", "2", "--ffn-hidden", "256", "--tp", "2", "--cp", "2", "--layout",
                      "contiguous", "--tp-overlap", "ring", "--pass", "fwd_bwd")
    check_cases(out, 1)
    print("cp4 ulysses / hybrid:2 / allgather and GQA tp2 x cp2 with --tp-overlap ring equal the single-rank block")


def scenario_moe(env: Env) -> None:
    """A dropless MoE block with EP 2 and 4 (of C D = 4), and with TP 2 (experts over T C D / E
    copies, the router's gradient summed over TP first)."""
    out, _ = run_mesh(env, 4, "moe", *SHAPE, "--cp", "2", "--experts", "8", "--ep", "2,4", "--pass",
                      "fwd,fwd_bwd")
    seen = check_cases(out, 4)
    expect({int(a["ep"]) for a in seen} == {2, 4}, "EP degrees")
    for a in seen:
        if a["pass"] == "fwd_bwd":
            expect(any(k.startswith("check_err_grad_expert_w1_7") for k in a), "expert 7's gradient checked")
            expect(a["expert_copies"] == 4 // int(a["ep"]), f"copies {a['expert_copies']}")
    # The gradient sums after the backward, and in buckets of 50 KB started during it.
    out, _ = run_mesh(env, 4, "moe_tp", *SHAPE, "--tp", "2", "--experts", "4", "--mlp", "swiglu", "--pass",
                      "fwd_bwd", "--grad-bucket", "0,0.05")
    seen = check_cases(out, 2)
    after, bucketed = sorted(seen, key=lambda a: a["grad_bucket_mb"])
    expect(after["grad_buckets"] == 2 and after["grad_sum_overlap"] == "after the backward",
           f"one bucket per group after the backward: {after['grad_buckets']}, {after['grad_sum_overlap']}")
    expect(bucketed["grad_buckets"] > 4 and bucketed["grad_sum_overlap"] == "nonblocking",
           f"buckets during the backward: {bucketed['grad_buckets']}, {bucketed['grad_sum_overlap']}")
    expect(bucketed["dp_bytes_per_rank"] == after["dp_bytes_per_rank"], "buckets send the same bytes")
    print(f"{out.name}: MoE blocks with EP 2 and 4, and TP 2 (its sums in buckets too), equal the single-rank block")


def compare_two_batch(out: Path) -> None:
    """Each `_tbo` case of `out` beside the `none` case on the same tokens: its saved output,
    input gradient and every weight gradient equal (fp64, 1e-12), and each axis sent the same
    bytes (TP: plus the second micro-batch's LayerNorm-gradient all-reduce; EP: plus its counts
    exchange; CP: the same)."""
    with h5py.File(out) as f:
        groups = f["mesh"]
        for name in groups:
            if "_tbo" in name:
                continue
            base, tbo = groups[name], groups[name.replace("_fwd_bwd", "_tbo_fwd_bwd")]
            a, t = base.attrs, tbo.attrs
            expect(t["moe_overlap"] == "two-batch" and a["moe_overlap"] == "none", f"{tbo.name}: moe_overlap")
            tensors = [k for k in base if k.startswith("tensor_")]
            expect(len(tensors) >= 8, f"{name}: saved tensors {tensors}")
            for key in tensors:
                want, got = base[key][()], tbo[key][()]
                err = np.abs(got - want).max() / max(1.0, np.abs(want).max())
                expect(err <= 1e-12, f"{tbo.name}: {key} differs from the block without it by {err:.3g}")
            ln = 2 * (int(a["tp"]) - 1) / int(a["tp"]) * 4 * H * E  # one all-reduce of [4, h]
            expect(t["tp_bytes_per_rank"] == a["tp_bytes_per_rank"] + ln,
                   f"{tbo.name}: TP bytes {t['tp_bytes_per_rank']} != {a['tp_bytes_per_rank']} + {ln}")
            expect(t["dp_bytes_per_rank"] == a["dp_bytes_per_rank"], f"{tbo.name}: DP bytes")
            for key in ("cp_bytes_per_rank", "cp_bytes_per_rank_min"):
                expect(t[key] == a[key], f"{tbo.name}: {key} {t[key]} != {a[key]} without two-batch")
            expect((t["cp_bytes_per_rank"] > 0) == (int(a["cp"]) > 1),
                   f"{tbo.name}: CP bytes {t['cp_bytes_per_rank']}")
            ep = int(a["ep"])
            counts = (ep - 1) * (8 // ep) * 8  # the second micro-batch's counts exchange
            expect(t["ep_bytes_per_rank"] == a["ep_bytes_per_rank"] + counts,
                   f"{tbo.name}: EP bytes {t['ep_bytes_per_rank']} != {a['ep_bytes_per_rank']} + {counts}")
            expect(t["check_err_two_batch_vs_none"] <= 1e-12, f"{tbo.name}: its own comparison")
            expect(t["overlap_a2a_s"] > 0 and t["overlap_compute_s"] > 0 and t["pred_step_s"] > 0
                   and t["step_no_overlap_s"] > 0, f"{tbo.name}: overlap figures")
            expect(t["pred_step_s"] >= max(t["overlap_a2a_s"], t["overlap_compute_s"]) * (1 - 1e-9),
                   f"{tbo.name}: the critical path {t['pred_step_s']} is below max(A, X)")
            print(f"  ok: {tbo.name} equals the block without it")


def scenario_two_batch(env: Env) -> None:
    """--moe-overlap two-batch with EP 4 (TP 1) and EP 2 (TP 2), then with CP 2 (EP 2, DP 2;
    the ring and Ulysses, each micro-batch's attention over the CP group), forward and backward:
    each `_tbo` case equals the single-rank block (its own check) and the `none` case on the same
    tokens (compare_two_batch)."""
    out, _ = run_mesh(env, 4, "tbo", *SHAPE, "--tp", "1,2", "--experts", "8", "--pass", "fwd_bwd",
                      "--moe-overlap", "none,two-batch", "--save-tensors")
    seen = check_cases(out, 4)
    compare_two_batch(out)
    expect({int(a["tp"]) for a in seen} == {1, 2}, "TP degrees")
    out, _ = run_mesh(env, 4, "tbo_cp", *SHAPE, "--cp", "2", "--ep", "2", "--cp-method", "ring,ulysses",
                      "--experts", "8", "--pass", "fwd_bwd", "--moe-overlap", "none,two-batch", "--save-tensors")
    seen = check_cases(out, 4)
    compare_two_batch(out)
    expect({(int(a["cp"]), str(a["cp_method"])) for a in seen} == {(2, "ring"), (2, "ulysses")},
           "CP 2 with the ring and Ulysses")


def scenario_missing_sum(env: Env) -> None:
    """Leaving out a gradient sum (a test hook) leaves every number plausible and the block
    wrong: the check must fail (exit 1) and name a gradient."""
    for hook, args in (("grad_sum_dense", ["--cp", "2", "--dp", "2"]),
                       ("grad_sum_expert", ["--dp", "4", "--experts", "4", "--ep", "2"]),
                       ("grad_sum_tp", ["--tp", "2", "--dp", "2", "--experts", "4"])):
        out, proc = run_mesh(env, 4, f"omit_{hook}", *SHAPE, *args, "--pass", "fwd_bwd",
                             extra_env={"SUITE_TEST_OMIT_GRAD_SUM": hook}, ok=False)
        expect(proc.returncode == 1, f"{hook} left out: exit {proc.returncode}, expected 1", proc)
        expect("differs from the single-rank block" in proc.stdout + proc.stderr, f"{hook}: message", proc)
        with h5py.File(out) as f:
            a = next(iter(f["mesh"].values())).attrs
            expect(a["check_passed"] == 0 and a["check_max_abs_err"] > 1e-3, f"{hook}: {a['check_max_abs_err']}")
    print("each gradient sum left out fails the check")


def scenario_numpy(env: Env) -> None:
    """--save-tensors, tp2 x cp2 with GQA and the zig-zag ring: numpy recomputes the whole
    block from the saved input, weights and output gradient (outside the suite's code)."""
    args = ["--seq", "32", "--batch", "2", "--hidden", "256", "--heads", "4", "--kv-heads", "2",
            "--ffn-hidden", "256"]
    out, _ = run_mesh(env, 4, "numpy", *args, "--tp", "2", "--cp", "2", "--pass", "fwd_bwd", "--save-tensors")
    s, b, h, a, kv, ff = 32, 2, 256, 4, 2, 256
    with h5py.File(out) as f:
        g = next(iter(f["mesh"].values()))

        def whole(key, shape):
            data = g[f"tensor_{key}"][()]
            expect(all(np.array_equal(data[0], r) for r in data), f"{key} differs between ranks")
            return data[0].reshape(shape)

        names = shapes(h, ff, a, kv)
        w = {k: whole(f"weight_{k}", v) for k, v in names.items()}
        y, grads = reference(whole("input", (s * b, h)), w, whole("d_output", (s * b, h)), s, b, a, kv)
        got = {"output": whole("output", (s * b, h)), "input": whole("grad_input", (s * b, h)),
               **{k: whole(f"grad_{k}", v) for k, v in names.items()}}
        for key, value in {"output": y, **grads}.items():
            err = np.abs(got[key] - value).max() / max(1.0, np.abs(value).max())
            expect(err < 1e-10, f"{key} differs from numpy by {err:.3g} of its largest value")
    print(f"{out.name}: output and every summed gradient match numpy")


def scenario_model_agrees(env: Env) -> None:
    """`model --section mesh` prints, for the same block and mesh, the bytes each axis sent in the
    run (TP, CP, the gradient sums; EP is the routing's in a run, uniform in the model)."""
    import subprocess
    out, _ = run_mesh(env, 4, "model", *SHAPE, "--tp", "2", "--cp", "2", "--cp-method", "ring,allgather",
                      "--pass", "fwd_bwd")
    seen = check_cases(out, 2)
    for a in seen:
        cmd = [str(env.bin_dir / "model"), "--section", "mesh", "--tp", "2", "--cp", "2", "--dp", "1",
               "--seq", str(S), "--batch", str(B), "--hidden", str(H), "--heads", str(A), "--kv-heads", str(A),
               "--d-ff", str(FF), "--dtype", "fp64", "--grad-dtype", "fp64", "--causal",
               "--cp-method", str(a["cp_method"]), "--order", str(a["order"])]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        expect(proc.returncode == 0, "model --section mesh", proc)
        line = next(l for l in proc.stdout.splitlines() if l.startswith("prediction: section=mesh"))
        pred = dict(kv.split("=", 1) for kv in line.split()[1:])
        for axis in ("tp", "cp", "dp"):
            got, want = a[f"{axis}_bytes_per_rank"], float(pred[f"{axis}_bytes"])
            expect(abs(got - want) <= 1e-6 * max(1.0, want), f"{a['cp_method']}: {axis} bytes {got} != model's {want}")
    print("model --section mesh gives the bytes each axis sent")


def scenario_watchdog(env: Env) -> None:
    """Rank 3 of tp2 x cp2 stops (SIGSTOP, the test hook SUITE_TEST_FREEZE) at a fixed point of
    its first step: before its CP exchange, and in a second run after its attention, before its
    TP exchange (the output projection's reduce-scatter). The job ends (the watchdog's abort),
    no waiting rank blames itself, and the ranks that wait on rank 3 name it: its CP partner
    (rank 1: TP innermost, CP pairs 0-2 and 1-3) in the ring exchange, its TP partner (rank 2:
    TP pairs 0-1 and 2-3) in a TP collective of 2. Rank 0 shares no group with rank 3: it waits
    on one of them and names it. A line may name no rank only where it says the wait is the
    job-wide step synchronisation. The first rank to time out ends the job, so not every waiting
    rank prints: rank 0 may start waiting on a partner before that partner starts waiting on
    rank 3 (on a loaded host the partner computes later) and end the job first. So each point
    runs up to three times: every line of every run must name as above, and one run must have a
    partner's line naming rank 3."""
    partners = {1, 2}  # rank 3's CP and TP partners
    step_sync = ("waiting for the other ranks to start it)", "done, waiting for the other ranks)")
    for point in ("cp", "tp"):
        for attempt in range(1, 4):
            waiting = watchdog_lines(env, point, partners, step_sync)
            if any(r in partners and "for rank 3," in line for r, line in waiting.items()):
                break
            print(f"{point}, run {attempt}: only ranks {sorted(waiting)} timed out before the job ended")
        expect(any(r in partners and "for rank 3," in line for r, line in waiting.items()),
               f"{point}: neither rank waiting on rank 3 named it in {attempt} runs: {sorted(waiting)}")
        print(f"frozen before its {point.upper()} exchange:\n" + "\n".join(waiting[r] for r in sorted(waiting)))


def watchdog_lines(env: Env, point: str, partners: set[int], step_sync: tuple[str, ...]) -> dict[int, str]:
    """One run of scenario_watchdog's job frozen at `point`: the waiting ranks' lines, by rank,
    each checked to name the rank it waits on (or the step synchronisation), none blaming itself."""
    proc = env.mpirun_stopping(4, None, 0.0, "mesh", "--backend", "cpu", "--tp", "2", "--cp", "2",
                               "--iters", "3", "--warmup", "1", "--timeout", "2", "--check", "0",
                               "--pass", "fwd_bwd", "--out", str(env.workdir / "stall.h5"),
                               extra_env={"SUITE_TEST_FREEZE": f"3:{point}"}, timeout=120)
    expect(f"[rank 3] SUITE_TEST_FREEZE: stopped before its {point.upper()} exchange" in proc.stderr
           and proc.returncode != 0, f"{point}: rank 3 not frozen, or the job passed (exit {proc.returncode})",
           proc)
    waiting: dict[int, str] = {}
    for line in proc.stderr.splitlines():
        m = re.match(r"\[rank (\d+) ", line)
        # Rank 3's own line, where one comes, follows the job's abort (which resumes it to
        # end it): it is not a waiting rank's.
        if m and "timed out" in line and m.group(1) != "3":
            expect(int(m.group(1)) not in waiting, f"{point}: two lines from rank {m.group(1)}", proc)
            waiting[int(m.group(1))] = line
    expect(bool(waiting), f"{point}: no waiting rank timed out", proc)
    for rank, line in waiting.items():
        expect("waiting" in line and "probably stuck" in line and "this rank made no progress" not in line,
               f"{point}: rank {rank} blames itself: {line}", proc)
        named = re.search(r"for rank (\d+),", line)
        if named is None:
            expect(any(s in line for s in step_sync), f"{point}: rank {rank} names no rank: {line}", proc)
            continue
        want = {3} if rank in partners else partners  # rank 0 waits on a partner
        expect(int(named.group(1)) in want, f"{point}: rank {rank} names rank {named.group(1)}, "
               f"expected {sorted(want)}: {line}", proc)
    return waiting


def scenario_pp(env: Env) -> None:
    """--pp 2 with TP 2 on 8 ranks (2 replicas) under Megatron's tp,cp,ep,dp,pp (pp outermost)
    and the seed's tp,cp,pp,dp (a PP group on consecutive TP groups): each runs as pipeline's
    block-stage case, its check (loss, input gradients, the summed gradients and SGD-updated
    parameters against one rank running every layer on every replica's micro-batches, fp64,
    1e-10) passes, and the loss is the same under both orders."""
    block = ["--seq", "8", "--batch", "2", "--hidden", "128", "--heads", "2", "--ffn-hidden", "64"]
    out = run_mesh(env, 8, "pp", *block, "--tp", "2", "--cp", "1", "--pp", "2", "--layers", "4",
                   "--order", "tp,cp,pp,dp/tp,cp,dp,pp")[0]
    with h5py.File(out) as f:
        cases = {name: g.attrs for name, g in f["mesh"].items()}
        for name, a in cases.items():
            expect(a["check_passed"] == 1 and a["check_max_abs_err"] <= 1e-10,
                   f"{name}: check {a['check_max_abs_err']}")
        staged = {str(a["order"]): float(a["loss"]) for a in cases.values() if "stage" in a}
        expect(set(staged) == {"tp,cp,pp,ep,dp", "tp,cp,ep,dp,pp"}, f"pipeline cases' orders {set(staged)}")
        for name, a in cases.items():
            if "stage" in a:
                expect(int(a["pp"]) == 2 and int(a["tp"]) == 2 and int(a["replicas"]) == 2,
                       f"{name}: pp {a['pp']}, tp {a['tp']}, replicas {a['replicas']}")
        losses = list(staged.values())
        expect(max(losses) - min(losses) <= 1e-10 * max(losses), f"losses {staged} differ across orders")
        expect(len(cases) == 2, f"{len(cases)} cases, want one per order")
    print(f"{len(staged)} pipeline cases of the mesh pass their check, one loss across orders")


def scenario_pp_list(env: Env) -> None:
    """--pp 1,2 with TP 2 on 8 ranks in one run: two cases, each its value's alone. P = 1 is the
    block's case (T 2, D 4, a training step), P = 2 pipeline's block-stage case (T 2, 2 replicas);
    each passes its check against the single-rank reference (fp64, 1e-10), and the P = 2 case's
    loss is the one a --pp 2 run alone gives."""
    block = ["--seq", "8", "--batch", "2", "--hidden", "128", "--heads", "2", "--ffn-hidden", "64",
             "--tp", "2", "--cp", "1", "--layers", "4", "--pass", "fwd_bwd"]
    out = run_mesh(env, 8, "pp_list", *block, "--pp", "1,2")[0]
    alone = run_mesh(env, 8, "pp_alone", *block, "--pp", "2")[0]
    with h5py.File(out) as f, h5py.File(alone) as g:
        cases = {name: dict(c.attrs) for name, c in f["mesh"].items()}
        expect(len(cases) == 2, f"{len(cases)} cases, want one per --pp value")
        for name, a in cases.items():
            expect(a["check_passed"] == 1 and a["check_max_abs_err"] <= 1e-10,
                   f"{name}: check {a['check_max_abs_err']}")
        staged = [a for a in cases.values() if "stage" in a]
        blocks = [a for a in cases.values() if "stage" not in a]
        expect(len(staged) == 1 and len(blocks) == 1, f"cases {sorted(cases)}: want one block, one staged")
        b, p = blocks[0], staged[0]
        expect(int(b["tp"]) == 2 and int(b["dp"]) == 4 and b["pass"] == "fwd_bwd",
               f"P = 1: tp {b['tp']}, dp {b['dp']}, pass {b['pass']}")
        expect(int(p["pp"]) == 2 and int(p["tp"]) == 2 and int(p["replicas"]) == 2,
               f"P = 2: pp {p['pp']}, tp {p['tp']}, replicas {p['replicas']}")
        (ref,) = [float(c.attrs["loss"]) for c in g["mesh"].values()]
        expect(abs(float(p["loss"]) - ref) <= 1e-12 * abs(ref), f"P = 2 loss {p['loss']}, alone {ref}")
    print("--pp 1,2: the block's case and the pipeline's, each passing its check")


def scenario_bad_input(env: Env) -> None:
    expect_refused(env, "mesh", {
        "degrees not the world": (["--tp", "2", "--cp", "3", "--dp", "1"], "--tp 2 x --cp 3 x --dp 1 = 6"),
        "EP not dividing C D": (["--cp", "2", "--dp", "2", "--experts", "8", "--ep", "3"], "--ep 3 must divide"),
        "heads per TP": (["--tp", "4", "--hidden", "192", "--heads", "3"], "--heads 3 is not divisible by --tp 4"),
        "heads per T U": (["--cp", "4", "--cp-method", "ulysses", "--heads", "2"], "divisible by T U"),
        "K/V heads below T": (["--tp", "4", "--hidden", "256", "--heads", "4", "--kv-heads", "2"],
                              "--kv-heads 2 is fewer than --tp 4"),
        "seq per 2C": (["--cp", "4", "--seq", "100"], "2 x --cp = 8"),
        "axis twice": (["--order", "tp,cp,tp,dp"], "named twice"),
        "axis unknown": (["--order", "tp,cp,ep,xx,dp"], "unknown axis 'xx'"),
        "axis missing": (["--order", "tp,cp,ep,pp"], "dp is missing"),
        "order splitting TP": (["--tp", "2", "--dp", "2", "--experts", "4", "--ep", "2", "--order", "ep,tp,cp,dp"],
                               "different TP indices"),
        "unknown method": (["--cp", "2", "--cp-method", "ringz"], "--cp-method: unknown method 'ringz'"),
        "bucket below 0": (["--grad-bucket=-1", "--pass", "fwd_bwd"], "--grad-bucket -1"),
        "moe overlap item": (["--experts", "4", "--moe-overlap", "none,three-batch"],
                             "--moe-overlap: unknown item 'three-batch'"),
        "moe overlap dense": (["--batch", "2", "--moe-overlap", "two-batch"],
                              "--moe-overlap two-batch needs experts (--experts 0)"),
        "moe overlap odd batch": (["--batch", "3", "--experts", "4", "--moe-overlap", "two-batch"],
                                  "--batch 3 sequences per DP rank is not divisible by 2"),
        "moe overlap cp odd batch": (["--cp", "2", "--batch", "1", "--experts", "4", "--moe-overlap", "two-batch"],
                                     "--batch 1 sequences per DP rank is not divisible by 2"),
        "pp with experts": (["--pp", "2", "--experts", "4"], "--pp 2 with experts (--experts 4): not built"),
        "pp with ulysses": (["--pp", "2", "--cp", "2", "--cp-method", "ulysses"],
                            "--pp 2 with --cp-method ulysses: not built"),
        "pp with kv heads": (["--pp", "2", "--hidden", "256", "--heads", "4", "--kv-heads", "2"],
                             "--pp 2 with --kv-heads 2: not built"),
        "pp in fp32": (["--pp", "2", "--dtype", "fp32"], "--pp 2 runs the block's stages in fp64"),
        "pp not dividing": (["--pp", "3"], "no T x C (x P) (1 x 1 x 3) divides the job's 4 ranks"),
        "pp 0": (["--pp", "0"], "--pp 0: mesh runs P >= 1 stages"),
        "pp list, a value not dividing": (["--pp", "1,3"], "--pp 3, --dp 0: no T x C (x P) (1 x 1 x 3) divides"),
        "pp list, a value the block stage refuses": (["--pp", "1,2", "--experts", "4"],
                                                     "--pp 2 with experts (--experts 4): not built"),
        "pp layers": (["--pp", "2", "--dtype", "fp64", "--layers", "1"], "--layers 1 is fewer than the 2 stages"),
    }, ranks=4)
    print("bad input refused")


SCENARIOS = {
    "mesh_dense_np4": scenario_dense_np4,
    "mesh_np8": scenario_np8,
    "mesh_cp_methods": scenario_cp_methods,
    "mesh_moe": scenario_moe,
    "mesh_two_batch": scenario_two_batch,
    "mesh_missing_sum": scenario_missing_sum,
    "mesh_numpy": scenario_numpy,
    "mesh_model_agrees": scenario_model_agrees,
    "mesh_watchdog": scenario_watchdog,
    "mesh_pp": scenario_pp,
    "mesh_pp_list": scenario_pp_list,
    "mesh_bad_input": scenario_bad_input,
}

if __name__ == "__main__":
    run_cli(SCENARIOS, __doc__)
