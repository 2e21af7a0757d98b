#!/usr/bin/env python3
"""Integration scenarios of the sp_tp layer's training step (`--mode layer --pass fwd,fwd_bwd`,
CPU backend), one per ctest test.

Each runs bench/sp_tp under mpirun and reads its HDF5 file with h5py. The collectives of each
pass (calls of each kind, bytes per rank) are recomputed here from METHODS.md section 5, written
out independently of common/model; the gradient checks' verdicts (TP+SP against TP, the fp64
finite-difference directional derivative) are read back; with --save-tensors at dropout 0 the
whole layer, forward and backward, is recomputed in numpy from the saved input, weights and
output gradient, as an outside reference.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np

from scripts.cli import command_line
from layer_numpy import reference, shapes
from run_scenario import Env, expect, expect_refused, run_cli

SHAPE = ["--seq", "32", "--batch", "2", "--hidden", "256", "--heads", "4", "--ffn-hidden", "512"]
S, B, H, A, FF = 32, 2, 256, 4, 512
FWD_TABLE, STEP_TABLE = "Transformer layer forward", "Transformer layer training step"
PHASES = ("fwd", "bwd", "fwd_compute", "fwd_comm", "bwd_compute", "bwd_comm")
WEIGHTS = ("ln1_gamma", "ln1_beta", "ln2_gamma", "ln2_beta", "w_qkv", "w_out", "w_fc1", "w_fc2")


def run_layer(env: Env, ranks: int, name: str, *args: str) -> tuple[Path, subprocess.CompletedProcess]:
    out = env.workdir / f"{name}.h5"
    proc = env.mpirun(ranks, "sp_tp", "--mode", "layer", "--backend", "cpu", *SHAPE, "--iters", "3",
                      "--warmup", "1", *args, "--out", str(out))
    expect(proc.returncode == 0, f"sp_tp layer {name} failed", proc)
    return out, proc


def expected_collectives(variant: str, t: int, e: int) -> dict[str, float]:
    """METHODS.md section 5, per layer and pass, n = s b h e bytes: an all-reduce sends
    2 (t-1)/t n per rank, a reduce-scatter or an all-gather (t-1)/t n."""
    n = S * B * H * e
    part = (t - 1) / t * n
    if variant == "tp":
        return {"fwd_all_reduce_calls": 2, "fwd_reduce_scatter_calls": 0, "fwd_all_gather_calls": 0,
                "bwd_all_reduce_calls": 2, "bwd_reduce_scatter_calls": 0, "bwd_all_gather_calls": 0,
                "bwd_ln_grad_all_reduce_calls": 0, "fwd_comm_bytes_per_rank": 4 * part,
                "bwd_comm_bytes_per_rank": 4 * part, "bwd_ln_grad_bytes_per_rank": 0,
                "fwd_bwd_comm_bytes_per_rank": 8 * part}
    return {"fwd_all_reduce_calls": 0, "fwd_reduce_scatter_calls": 2, "fwd_all_gather_calls": 2,
            "bwd_all_reduce_calls": 0, "bwd_reduce_scatter_calls": 2, "bwd_all_gather_calls": 4,
            "bwd_ln_grad_all_reduce_calls": 1, "fwd_comm_bytes_per_rank": 4 * part,
            "bwd_comm_bytes_per_rank": 6 * part,
            "bwd_ln_grad_bytes_per_rank": 2 * (t - 1) / t * 4 * H * e,  # 2 LayerNorms x (w, b)
            "fwd_bwd_comm_bytes_per_rank": 10 * part}


def scenario_training_step(env: Env, ranks: int, dtype: str) -> None:
    """Forward cases unchanged; training steps: gradients checked (TP+SP == TP, bit for bit with
    up to two ranks; fp64 finite differences), collectives and bytes per pass exact, the
    backward's peak memory at least the ledger and the gradients, phases per pass."""
    out, proc = run_layer(env, ranks, f"step_np{ranks}", "--dtype", dtype, "--pass", "fwd,fwd_bwd",
                          "--bwd-overlap", "1,0", "--attention", "fused,unfused")
    expect(proc.stdout.count(FWD_TABLE) == 1 and proc.stdout.count(STEP_TABLE) == 1, "summary tables", proc)
    e, t = {"fp32": 4, "fp64": 8}[dtype], ranks
    with h5py.File(out) as f:
        cases = dict(f["sp_tp"].items())
        steps = {k: g for k, g in cases.items() if g.attrs.get("pass") == "fwd_bwd"}
        fwds = {k: g for k, g in cases.items() if k not in steps}
        expect(len(fwds) == 4 and len(steps) == 6, f"cases {sorted(cases)}")
        for name, g in fwds.items():
            expect("pass" not in g.attrs and "bwd_overlap" not in g.attrs, f"{name}: forward case params changed")
            expect(not name.endswith("_fwd_bwd"), f"{name}: forward case renamed")
        for name, g in steps.items():
            variant = g.attrs["variant"]
            suffix = "_fwd_bwd_nooverlap" if g.attrs.get("bwd_overlap", 1) == 0 else "_fwd_bwd"
            expect(name.endswith(suffix) and name[: -len(suffix)] in fwds, f"{name}: not its forward's name + {suffix}")
            expect(("bwd_overlap" in g.attrs) == (variant == "tp_sp"), f"{name}: bwd_overlap param")
            expect(g.attrs["check_passed"] == 1, f"{name}: check failed")
            expect(g.attrs["check_grad_max_err"] <= g.attrs["check_tolerance"], f"{name}: gradient error")
            if ranks <= 2:
                expect(g.attrs["check_bit_exact"] == 1 and g.attrs["check_grad_bit_exact"] == 1,
                       f"{name}: TP+SP not bit-exact with TP")
            if dtype == "fp64":
                expect(g.attrs["check_fd_rel_err"] < 1e-6, f"{name}: finite differences {g.attrs['check_fd_rel_err']}")
            else:
                expect(np.isnan(g.attrs["check_fd_rel_err"]) and "fp64" in g.attrs["check_fd_note"],
                       f"{name}: fd check outside fp64")
            for key, want in expected_collectives(variant, t, e).items():
                expect(g.attrs[key] == want, f"{name}: {key} = {g.attrs[key]}, METHODS.md says {want}")
                expect(g.attrs["pred_" + key] == want, f"{name}: pred_{key} = {g.attrs['pred_' + key]}")
            step = expected_collectives(variant, t, e)
            total = step["fwd_bwd_comm_bytes_per_rank"] + step["bwd_ln_grad_bytes_per_rank"]
            expect(list(g["bytes_sent"][()]) == [total] * t, f"{name}: step bytes {g['bytes_sent'][()]} != {total}")
            # Memory: the peak of the backward holds at least the ledger and the weight gradients.
            ledger = int(g["ledger_bytes"][()].sum())
            expect(g.attrs["activation_bytes"] == ledger, f"{name}: ledger")
            expect(g.attrs["bwd_peak_bytes"] >= ledger + g.attrs["weight_grad_bytes"], f"{name}: peak below ledger")
            expect(g.attrs["bwd_working_set_bytes"] == g.attrs["bwd_peak_bytes"] - ledger, f"{name}: working set")
            # Phases: fwd and bwd, each split; the step holds both passes.
            for p in PHASES:
                expect(g[f"phase_{p}_s"].shape == (3, t), f"{name}: phase {p}")
            both = g["phase_fwd_s"][()] + g["phase_bwd_s"][()]
            expect(np.all(g["time_s"][()] >= 0.99 * both), f"{name}: step shorter than fwd + bwd")
            inner = g["phase_bwd_compute_s"][()] + g["phase_bwd_comm_s"][()]
            expect(np.all(inner <= 1.01 * g["phase_bwd_s"][()] + 1e-5), f"{name}: bwd phases exceed bwd")
        # Overlap on and off: the same numbers (the GEMM is chunked alike), the same bytes.
        for path in ("flash", "unfused"):
            on = steps[f"layer_tp_sp_{dtype}_s{S}_b{B}_h{H}_a{A}_ff{FF}_{path}_causal_fwd_bwd"]
            off = steps[f"layer_tp_sp_{dtype}_s{S}_b{B}_h{H}_a{A}_ff{FF}_{path}_causal_fwd_bwd_nooverlap"]
            for k in ("check_grad_max_err", "check_fd_rel_err", "fwd_bwd_comm_bytes_per_rank", "bwd_peak_bytes"):
                same = on.attrs[k] == off.attrs[k] or (np.isnan(on.attrs[k]) and np.isnan(off.attrs[k]))
                expect(same, f"{path}: {k} differs with the overlap: {on.attrs[k]} vs {off.attrs[k]}")
            if t > 1:
                expect(on.attrs["bwd_ln_gather_transfer_median_s"] > 0, f"{path}: no overlapped transfer timed")
                expect(np.isnan(off.attrs["bwd_ln_gather_transfer_median_s"]), f"{path}: transfer timed without overlap")
                done = on.attrs["bwd_ln_gather_done_during_compute_fraction"]
                expect(0 <= done <= 1, f"{path}: done-during-compute fraction {done}")
                expect(np.isnan(off.attrs["bwd_ln_gather_done_during_compute_fraction"]), f"{path}: fraction without overlap")
    print(f"{out.name}: {len(fwds)} forward and {len(steps)} training-step cases checked")


def scenario_bad_input(env: Env) -> None:
    base = ["--mode", "layer", *SHAPE]
    expect_refused(env, "sp_tp", {
        "unknown pass": ([*base, "--pass", "fwd,bwd"], "unknown pass 'bwd'"),
        "empty pass in the list": ([*base, "--pass", "fwd,,fwd_bwd"], "unknown pass ''"),
        "bad overlap value": ([*base, "--pass", "fwd_bwd", "--bwd-overlap", "2"], "--bwd-overlap"),
        "overlap without a backward": ([*base, "--bwd-overlap", "1,0"], "add --pass fwd_bwd"),
    })
    # An attention path whose engine has no backward (simulated by the test hook).
    out = env.workdir / "nobwd.h5"
    proc = env.mpirun(2, "sp_tp", *base, "--backend", "cpu", "--pass", "fwd_bwd", "--out", str(out),
                      extra_env={"SUITE_TEST_NO_ATTN_BACKWARD": "1"}, timeout=60)
    expect(proc.returncode == 2 and proc.stderr.count("error:") == 1, "backward refusal: exit 2, one message", proc)
    expect("fused attention path cannot run its backward" in proc.stderr, "refusal names the path", proc)
    expect(not out.exists() and not Path(str(out) + ".partial").exists(), "results file left", proc)
    # The forward alone still runs there, and the unfused path's backward needs no engine.
    for args in (["--pass", "fwd"], ["--pass", "fwd_bwd", "--attention", "unfused"]):
        proc = env.mpirun(2, "sp_tp", *base, "--backend", "cpu", "--iters", "1", "--warmup", "0", *args,
                          "--out", str(out), extra_env={"SUITE_TEST_NO_ATTN_BACKWARD": "1"}, timeout=120)
        expect(proc.returncode == 0, f"{args}: refused", proc)
        out.unlink()


def scenario_numpy_reference(env: Env) -> None:
    """--save-tensors at dropout 0: numpy recomputes the layer from the saved input, weights
    and output gradient, forward and backward, and matches every saved tensor (fp64)."""
    out, _ = run_layer(env, 2, "numpy", "--dtype", "fp64", "--dropout", "0", "--pass", "fwd_bwd",
                       "--attention", "fused,unfused", "--save-tensors", "--iters", "1", "--warmup", "0")
    with h5py.File(out) as f:
        expect(len(f["sp_tp"]) == 4, f"cases {list(f['sp_tp'])}")
        for name, g in f["sp_tp"].items():
            def rows(key):  # this rank's rows in rank order: TP's are all rows on every rank
                data = g[f"tensor_{key}"][()]
                return (data[0] if g.attrs["variant"] == "tp" else data.reshape(-1)).reshape(S * B, H)

            def whole(key):  # the same global tensor on every rank
                data = g[f"tensor_{key}"][()]
                expect(all(np.array_equal(data[0], r) for r in data), f"{name}: {key} differs between ranks")
                return data[0].reshape(shapes(H, FF, A)[key.split("_", 1)[1]])

            w = {k: whole(f"weight_{k}") for k in WEIGHTS}
            y, grads = reference(rows("input"), w, rows("d_output"), S, B, A)
            got = {"output": rows("output"), "input": rows("grad_input"), **{k: whole(f"grad_{k}") for k in WEIGHTS}}
            want = {"output": y, **grads}
            for key, value in want.items():
                err = np.abs(got[key] - value).max() / max(1.0, np.abs(value).max())
                expect(err < 1e-10, f"{name}: {key} differs from numpy by {err:.3g} of its largest value")
    print(f"{out.name}: output and every gradient match numpy")


def scenario_scripts(env: Env) -> None:
    """compare.py, summary.py and plot.py on the training steps: a forward-only baseline pairs
    with the forward cases of a fwd,fwd_bwd run (the steps are new), two fwd,fwd_bwd runs pair
    case by case, summary prints the steps, plot.py draws forward and backward per variant."""
    base, _ = run_layer(env, 2, "base", "--dtype", "fp32")
    cand, _ = run_layer(env, 2, "cand", "--dtype", "fp32", "--pass", "fwd,fwd_bwd", "--bwd-overlap", "1,0")
    again, _ = run_layer(env, 2, "again", "--dtype", "fp32", "--pass", "fwd_bwd,fwd", "--bwd-overlap", "0,1")
    def script(name: str, *xs: Path | str) -> subprocess.CompletedProcess:
        proc = subprocess.run([*command_line(name), *map(str, xs)], capture_output=True,
                              text=True, timeout=180)
        expect(proc.returncode in (0, 1), f"{name} failed", proc)
        return proc

    proc = script("compare.py", base, cand, "--threshold", "0.99", "--verdict", env.workdir / "v1.json")
    v = json.loads((env.workdir / "v1.json").read_text())
    expect(len(v["cases"]) == 2 and len(v["only_in_candidate"]) == 3 and not v["not_comparable"],
           f"fwd baseline vs fwd,fwd_bwd: {v}", proc)
    expect(all("_fwd_bwd" in k for k in v["only_in_candidate"]), f"new cases {v['only_in_candidate']}")
    proc = script("compare.py", cand, again, "--threshold", "0.99", "--verdict", env.workdir / "v2.json")
    v = json.loads((env.workdir / "v2.json").read_text())
    expect(len(v["cases"]) == 5 and not v["only_in_candidate"] and not v["only_in_baseline"], f"{v}", proc)
    proc = script("summary.py", cand)
    expect(proc.stdout.count("_fwd_bwd") == 3 and " FAIL" not in proc.stdout, "summary of fwd_bwd cases", proc)
    plots = env.workdir / "plots"
    script("plot.py", cand, "--out", plots)
    names = sorted(p.name for p in plots.glob("*.png"))
    for want in ("sp_tp_layer_time.png", "sp_tp_layer_step.png", "sp_tp_layer_memory.png"):
        expect(want in names, f"plot.py did not draw {want}: {names}")


SCENARIOS = {
    "layer_bwd_np1_fp64": lambda e: scenario_training_step(e, 1, "fp64"),
    "layer_bwd_np2_fp64": lambda e: scenario_training_step(e, 2, "fp64"),
    "layer_bwd_np4_fp64": lambda e: scenario_training_step(e, 4, "fp64"),
    "layer_bwd_np4_fp32": lambda e: scenario_training_step(e, 4, "fp32"),
    "layer_bwd_bad_input": scenario_bad_input,
    "layer_bwd_numpy": scenario_numpy_reference,
    "layer_bwd_scripts": scenario_scripts,
}


def main() -> None:
    run_cli(SCENARIOS, __doc__)


if __name__ == "__main__":
    sys.exit(main())
