#!/usr/bin/env python3
"""Integration scenarios of the moe executable (CPU backend), one per ctest test.

Each runs bench/moe under mpirun and reads its HDF5 file with h5py. Routing, drops and bytes
are recomputed here from the saved routing tensors (--save-tensors), independently of the
C++ code: the drop rule (lowest gate first, ties by global copy index), the dropped count, and
the bytes each rank must send in dispatch and combine, forward and (--pass fwd_bwd) backward.
The backward's gradients are checked by the benchmark against its host double reference; here
also by identities the saved tensors must satisfy whatever the code: <dY, out> = sum of gate x
gate gradient per rank, the router's logit gradients sum to zero per token (so do the rows of
its weight gradient), and dropped copies and unused experts carry no gradient.
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np

from scripts.cli import command_line
from run_scenario import Env, expect, run_cli

SMALL = ["--tokens", "64", "--hidden", "16", "--ffn-hidden", "32", "--iters", "2", "--warmup", "1",
         "--backend", "cpu"]
PHASES = ("route", "permute", "dispatch", "expert", "combine")
BWD_PHASES = ("bwd_combine", "bwd_permute", "bwd_expert", "bwd_dispatch", "bwd_router")
FWD_TABLE, STEP_TABLE = "MoE layer forward (", "MoE layer training step"


def run_moe(env: Env, ranks: int, name: str, *args: str) -> Path:
    return run_moe_proc(env, ranks, name, *args)[0]


def run_moe_proc(env: Env, ranks: int, name: str, *args: str):
    out = env.workdir / f"{name}.h5"
    proc = env.mpirun(ranks, "moe", *args, "--out", str(out))
    expect(proc.returncode == 0, f"moe {name} failed", proc)
    passes = args[args.index("--pass") + 1].split(",") if "--pass" in args else ["fwd"]
    for table, shown in ((FWD_TABLE, "fwd" in passes), (STEP_TABLE, "fwd_bwd" in passes)):
        expect(proc.stdout.count(table) == int(shown), f"summary table '{table}' not printed {int(shown)}x", proc)
    return out, proc


def summary_rows(stdout: str, table: str = FWD_TABLE) -> list[list[str]]:
    """The rows of a summary table (after its two header lines), split on blanks."""
    lines = stdout.split(table, 1)[1].splitlines()[2:]
    rows = []
    for line in lines:
        cols = line.split()
        if not cols or not cols[0].isdigit():
            break
        rows.append(cols)
    return rows


def independent_keep(chosen: np.ndarray, gates: np.ndarray, experts: int, capacity: int) -> np.ndarray:
    """The drop rule of one EP group, from its flattened routing in global copy order."""
    keep = np.ones(chosen.size, dtype=bool)
    if capacity < 0:
        return keep
    for e in range(experts):
        idx = np.nonzero(chosen == e)[0]
        order = idx[np.lexsort((idx, -gates[idx]))]  # higher gate first, then lower copy index
        keep[order[capacity:]] = False
    return keep


def is_fwd_bwd(g: h5py.Group) -> bool:
    return g.attrs.get("pass") == "fwd_bwd"


def check_case(g: h5py.Group, ranks: int, elem: int) -> None:
    a = g.attrs
    name = g.name
    n_e, T, k, E, h = (int(a[x]) for x in ("n_e", "tokens", "top_k", "experts", "h"))
    expect(a["check_passed"] == 1, f"{name}: check_passed {a['check_passed']}")
    expect(a["bytes_match"] == 1, f"{name}: bytes measured != implied by the routing")
    backward = is_fwd_bwd(g)
    expect(name.endswith("_fwd_bwd") == backward, f"{name}: name and pass {a.get('pass')} disagree")
    expect(("pass" in str(a["params"]).split(",")) == backward, f"{name}: params {a['params']}")
    for p in PHASES + (BWD_PHASES + ("forward", "backward") if backward else ()):
        expect(g[f"phase_{p}_s"].shape == g["time_s"].shape, f"{name}: phase {p} missing")
        expect(a[f"phase_{p}_median_s"] > 0, f"{name}: phase {p} time not positive")
    # Collective calls per pass, counted by the layer, against the model's.
    calls = g["collective_calls"][()].reshape(-1, 3)  # rows fwd[, bwd]: a2a, a2a-v, all-gather
    want_calls = [[1, 2, int(a["capacity"] >= 0)]] + ([[0, 2, 1]] if backward else [])
    expect(calls.tolist() == want_calls, f"{name}: collective calls {calls.tolist()} != {want_calls}")
    expect(a["fwd_collectives"] == a["pred_fwd_collectives"] == sum(want_calls[0]), f"{name}: fwd collectives")
    if backward:
        check_backward(g, ranks, elem)
    expect(np.array_equal(g["moe_bytes_sent"][()], g["moe_bytes_implied"][()]), f"{name}: bytes tables differ")
    if n_e == ranks:  # the group is the job: the harness's own counters saw the same traffic
        expect(np.array_equal(g["bytes_sent"][()], g["moe_bytes_sent"][()]), f"{name}: bytes_sent != moe_bytes_sent")
    pred = 2 * k * T * h * elem * (n_e - 1) / n_e
    expect(math.isclose(a["pred_a2a_bytes_per_rank"], pred), f"{name}: uniform prediction {a['pred_a2a_bytes_per_rank']} != {pred}")
    expect(a["pred_aux_loss"] == 1e-2, f"{name}: aux loss alpha")
    expect(a["aux_loss"] > 0 and a["expert_load_max_over_mean"] >= 1, f"{name}: aux loss / load figures")
    # The time ratio against (F/W)((N_e-1)/N_e)/d_ff (/1.5 SwiGLU) x e/2, F and W of this run.
    F, W, d_ff = a["calib_flops_per_s"], a["calib_bytes_per_s"], int(a["d_ff"])
    expect(F > 0 and (W > 0) == (n_e > 1), f"{name}: calibrated F {F} / W {W}")
    want = F / W * (n_e - 1) / n_e / d_ff / (1.5 if a["mlp"] == "swiglu" else 1) * elem / 2 if W > 0 else 0
    expect(math.isclose(a["pred_a2a_expert_ratio"], want, rel_tol=1e-9), f"{name}: pred ratio {a['pred_a2a_expert_ratio']} != {want}")
    t = {p: a[f"phase_{p}_median_s"] for p in PHASES}
    expect(math.isclose(a["a2a_expert_ratio"], (t["dispatch"] + t["combine"]) / t["expert"], rel_tol=1e-9),
           f"{name}: measured ratio is not (dispatch + combine) / expert")
    rows = g["rank_load"][()].ravel()
    per_row = (6 if a["mlp"] == "swiglu" else 4) * h * d_ff
    expect(math.isclose(a["expert_flops_per_rank"], rows.mean() * per_row), f"{name}: expert FLOPs per rank")
    expect(math.isclose(a["pred_expert_flops_per_rank"], k * T * per_row), f"{name}: predicted expert FLOPs")
    # nccl-tests all-to-all conventions: algbw = each rank's whole buffer, its own block included
    # (dispatch: its kept copies; combine: the rows its experts processed; h e bytes a row) / the
    # median phase time, mean over ranks; busbw = algbw (N_e-1)/N_e.
    row_bytes, bus = h * elem, (n_e - 1) / n_e
    kept_mean = k * T - a["dropped_copies"] / ranks
    expect(math.isclose(kept_mean, rows.mean()), f"{name}: kept copies {kept_mean} != rows received {rows.mean()}")
    expect(math.isclose(a["dispatch_algbw_GBps"], kept_mean * row_bytes / t["dispatch"] / 1e9),
           f"{name}: dispatch algbw {a['dispatch_algbw_GBps']}")
    expect(math.isclose(a["combine_algbw_GBps"], rows.mean() * row_bytes / t["combine"] / 1e9),
           f"{name}: combine algbw {a['combine_algbw_GBps']}")
    for p in ("dispatch", "combine"):
        alg, busbw = a[f"{p}_algbw_GBps"], a[f"{p}_busbw_GBps"]
        expect(alg > 0 and math.isclose(busbw, alg * bus, rel_tol=1e-12, abs_tol=0),
               f"{name}: {p} busbw {busbw} != algbw {alg} x (N_e-1)/N_e = {alg * bus}")
        per_alg, per_bus = g[f"{p}_algbw_GBps"][()], g[f"{p}_busbw_GBps"][()]
        expect(per_alg.shape == (1, ranks) and per_bus.shape == (1, ranks), f"{name}: {p} bw table shapes")
        expect(np.allclose(per_bus, per_alg * bus, rtol=1e-12, atol=0), f"{name}: per-rank {p} busbw")
        expect(math.isclose(per_alg.mean(), alg), f"{name}: {p} algbw != mean of the per-rank table")
    expect(np.allclose(g["combine_algbw_GBps"][()].ravel(), rows * row_bytes / t["combine"] / 1e9),
           f"{name}: per-rank combine algbw")
    cap = int(a["capacity"])
    kept_load = g["expert_load"][()].reshape(-1, E)  # one row per EP group (1-D when one group)
    expect(kept_load.shape == (ranks // n_e, E), f"{name}: expert_load shape {kept_load.shape}")
    if cap >= 0:
        expect(kept_load.max() <= cap, f"{name}: an expert accepted more than its capacity {cap}")
    if "tensor_chosen_expert" not in g:
        return
    chosen = g["tensor_chosen_expert"][()].astype(int)  # [ranks, T*k]
    gates = g["tensor_gate"][()]
    kept = g["tensor_kept"][()].astype(bool)
    expect(chosen.shape == (ranks, T * k), f"{name}: routing tensor shape {chosen.shape}")
    # Independent drop rule and dropped count, group by group.
    dropped = 0
    for grp in range(ranks // n_e):
        rows = slice(grp * n_e, (grp + 1) * n_e)
        want = independent_keep(chosen[rows].ravel(), gates[rows].ravel(), E, cap)
        expect(np.array_equal(want, kept[rows].ravel()), f"{name}: group {grp} drops differ from the rule")
        dropped += int((~want).sum())
        counts = np.bincount(chosen[rows].ravel()[want], minlength=E)
        expect(np.array_equal(counts, kept_load[grp]), f"{name}: group {grp} per-expert load differs")
        expect(np.array_equal(g["tensor_expert_counts"][grp * n_e], counts), f"{name}: saved expert counts")
    expect(a["dropped_copies"] == dropped, f"{name}: dropped_copies {a['dropped_copies']} != {dropped}")
    control_fwd = (n_e - 1) * (E // n_e) * 8 + ((n_e - 1) * 2 * T * k * 8 if cap >= 0 else 0)
    expect(np.all(g["control_bytes"][()].ravel() == control_fwd), f"{name}: control bytes {g['control_bytes'][()]}")
    expect(np.allclose(g["dispatch_algbw_GBps"][()].ravel(), kept.sum(axis=1) * row_bytes / t["dispatch"] / 1e9),
           f"{name}: per-rank dispatch algbw is not its kept copies / dispatch time")
    expect(math.isclose(a["drop_rate"], dropped / (k * T * ranks)), f"{name}: drop_rate")
    # Bytes each rank must send: its kept copies for other ranks' experts (dispatch) and the
    # rows other ranks of its group sent to its experts (combine), h * e bytes each.
    per = E // n_e
    dispatch = g["dispatch_bytes"][()].ravel()
    combine = g["combine_bytes"][()].ravel()
    for r in range(ranks):
        grp0 = (r // n_e) * n_e
        owner = chosen[r] // per + grp0
        want_d = int(((owner != r) & kept[r]).sum()) * h * elem
        want_c = sum(int(((chosen[s] // per + grp0 == r) & kept[s]).sum())
                     for s in range(grp0, grp0 + n_e) if s != r) * h * elem
        expect(dispatch[r] == want_d, f"{name}: rank {r} dispatch bytes {dispatch[r]} != {want_d}")
        expect(combine[r] == want_c, f"{name}: rank {r} combine bytes {combine[r]} != {want_c}")
        if backward:  # output gradients retrace the dispatch, input gradients the combine
            for table, want in (("bwd_combine_bytes", want_d), ("bwd_dispatch_bytes", want_c),
                                ("bwd_control_bytes", (n_e - 1) * E * 8)):
                got = g[table][()].ravel()[r]
                expect(got == want, f"{name}: rank {r} {table} {got} != {want}")
            step = want_d + want_c + control_fwd + want_d + want_c + (n_e - 1) * E * 8
            expect(g["moe_bytes_sent"][()].ravel()[r] == step, f"{name}: rank {r} step bytes")
    if backward:
        check_gradient_tensors(g, ranks, chosen, kept, kept_load)
    print(f"  {name}: routing, {dropped} drops and bytes recomputed independently")


def check_backward(g: h5py.Group, ranks: int, elem: int) -> None:
    """The fwd_bwd pass's figures: bytes per pass against the routing's and the uniform
    prediction, backward FLOPs 2x the forward's, phases nested in the step, gradient errors."""
    a = g.attrs
    name = g.name
    n_e, T, k, h = (int(a[x]) for x in ("n_e", "tokens", "top_k", "h"))
    d_ff, swiglu = int(a["d_ff"]), a["mlp"] == "swiglu"
    pred = 2 * k * T * h * elem * (n_e - 1) / n_e
    expect(math.isclose(a["pred_bwd_a2a_bytes_per_rank"], pred), f"{name}: pred bwd bytes")
    expect(math.isclose(a["pred_fwd_bwd_a2a_bytes_per_rank"], 2 * pred), f"{name}: pred fwd+bwd bytes")
    # Backward payload = forward payload, rank by rank: the rows retrace the forward's routes.
    fwd = g["dispatch_bytes"][()].ravel() + g["combine_bytes"][()].ravel()
    bwd = g["bwd_combine_bytes"][()].ravel() + g["bwd_dispatch_bytes"][()].ravel()
    expect(np.array_equal(fwd, bwd), f"{name}: backward payload {bwd} != forward {fwd}")
    expect(math.isclose(a["bwd_a2a_bytes_per_rank"], bwd.mean()), f"{name}: bwd_a2a_bytes_per_rank")
    expect(math.isclose(a["fwd_bwd_a2a_bytes_per_rank"], (fwd + bwd).mean()), f"{name}: fwd_bwd bytes")
    expect(math.isclose(a["a2a_bytes_per_rank"], fwd.mean()), f"{name}: the forward's bytes")
    if n_e == ranks:  # the harness's counters saw the whole step, both passes
        expect(np.array_equal(g["bytes_sent"][()].ravel(), g["moe_bytes_sent"][()].ravel()),
               f"{name}: bytes_sent != moe_bytes_sent over the step")
    per_row = (6 if swiglu else 4) * h * d_ff
    expect(math.isclose(a["bwd_expert_flops_per_rank"], 2 * a["expert_flops_per_rank"]),
           f"{name}: backward expert FLOPs {a['bwd_expert_flops_per_rank']} != 2 x {a['expert_flops_per_rank']}")
    expect(math.isclose(a["pred_bwd_expert_flops_per_rank"], 2 * k * T * per_row), f"{name}: pred bwd FLOPs")
    expect(a["bwd_collectives"] == a["pred_bwd_collectives"] == 3, f"{name}: bwd collectives")
    t = {p: a[f"phase_{p}_median_s"] for p in BWD_PHASES}
    expect(math.isclose(a["bwd_a2a_expert_ratio"], (t["bwd_combine"] + t["bwd_dispatch"]) / t["bwd_expert"],
                        rel_tol=1e-9), f"{name}: backward time ratio")
    expect(math.isclose(a["pred_bwd_a2a_expert_ratio"], a["pred_a2a_expert_ratio"] / 2, rel_tol=1e-9),
           f"{name}: predicted backward ratio is not half the forward's")
    # The forward and backward timers run inside the step's: per iteration and rank.
    inner = g["phase_forward_s"][()] + g["phase_backward_s"][()]
    expect(np.all(inner <= g["time_s"][()] * 1.0001 + 1e-6), f"{name}: forward + backward > step")
    for p in PHASES:
        expect(np.all(g[f"phase_{p}_s"][()] <= g["phase_forward_s"][()] * 1.0001 + 1e-6), f"{name}: {p} > forward")
    for p in BWD_PHASES:
        expect(np.all(g[f"phase_{p}_s"][()] <= g["phase_backward_s"][()] * 1.0001 + 1e-6), f"{name}: {p} > backward")
    for x in ("input", "expert_weights", "router", "gate"):
        err = a[f"grad_{x}_max_abs_err"]
        expect(math.isfinite(err) and err <= a["check_max_abs_err"], f"{name}: grad_{x}_max_abs_err {err}")


def check_gradient_tensors(g: h5py.Group, ranks: int, chosen: np.ndarray, kept: np.ndarray,
                           kept_load: np.ndarray) -> None:
    """Identities of the saved gradients (--save-tensors), independent of the C++ code."""
    a = g.attrs
    name = g.name
    n_e, T, k, E, h = (int(a[x]) for x in ("n_e", "tokens", "top_k", "experts", "h"))
    d_ff, w1c = int(a["d_ff"]), int(a["d_ff"]) * (2 if a["mlp"] == "swiglu" else 1)
    gate, dgate = g["tensor_gate"][()], g["tensor_grad_gate"][()]
    dy, out = g["tensor_grad_output"][()], g["tensor_output"][()]
    expect(np.all(dgate[~kept] == 0), f"{name}: a dropped copy has a gate gradient")
    # out_t = sum_kept g_c y_c and dgate_c = <dY_t, y_c>: <dY, out> = sum_c g_c dgate_c.
    lhs, rhs = (dy * out).sum(axis=1), (gate * dgate).sum(axis=1)
    expect(np.allclose(lhs, rhs, rtol=1e-4, atol=1e-4 * np.abs(lhs).max()), f"{name}: <dY, out> {lhs} != {rhs}")
    router = g["tensor_grad_router"][()].reshape(ranks, h, E)  # softmax: logit gradients sum to 0
    expect(np.allclose(router.sum(axis=2), 0, atol=1e-5 * max(1.0, np.abs(router).max())),
           f"{name}: router weight gradient rows do not sum to zero")
    per = E // n_e
    w1 = g["tensor_grad_w1"][()].reshape(ranks, per, h * w1c)
    w2 = g["tensor_grad_w2"][()].reshape(ranks, per, d_ff * h)
    for r in range(ranks):
        grp = r // n_e
        for j in range(per):
            expert = (r % n_e) * per + j
            unused = kept_load[grp][expert] == 0
            expect((not np.any(w1[r, j])) == unused and (not np.any(w2[r, j])) == unused,
                   f"{name}: rank {r} expert {expert} load {kept_load[grp][expert]} vs its weight gradient")


def checked_cases(f: h5py.File, ranks: int, dtype: str, expected: int) -> h5py.Group:
    """The file's `expected` moe cases, each checked (check_case)."""
    cases = f["moe"]
    expect(len(cases) == expected, f"expected {expected} cases, got {len(cases)}")
    elem = {"fp32": 4, "fp64": 8}[dtype]
    for g in cases.values():
        check_case(g, ranks, elem)
    return cases


def scenario_routing(env: Env, ranks: int, dtype: str) -> None:
    """Uniform, zipf, hot, capacity-limited: output == reference, drops and bytes recomputed."""
    out = run_moe(env, ranks, f"moe_np{ranks}", *SMALL, "--dtype", dtype, "--experts", "4,8", "--top-k", "2",
                  "--skew", "none,zipf,hot", "--alpha", "1.2", "--hot-factor", "1.8",
                  "--capacity-factor", "0,1.0,0.5", "--save-tensors")
    with h5py.File(out) as f:
        cases = checked_cases(f, ranks, dtype, 2 * 3 * 3)
        limited = [g for g in cases.values() if g.attrs["capacity_factor"] == 0.5]
        expect(all(g.attrs["dropped_copies"] > 0 for g in limited), "CF 0.5 dropped nothing")
        none = [g.attrs["expert_load_routed_max_over_mean"] for g in cases.values() if g.attrs["skew"] == "none"]
        hot = [g.attrs["expert_load_routed_max_over_mean"] for g in cases.values() if g.attrs["skew"] == "hot"]
        expect(min(hot) > max(none), f"hot skew ({hot}) not above uniform ({none})")


def scenario_uniform_bytes(env: Env) -> None:
    """Large T, uniform routing: bytes within 2% of 2kThe(N_e-1)/N_e forward and of
    4kThe(N_e-1)/N_e forward + backward; the aux loss near alpha."""
    out = run_moe(env, 2, "moe_uniform", "--tokens", "8192", "--hidden", "8", "--ffn-hidden", "8", "--experts", "8",
                  "--top-k", "2", "--iters", "1", "--warmup", "0", "--backend", "cpu", "--pass", "fwd,fwd_bwd")
    with h5py.File(out) as f:
        fwd, step = sorted(f["moe"].values(), key=is_fwd_bwd)
        for g in (fwd, step):
            check_case(g, 2, 4)
            rel = g.attrs["a2a_bytes_rel_to_pred"]
            expect(abs(rel - 1) < 0.02, f"uniform bytes {rel:.4f} x the prediction, not within 2%")
            expect(abs(g.attrs["aux_loss"] / 1e-2 - 1) < 0.05, f"aux loss {g.attrs['aux_loss']} not near alpha")
            print(f"  {g.name}: bytes / prediction {rel:.4f}, aux loss {g.attrs['aux_loss']:.5f}")
        rel = step.attrs["fwd_bwd_a2a_bytes_rel_to_pred"]
        expect(abs(rel - 1) < 0.02, f"uniform fwd + bwd bytes {rel:.4f} x 4kThe(N_e-1)/N_e, not within 2%")
        expect(step.attrs["fwd_bwd_a2a_bytes_per_rank"] == 2 * fwd.attrs["a2a_bytes_per_rank"],
               "the training step's bytes are not twice the forward's")
        print(f"  fwd + bwd bytes / 4kThe(N_e-1)/N_e {rel:.4f}")


def scenario_zero_splits(env: Env) -> None:
    """Experts nobody picks and a rank that sends nothing: no hang, output still right; in the
    backward too (unpicked experts get zero weight gradients)."""
    out = run_moe(env, 2, "moe_zero", *SMALL, "--experts", "4", "--top-k", "1", "--skew", "zipf", "--alpha", "12",
                  "--save-tensors", "--pass", "fwd,fwd_bwd")
    with h5py.File(out) as f:
        for g in f["moe"].values():
            check_case(g, 2, 4)
            load = g["expert_load"][()].ravel()
            expect((load == 0).sum() >= 2, f"expected unpicked experts, loads {load}")
            expect(0 in g["dispatch_bytes"][()].ravel(), f"no rank sent nothing: {g['dispatch_bytes'][()]}")


def scenario_same_seed(env: Env) -> None:
    """Same seed: the same routing and bytes; another seed: another routing."""
    args = [*SMALL, "--experts", "8", "--skew", "zipf", "--alpha", "1", "--capacity-factor", "1", "--save-tensors"]
    runs = [run_moe(env, 2, f"seed{i}", *args, "--seed", seed) for i, seed in enumerate(("7", "7", "8"))]
    data = []
    for path in runs:
        with h5py.File(path) as f:
            (g,) = f["moe"].values()
            data.append({k: g[k][()] for k in ("tensor_chosen_expert", "tensor_gate", "tensor_kept",
                                              "moe_bytes_sent", "tensor_output")})
    for k in data[0]:
        expect(np.array_equal(data[0][k], data[1][k]), f"same seed, different {k}")
    expect(not np.array_equal(data[0]["tensor_chosen_expert"], data[2]["tensor_chosen_expert"]),
           "another seed gave the same routing")


def scenario_ep_groups(env: Env) -> None:
    """--ep 2 on 4 ranks: two groups at once, each checked, forward and backward (each group's
    gradients against its own reference); balancing history recorded."""
    out = run_moe(env, 4, "moe_ep2", *SMALL, "--experts", "4", "--ep", "2", "--skew", "hot", "--hot-factor", "1.8",
                  "--capacity-factor", "0,1.25", "--balance-steps", "4", "--save-tensors", "--pass", "fwd,fwd_bwd")
    with h5py.File(out) as f:
        for g in f["moe"].values():
            expect(g.attrs["n_e"] == 2 and g.attrs["groups"] == 2, "n_e / groups attributes")
            check_case(g, 4, 4)
            hist = g["balance_max_over_mean"][()].ravel()
            expect(hist.shape == (5,) and np.all(hist >= 1), f"balance history {hist}")
            expect(g["time_s"].shape[1] == 4, "time_s is not per rank of the job")


def scenario_gradients(env: Env, ranks: int, dtype: str, mlp: str) -> None:
    """--pass fwd,fwd_bwd under skew and capacity drops: every case checked (output, routing,
    drops, bytes, and the input, expert-weight, router and gate gradients against the host
    double reference), bytes of both passes recomputed, gradient identities, and each fwd_bwd
    case's forward identical to its fwd case (same inputs, same routing, same output)."""
    out = run_moe(env, ranks, f"moe_grad_np{ranks}", *SMALL, "--dtype", dtype, "--mlp", mlp, "--experts", "4",
                  "--skew", "none,zipf,hot", "--alpha", "1.5", "--hot-factor", "1.8", "--capacity-factor", "0,0.5",
                  "--pass", "fwd,fwd_bwd", "--save-tensors")
    with h5py.File(out) as f:
        cases = checked_cases(f, ranks, dtype, 3 * 2 * 2)
        steps = [g for g in cases.values() if is_fwd_bwd(g)]
        expect(len(steps) == 6, f"{len(steps)} fwd_bwd cases")
        for g in steps:
            fwd = cases[g.name.rsplit("/", 1)[1].removesuffix("_fwd_bwd")]
            for t in ("tensor_chosen_expert", "tensor_kept", "tensor_output", "dispatch_bytes", "combine_bytes"):
                expect(np.array_equal(fwd[t][()], g[t][()]), f"{g.name}: {t} differs from its forward case's")
            if g.attrs["capacity_factor"] == 0.5:
                expect(g.attrs["dropped_copies"] > 0, f"{g.name}: no drops at CF 0.5")
        worst = max(max(g.attrs[f"grad_{x}_max_abs_err"] for x in ("input", "expert_weights", "router", "gate"))
                    for g in steps)
        print(f"  largest gradient error {worst:.3g}")


def model_lines(env: Env, *args: str) -> dict[str, float]:
    """`model`'s printed figures, label -> value (its `  label  value [unit]` lines)."""
    proc = subprocess.run([str(env.bin_dir / "model"), *args], capture_output=True, text=True, timeout=30)
    expect(proc.returncode == 0, f"model {' '.join(args)}", proc)
    lines = {}
    for line in proc.stdout.splitlines():
        words = line.split()
        if not line.startswith("  ") or line.startswith("  --") or len(words) < 2:
            continue
        for cut in (1, 2):  # the value last (no unit) or before the unit
            try:
                lines[" ".join(words[:-cut])] = float(words[-cut])
                break
            except ValueError:
                continue
    return lines


def scenario_model_agrees(env: Env) -> None:
    """`model --section moe` prints the training-step figures the benchmark predicts and counts:
    collective calls per pass, control bytes (exactly the transport's), uniform bytes per pass
    and for the step, backward FLOPs, and totals over --layers."""
    for cf in ("0", "1.5"):
        out = run_moe(env, 2, f"moe_model_cf{cf}", *SMALL, "--experts", "4", "--capacity-factor", cf,
                      "--pass", "fwd_bwd")
        with h5py.File(out) as f:
            (g,) = f["moe"].values()
            check_case(g, 2, 4)
            a = g.attrs
            m = model_lines(env, "--section", "moe", "--experts", "4", "--ep", "2", "--top-k", "2", "--tokens", "64",
                            "--hidden", "16", "--d-ff", "32", "--swiglu", "--dtype", "fp32", "--capacity-factor", cf,
                            "--layers", "3")
            calls = g["collective_calls"][()]
            pairs = [
                ("fwd all-to-all calls (counts)", calls[0][0]),
                ("fwd all-to-all-v calls (dispatch, combine)", calls[0][1]),
                ("fwd all-gather calls (routing, under a capacity)", calls[0][2]),
                ("bwd all-to-all-v calls (gradients out and home)", calls[1][1]),
                ("bwd all-gather calls (routed counts for f_i)", calls[1][2]),
                ("fwd control bytes (counts, routing)", g["control_bytes"][()].ravel()[0]),
                ("bwd control bytes (routed counts)", g["bwd_control_bytes"][()].ravel()[0]),
                ("bwd dispatch + combine bytes (uniform)", a["pred_bwd_a2a_bytes_per_rank"]),
                ("fwd + bwd dispatch + combine bytes 4kThe(N_e-1)/N_e", a["pred_fwd_bwd_a2a_bytes_per_rank"]),
                ("bwd expert FLOPs per rank (k T pairs, uniform)", a["pred_bwd_expert_flops_per_rank"]),
                ("model collective calls fwd + bwd (L layers)", 3 * calls.sum()),
                ("model expert FLOPs per rank fwd + bwd (L layers)",
                 3 * (a["pred_expert_flops_per_rank"] + a["pred_bwd_expert_flops_per_rank"])),
                ("model all-to-all bytes per rank, fwd + bwd", 3 * a["pred_fwd_bwd_a2a_bytes_per_rank"]),
            ]
            for label, want in pairs:
                expect(label in m, f"model does not print '{label}': {sorted(m)}")
                expect(math.isclose(m[label], float(want), rel_tol=1e-5), f"CF {cf}: model '{label}' {m[label]} != {want}")
            print(f"  CF {cf}: {len(pairs)} model figures agree with the benchmark")


def scenario_scripts(env: Env) -> None:
    """compare.py, summary.py and plot.py on the new cases: a forward-only baseline pairs with
    the forward cases of a fwd,fwd_bwd run (the fwd_bwd ones are new), two fwd,fwd_bwd runs pair
    case by case, and the plots show forward and backward per variant."""
    args = [*SMALL, "--experts", "4", "--skew", "none,zipf", "--capacity-factor", "0,1"]
    base = run_moe(env, 2, "base", *args)
    cand = run_moe(env, 2, "cand", *args, "--pass", "fwd,fwd_bwd")
    again = run_moe(env, 2, "again", *args, "--pass", "fwd_bwd,fwd")
    def script(name: str, *xs: Path | str) -> subprocess.CompletedProcess:
        proc = subprocess.run([*command_line(name), *map(str, xs)], capture_output=True, text=True,
                              timeout=120)
        expect(proc.returncode in (0, 1), f"{name} failed", proc)
        return proc

    proc = script("compare.py", base, cand, "--threshold", "0.99", "--verdict", env.workdir / "v1.json")
    v = json.loads((env.workdir / "v1.json").read_text())
    expect(len(v["cases"]) == 4 and len(v["only_in_candidate"]) == 4 and not v["not_comparable"],
           f"fwd baseline vs fwd,fwd_bwd: {v}", proc)
    expect(all(k.endswith("_fwd_bwd") for k in v["only_in_candidate"]), f"new cases {v['only_in_candidate']}")
    proc = script("compare.py", cand, again, "--threshold", "0.99", "--verdict", env.workdir / "v2.json")
    v = json.loads((env.workdir / "v2.json").read_text())
    expect(len(v["cases"]) == 8 and not v["only_in_candidate"] and not v["only_in_baseline"], f"{v}", proc)
    proc = script("summary.py", cand)
    expect(proc.stdout.count("_fwd_bwd ") == 4 and " FAIL" not in proc.stdout, "summary of fwd_bwd cases", proc)
    plots = env.workdir / "plots"
    script("plot.py", cand, "--out", plots)
    names = sorted(p.name for p in plots.glob("*.png"))
    for want in ("moe_passes.png", "moe_phases.png"):
        expect(want in names, f"plot.py did not draw {want}: {names}")


def scenario_bad_input(env: Env) -> None:
    cases = {
        "E not divisible by N_e": (["--experts", "6"], "not divisible"),
        "k < 1": (["--top-k", "0"], "--top-k"),
        "k > E": (["--top-k", "9", "--experts", "8"], "--top-k"),
        "CF < 0": (["--capacity-factor", "-1"], "--capacity-factor"),
        "T < 1": (["--tokens", "0"], "--tokens"),
        "unknown MLP": (["--mlp", "relu"], "relu"),
        "unknown skew": (["--skew", "pareto"], "pareto"),
        "alpha < 0": (["--skew", "zipf", "--alpha", "-0.5"], "--alpha"),
        "bad number": (["--alpha", "x1"], "x1"),
        "hot factor too large": (["--skew", "hot", "--hot-factor", "4", "--experts", "8"], "--hot-factor"),
        "ep not dividing ranks": (["--ep", "3"], "--ep"),
        "above MPI's int count": (["--tokens", "1M", "--hidden", "4096"], "above this transport's limit"),
        "unknown pass": (["--pass", "fwd,bwd"], "--pass: unknown pass 'bwd'"),
        "empty pass": (["--pass", ","], "--pass: unknown pass ''"),
    }
    limit = env.quick_limit_s(4, "moe")  # relative to `moe --help` on this host, now
    for what, (args, needle) in cases.items():
        out = env.workdir / "bad_moe.h5"
        proc = env.mpirun(4, "moe", "--backend", "cpu", "--tokens", "8", "--hidden", "8", "--ffn-hidden", "8",
                          "--experts", "8", *args, "--out", str(out), timeout=2 * limit)
        expect(proc.returncode == 2, f"{what}: exit status {proc.returncode}", proc)
        expect(proc.elapsed < limit, f"{what}: took {proc.elapsed:.1f} s, over {limit:.1f} s "
               f"(10 x the {env.startup_s(4, 'moe'):.2f} s of moe --help)", proc)
        expect(proc.stderr.count("error:") == 1 and needle in proc.stderr, f"{what}: message lacks '{needle}'", proc)
        expect(not out.exists() and not Path(str(out) + ".partial").exists(), f"{what}: results file left", proc)
        print(f"  ok: {what}")


def scenario_help(env: Env) -> None:
    """--help explains every flag and the default hot factor; the defaults run: `--skew hot`
    without --hot-factor (M = 3 at the default E = 8, k = 2; (1 + E/k)/2 where E/k <= 3); the
    summary table tells sweep points apart."""
    proc = env.mpirun(2, "moe", "--help", timeout=60)
    expect(proc.returncode == 0, "--help failed", proc)
    for flag in ("--tokens", "--hidden", "--ffn-hidden", "--experts", "--top-k", "--mlp", "--skew", "--alpha",
                 "--hot-factor", "--capacity-factor", "--balance-steps", "--ep", "--save-tensors", "--pass",
                 "--dispatch", "--ranks-per-node", "--max-nodes-per-token", "--mode", "--traffic", "--bytes",
                 "--a2a-algo", "--redundant-experts",
                 "fwd_bwd"):
        expect(flag in proc.stdout, f"--help does not explain {flag}", proc)
    expect("(1 + E/k)/2" in proc.stdout, "--help does not give the default hot factor", proc)
    # The review's command (E, k, h, d_ff and the hot factor at their defaults), made short.
    out = run_moe(env, 2, "moe_hot_defaults", "--skew", "hot", "--tokens", "64", "--iters", "2", "--warmup", "1",
                  "--backend", "cpu")
    with h5py.File(out) as f:
        (g,) = f["moe"].values()
        expect((g.attrs["experts"], g.attrs["top_k"], g.attrs["hot_factor"]) == (8, 2, 3.0),
               f"defaults: E={g.attrs['experts']} k={g.attrs['top_k']} M={g.attrs['hot_factor']}")
        expect("_hot_m3_" in g.name, f"case name {g.name}")
        check_case(g, 2, 4)
    # Per case: E = 4, k = 2 (E/k = 2) gets M = 1.5; the table's rows show T and E.
    out, proc = run_moe_proc(env, 2, "moe_hot_per_case", "--skew", "hot", "--tokens", "16,32", "--experts", "4,8",
                             "--hidden", "16", "--ffn-hidden", "32", "--iters", "2", "--warmup", "1", "--backend", "cpu")
    with h5py.File(out) as f:
        got = sorted((int(g.attrs["experts"]), float(g.attrs["hot_factor"])) for g in f["moe"].values())
        expect(got == [(4, 1.5), (4, 1.5), (8, 3.0), (8, 3.0)], f"per-case default hot factors {got}")
        for g in f["moe"].values():
            check_case(g, 2, 4)
    rows = summary_rows(proc.stdout)
    expect(len(rows) == 4, f"summary rows {rows}", proc)
    keys = [tuple(r[:7]) for r in rows]  # T E k mlp skew a/M CF
    expect(len(set(keys)) == 4, f"summary rows do not tell the sweep points apart: {keys}", proc)
    expect(sorted((r[0], r[1], r[5]) for r in rows) == [("16", "4", "1.50"), ("16", "8", "3.00"),
                                                        ("32", "4", "1.50"), ("32", "8", "3.00")],
           f"summary T, E, M columns {keys}", proc)


SCENARIOS = {
    "moe_np2_fp64": lambda e: scenario_routing(e, 2, "fp64"),
    "moe_grad_np1_fp64": lambda e: scenario_gradients(e, 1, "fp64", "swiglu"),
    "moe_grad_np2_fp64": lambda e: scenario_gradients(e, 2, "fp64", "gelu"),
    "moe_grad_np4_fp32": lambda e: scenario_gradients(e, 4, "fp32", "swiglu"),
    "moe_model_agrees": scenario_model_agrees,
    "moe_scripts": scenario_scripts,
    "moe_np4_fp32": lambda e: scenario_routing(e, 4, "fp32"),
    "moe_uniform_bytes": scenario_uniform_bytes,
    "moe_zero_splits": scenario_zero_splits,
    "moe_same_seed": scenario_same_seed,
    "moe_ep_groups": scenario_ep_groups,
    "moe_bad_input": scenario_bad_input,
    "moe_help": scenario_help,
}


def main() -> None:
    run_cli(SCENARIOS, __doc__)


if __name__ == "__main__":
    sys.exit(main())
