#!/usr/bin/env python3
"""Integration scenarios of the moe executable (CPU backend), one per ctest test.

Each runs bench/moe under mpirun and reads its HDF5 file with h5py. Routing, drops and bytes
are recomputed here from the saved routing tensors (--save-tensors), independently of the
C++ code: the drop rule (lowest gate first, ties by global copy index), the dropped count, and
the bytes each rank must send in dispatch and combine.
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import h5py
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_scenario import Env, expect, run_cli  # noqa: E402

SMALL = ["--tokens", "64", "--hidden", "16", "--ffn-hidden", "32", "--iters", "2", "--warmup", "1",
         "--backend", "cpu"]
PHASES = ("route", "permute", "dispatch", "expert", "combine")


def run_moe(env: Env, ranks: int, name: str, *args: str) -> Path:
    return run_moe_proc(env, ranks, name, *args)[0]


def run_moe_proc(env: Env, ranks: int, name: str, *args: str):
    out = env.workdir / f"{name}.h5"
    proc = env.mpirun(ranks, "moe", *args, "--out", str(out))
    expect(proc.returncode == 0, f"moe {name} failed", proc)
    expect(proc.stdout.count("MoE layer forward") == 1, "summary table not printed once", proc)
    return out, proc


def summary_rows(stdout: str) -> list[list[str]]:
    """The rows of the summary table (after its two header lines), split on blanks."""
    lines = stdout.split("MoE layer forward", 1)[1].splitlines()[2:]
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


def check_case(g: h5py.Group, ranks: int, elem: int) -> None:
    a = g.attrs
    name = g.name
    n_e, T, k, E, h = (int(a[x]) for x in ("n_e", "tokens", "top_k", "experts", "h"))
    expect(a["check_passed"] == 1, f"{name}: check_passed {a['check_passed']}")
    expect(a["bytes_match"] == 1, f"{name}: bytes measured != implied by the routing")
    for p in PHASES:
        expect(g[f"phase_{p}_s"].shape == g["time_s"].shape, f"{name}: phase {p} missing")
        expect(a[f"phase_{p}_median_s"] > 0, f"{name}: phase {p} time not positive")
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
    print(f"  {name}: routing, {dropped} drops and bytes recomputed independently")


def scenario_routing(env: Env, ranks: int, dtype: str) -> None:
    """Uniform, zipf, hot, capacity-limited: output == reference, drops and bytes recomputed."""
    out = run_moe(env, ranks, f"moe_np{ranks}", *SMALL, "--dtype", dtype, "--experts", "4,8", "--top-k", "2",
                  "--skew", "none,zipf,hot", "--alpha", "1.2", "--hot-factor", "1.8",
                  "--capacity-factor", "0,1.0,0.5", "--save-tensors")
    elem = {"fp32": 4, "fp64": 8}[dtype]
    with h5py.File(out) as f:
        cases = f["moe"]
        expect(len(cases) == 2 * 3 * 3, f"expected 18 cases, got {len(cases)}")
        for g in cases.values():
            check_case(g, ranks, elem)
        limited = [g for g in cases.values() if g.attrs["capacity_factor"] == 0.5]
        expect(all(g.attrs["dropped_copies"] > 0 for g in limited), "CF 0.5 dropped nothing")
        none = [g.attrs["expert_load_routed_max_over_mean"] for g in cases.values() if g.attrs["skew"] == "none"]
        hot = [g.attrs["expert_load_routed_max_over_mean"] for g in cases.values() if g.attrs["skew"] == "hot"]
        expect(min(hot) > max(none), f"hot skew ({hot}) not above uniform ({none})")


def scenario_uniform_bytes(env: Env) -> None:
    """Large T, uniform routing: bytes within 2% of 2kThe(N_e-1)/N_e; the aux loss near alpha."""
    out = run_moe(env, 2, "moe_uniform", "--tokens", "8192", "--hidden", "8", "--ffn-hidden", "8", "--experts", "8",
                  "--top-k", "2", "--iters", "1", "--warmup", "0", "--backend", "cpu")
    with h5py.File(out) as f:
        (g,) = f["moe"].values()
        check_case(g, 2, 4)
        rel = g.attrs["a2a_bytes_rel_to_pred"]
        expect(abs(rel - 1) < 0.02, f"uniform bytes {rel:.4f} x the prediction, not within 2%")
        expect(abs(g.attrs["aux_loss"] / 1e-2 - 1) < 0.05, f"aux loss {g.attrs['aux_loss']} not near alpha")
        print(f"  bytes / prediction {rel:.4f}, aux loss {g.attrs['aux_loss']:.5f}")


def scenario_zero_splits(env: Env) -> None:
    """Experts nobody picks and a rank that sends nothing: no hang, output still right."""
    out = run_moe(env, 2, "moe_zero", *SMALL, "--experts", "4", "--top-k", "1", "--skew", "zipf", "--alpha", "12",
                  "--save-tensors")
    with h5py.File(out) as f:
        (g,) = f["moe"].values()
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
    """--ep 2 on 4 ranks: two groups at once, each checked; balancing history recorded."""
    out = run_moe(env, 4, "moe_ep2", *SMALL, "--experts", "4", "--ep", "2", "--skew", "hot", "--hot-factor", "1.8",
                  "--capacity-factor", "0,1.25", "--balance-steps", "4", "--save-tensors")
    with h5py.File(out) as f:
        for g in f["moe"].values():
            expect(g.attrs["n_e"] == 2 and g.attrs["groups"] == 2, "n_e / groups attributes")
            check_case(g, 4, 4)
            hist = g["balance_max_over_mean"][()].ravel()
            expect(hist.shape == (5,) and np.all(hist >= 1), f"balance history {hist}")
            expect(g["time_s"].shape[1] == 4, "time_s is not per rank of the job")


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
    }
    for what, (args, needle) in cases.items():
        out = env.workdir / "bad_moe.h5"
        proc = env.mpirun(4, "moe", "--backend", "cpu", "--tokens", "8", "--hidden", "8", "--ffn-hidden", "8",
                          "--experts", "8", *args, "--out", str(out), timeout=60)
        expect(proc.returncode == 2, f"{what}: exit status {proc.returncode}", proc)
        expect(proc.elapsed < 30, f"{what}: took {proc.elapsed:.0f} s", proc)
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
                 "--hot-factor", "--capacity-factor", "--balance-steps", "--ep", "--save-tensors"):
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
