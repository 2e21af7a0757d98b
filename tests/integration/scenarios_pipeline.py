#!/usr/bin/env python3
"""Integration scenarios of `pipeline`, the schedules run (CPU backend), one per ctest test.

Each runs bench/pipeline under mpirun and reads its HDF5 file with h5py. Every case's own check
compares the loss, the input gradients and every weight gradient with one rank running all the
layers on the same micro-batches (fp64, 1e-10); here its verdict is read back for every schedule
at 2 and 4 stages and m < p, m = p, m > p, the loss is recomputed by numpy from the model's
definition (outside the suite's code), the timeline is held to the schedule's op counts, hops
and bytes (c b_mb h e counted by hand), a micro-batch's gradient left out must fail the check,
and bad input is refused with one message. With 2 replicas (--dp-shard) each mode's bytes per
collective are held to a hand count and its summed gradients and updated parameters to the
case's check. With --stage block (mesh's composed block in each
stage, TP and CP inside it) the same check is read back for every schedule, and the loss is held
equal across T, C, p and schedules and to one rank's run; with 2 replicas of the block each
mode's bytes are held to a hand count of the TP slices and its sums to the check.
"""
from __future__ import annotations

import json
import subprocess

import h5py
import numpy as np

from run_scenario import Env, expect, expect_refused, run_cli  # noqa: E402
from scripts.cli import command_line  # noqa: E402

SEQ, BATCH, HIDDEN, FFN = 8, 2, 16, 32
SHAPE = ["--seq", str(SEQ), "--batch", str(BATCH), "--hidden", str(HIDDEN), "--ffn-hidden", str(FFN)]
SCHEDULES = "gpipe,1f1b,interleaved,zb-h1,zb-v"
# Simulated: a GEMM of 34 MFLOP at 1 GFLOP/s beside a hop of 256 KB at 1 GB/s, as a real stage's
# compute dwarfs its hop (modeled compute costs nothing to run).
SIM_SHAPE = ["--seq", "256", "--batch", "1", "--hidden", "128", "--ffn-hidden", "512"]


def run_pipeline(env: Env, ranks: int, name: str, *args: str, extra_env: dict | None = None,
                 ok: bool = True):
    out = env.workdir / f"{name}.h5"
    proc = env.mpirun(ranks, "pipeline", "--backend", "cpu", "--dtype", "fp64", "--iters", "1",
                      "--warmup", "0", *SHAPE, *args, "--out", str(out), extra_env=extra_env)
    if ok:
        expect(proc.returncode == 0, f"pipeline {name} failed", proc)
    return out, proc


def smooth(seed: int, n: int) -> np.ndarray:
    """The model's values: sin(0.7 seed + 0.37 i + 0.1) (stage_layers.cpp's definition)."""
    return np.sin(0.7 * seed + 0.37 * np.arange(n) + 0.1)


def numpy_loss(layers: int, microbatches: int) -> float:
    """Sum over micro-batches of 0.5 |y|^2, y after `layers` blocks x + tanh(x W1) W2."""
    rows = SEQ * BATCH
    w1 = [smooth(2 * l, HIDDEN * FFN).reshape(HIDDEN, FFN) / np.sqrt(HIDDEN) for l in range(layers)]
    w2 = [0.5 * smooth(2 * l + 1, FFN * HIDDEN).reshape(FFN, HIDDEN) / np.sqrt(FFN) for l in range(layers)]
    loss = 0.0
    for mb in range(microbatches):
        x = smooth(1000 + mb, rows * HIDDEN).reshape(rows, HIDDEN)
        for l in range(layers):
            x = x + np.tanh(x @ w1[l]) @ w2[l]
        loss += 0.5 * float(np.sum(x * x))
    return loss


def check_cases(out, what: str) -> int:
    with h5py.File(out) as f:
        groups = list(f["pipeline"].values())
        for g in groups:
            a = g.attrs
            expect(a["check_passed"] == 1, f"{what} {g.name}: check {a['check_max_abs_err']}")
            expect(a["check_max_abs_err"] <= 1e-10, f"{what} {g.name}: error {a['check_max_abs_err']}")
            want = numpy_loss(int(a["layers"]), int(a["microbatches"]))
            expect(abs(a["loss"] - want) <= 1e-10 * want, f"{g.name}: loss {a['loss']} against numpy's {want}")
        return len(groups)


def scenario_correct(env: Env) -> None:
    """Every schedule at 2 and 4 stages, m < p (where the schedule runs it), m = p, m > p, v = 2
    (interleaved, zb-v) and an uneven layer split, against one rank running all layers."""
    runs = 0
    for p in (2, 4):
        for m in (p, 2 * p):
            runs += check_cases(run_pipeline(env, p, f"p{p}_m{m}", "--schedule", SCHEDULES,
                                             "--microbatches", str(m))[0], f"p={p} m={m}")
        # m < p and m not a multiple of p: the schedules without interleaving run them
        # (interleaved refuses: scenario_bad_input).
        for m in (1, 3 * p // 2 + 1):
            runs += check_cases(run_pipeline(env, p, f"p{p}_m{m}", "--schedule", "gpipe,1f1b,zb-h1,zb-v",
                                             "--microbatches", str(m))[0], f"p={p} m={m}")
    runs += check_cases(run_pipeline(env, 4, "uneven", "--schedule", "1f1b,interleaved", "--layers", "11",
                                     "--microbatches", "4")[0], "uneven layers")
    # Two PP groups of the mesh: pp outermost (an order without pp, as Megatron's tp,cp,ep,dp,pp)
    # and the seed's tp,cp,pp,dp (a group on consecutive ranks).
    for order, name in (("tp,cp,ep,dp", "tp,cp,ep,dp,pp"), ("tp,cp,pp,dp", "tp,cp,pp,ep,dp")):
        out = run_pipeline(env, 4, f"replicas_{order}", "--pp", "2", "--schedule", "1f1b", "--order", order)[0]
        runs += check_cases(out, f"two PP groups, --order {order}")
        with h5py.File(out) as f:
            seen = {g.attrs["order"] for g in f["pipeline"].values()}
        expect(seen == {name}, f"--order {order}: recorded {seen}, want {name}")
    print(f"{runs} cases equal one rank running every layer")


def dp_modes_bytes(half: int, m: int) -> dict[str, tuple[int, int, int]]:
    """Each mode's (all-reduce, reduce-scatter, all-gather) bytes per rank per step, `half` being
    (n-1)/n of a stage's gradients for a ring over n = 2 replicas."""
    return {
        "none": (2 * half, 0, 0),
        "optimizer": (0, half, half),  # the parameters gathered once after the step
        "grads": (0, half, half),      # once before the first forward
        "full": (0, half, 2 * m * half),  # before each micro-batch's forward and backward
    }


def expect_dp_bytes(out, want) -> int:
    """Every case's DP bytes (sent and predicted) equal want(mode, attrs); its count of cases."""
    with h5py.File(out) as f:
        for name, g in f["pipeline"].items():
            a = g.attrs
            mode = a["dp_shard"].decode() if isinstance(a["dp_shard"], bytes) else str(a["dp_shard"])
            expect(name.endswith(f"_ds{mode}") == (mode != "none"), f"{name}: case name for {mode}")
            expect(a["replicas"] == 2, f"{name}: {a['replicas']} replicas, want 2")
            for kind, count in zip(("all_reduce", "reduce_scatter", "all_gather"), want(mode, a)):
                for key in (f"dp_{kind}_bytes", f"pred_dp_{kind}_bytes"):
                    expect(a[key] == count, f"{name}: {key} {a[key]}, hand count {count}")
            expect(a["dp_sum_s"] > 0, f"{name}: no time in the sums")
        return len(f["pipeline"])


def expect_dropped_fails(env: Env, ranks: int, name: str, *args: str) -> None:
    """A micro-batch's weight gradients left out of the first stage's sums fail every case."""
    out, proc = run_pipeline(env, ranks, name, *args, extra_env={"SUITE_TEST_DROP_MICROBATCH": "1"}, ok=False)
    expect(proc.returncode == 1, f"dropped micro-batch under DP: exit {proc.returncode}, expected 1", proc)
    with h5py.File(out) as f:
        for g in f["pipeline"].values():
            expect(g.attrs["check_passed"] == 0, f"{g.name}: the dropped gradient passed")


def scenario_dp_shard(env: Env) -> None:
    """Two stages x 2 replicas (4 ranks) under every --dp-shard mode, 1f1b and zb-h1 (W apart):
    each replica runs its own micro-batches, the case's check holds the summed gradients and the
    updated parameters to one rank running every replica's micro-batches, and the bytes each
    rank sent per collective to a hand count; a dropped micro-batch gradient fails it."""
    m, layers = 4, 4
    # A rank's stage: L/p = 2 layers of W1 [h, f] and W2 [f, h], fp64: its gradients' bytes.
    stage_bytes = (layers // 2) * 2 * HIDDEN * FFN * 8
    want = dp_modes_bytes(stage_bytes // 2, m)
    args = ["--pp", "2", "--schedule", "1f1b,zb-h1", "--microbatches", str(m), "--layers", str(layers),
            "--dp-shard", ",".join(want)]
    out = run_pipeline(env, 4, "dp_shard", *args)[0]
    runs = check_cases(out, "dp shard")
    expect(expect_dp_bytes(out, lambda mode, a: want[mode]) == runs == 8, f"{runs} cases, want 8")
    expect_dropped_fails(env, 4, "dp_shard_dropped", *args)
    print(f"{runs} DP cases: bytes equal the hand count, sums equal one rank's")


# mesh's block as the stages: head dimension 64 (the attention kernels'), s a multiple of 2 C T.
BLOCK = ["--stage", "block", "--seq", "8", "--batch", "2", "--hidden", "128", "--heads", "2", "--ffn-hidden", "64"]


def block_cases(out, what: str) -> dict[str, float]:
    """Every case's check passed (1e-10 against one rank running all L layers); its loss by name."""
    with h5py.File(out) as f:
        for g in f["pipeline"].values():
            a = g.attrs
            expect(a["check_passed"] == 1 and a["check_max_abs_err"] <= 1e-10,
                   f"{what} {g.name}: check {a['check_max_abs_err']}")
            # A hop carries this rank's s b / (T C) rows of h doubles (one stage: no hops).
            want = 8 * 2 * 128 * 8 // (a["tp"] * a["cp"]) if a["pp"] > 1 else 0
            expect(a["bytes_per_hop"] == want, f"{what} {g.name}: bytes per hop {a['bytes_per_hop']}, want {want}")
        return {g.name: float(g.attrs["loss"]) for g in f["pipeline"].values()}


def scenario_block(env: Env) -> None:
    """--stage block: mesh's composed block in each stage with TP (2 stages x TP 2), CP (2 stages
    x CP 2) and both (8 ranks), every schedule (zero-bubble ones with B and W fused), m < p,
    m = p, m > p and v = 2, each against one rank running all L layers; the loss of one
    (schedule, m, L) is the same whatever T, C, p and schedule, and equals a single rank's run."""
    losses: dict[tuple[int, int], list[float]] = {}

    def record(out, what: str) -> None:
        with h5py.File(out) as f:
            for name, loss in block_cases(out, what).items():
                a = f[name].attrs
                losses.setdefault((int(a["microbatches"]), int(a["layers"])), []).append(loss)

    for degrees in (["--tp", "2"], ["--cp", "2"]):
        tag = "_".join(degrees).replace("-", "")
        for m in (1, 2, 3):
            record(run_pipeline(env, 4, f"block_{tag}_m{m}", *BLOCK, *degrees, "--pp", "2", "--layers", "4",
                                "--schedule", "gpipe,1f1b,zb-h1", "--microbatches", str(m))[0], f"{degrees} m={m}")
        record(run_pipeline(env, 4, f"block_{tag}_v2", *BLOCK, *degrees, "--pp", "2", "--layers", "4",
                            "--schedule", "interleaved,zb-v", "--chunks", "2", "--microbatches", "4")[0],
               f"{degrees} v=2")
    record(run_pipeline(env, 8, "block_tp2_cp2", *BLOCK, "--tp", "2", "--cp", "2", "--pp", "2", "--layers", "4",
                        "--schedule", "1f1b,zb-v", "--microbatches", "3")[0], "T=2 C=2")
    for m in (1, 3, 4):
        record(run_pipeline(env, 1, f"block_one_m{m}", *BLOCK, "--pp", "1", "--layers", "4", "--schedule", "1f1b",
                            "--microbatches", str(m))[0], f"one rank m={m}")
    for key, seen in losses.items():
        expect(max(seen) - min(seen) <= 1e-10 * max(seen),
               f"(m, L) = {key}: losses {seen} differ across T, C, p and schedules")
    print(f"{sum(len(s) for s in losses.values())} block losses, each (m, L) one value; every check passed")


def block_params(t: int, layers: int) -> int:
    """A TP rank's parameters of `layers` block layers: the four LayerNorm vectors whole, QKV
    [h, 3h/T], the output projection [h/T, h], fc1 [h, f/T] and fc2 [f/T, h] (BLOCK's sizes)."""
    h, f = 128, 64
    return layers * (4 * h + h * 3 * h // t + h // t * h + h * f // t + f // t * h)


def scenario_block_dp_shard(env: Env) -> None:
    """--stage block with 2 replicas: 2 stages x TP 2 (8 ranks) under every --dp-shard mode and
    2 stages x CP 2 (the CP sum before the DP one) under grads; each replica runs its own
    micro-batches, the case's check holds the summed gradients and the updated parameters to one
    rank running every replica's, the bytes per collective to a hand count of the TP slices (a
    ring over the 2 replicas, fp64); a dropped micro-batch gradient fails the check."""
    m, layers = 3, 4

    def want(mode: str, a) -> tuple[int, int, int]:
        return dp_modes_bytes(block_params(int(a["tp"]), layers // 2) * 8 // 2, m)[mode]

    common = [*BLOCK, "--pp", "2", "--layers", str(layers), "--microbatches", str(m)]
    runs = 0
    for degrees, schedules, modes in ((["--tp", "2"], "1f1b", "none,optimizer,grads,full"),
                                      (["--cp", "2"], "zb-h1", "grads")):
        out = run_pipeline(env, 8, f"block_dp_{degrees[0][2:]}", *common, *degrees, "--schedule", schedules,
                           "--dp-shard", modes)[0]
        block_cases(out, f"block DP {degrees}")
        runs += expect_dp_bytes(out, want)
    expect(runs == 5, f"{runs} cases, want 5")
    expect_dropped_fails(env, 8, "block_dp_dropped", *common, "--tp", "2", "--schedule", "1f1b",
                         "--dp-shard", "none,full")
    print(f"{runs} block DP cases: bytes equal the hand count, sums equal one rank's")


def scenario_timeline(env: Env) -> None:
    """The timeline holds each op of the schedule once, ops of a rank never overlap, the hops
    and bytes per hop are those of the schedule (counted by hand), peak activations match the
    schedule's in-flight count, and the predictions sit beside the measurements."""
    p, m = 4, 8
    out, _ = run_pipeline(env, p, "timeline", "--schedule", SCHEDULES, "--microbatches", str(m))
    with h5py.File(out) as f:
        for g in f["pipeline"].values():
            a, t = g.attrs, g["timeline"][()]
            v, split = int(a["chunks"]), a["schedule"] in ("zb-h1", "zb-v")
            expect(t.shape == ((3 if split else 2) * m * p * v, 7), f"{g.name}: {t.shape} ops")
            for r in range(p):
                mine = t[t[:, 0] == r]
                expect(np.all(mine[1:, 5] >= mine[:-1, 6] - 1e-12), f"{g.name}: rank {r} overlaps")
            boundaries = p * v - 1 - (1 if a["schedule"] == "zb-v" else 0)  # the V's turn stays on a rank
            expect(int(a["hops_per_step"]) == 2 * m * boundaries, f"{g.name}: {a['hops_per_step']} hops")
            expect(a["bytes_per_hop"] == SEQ * BATCH * HIDDEN * 8, f"{g.name}: bytes per hop {a['bytes_per_hop']}")
            expect(a["pred_bytes_per_hop"] == a["bytes_per_hop"], f"{g.name}: pred bytes")
            peaks = g["peak_in_flight"][()]
            expect(np.array_equal(peaks[0], peaks[1]), f"{g.name}: peak in flight {peaks[:2]}")
            for key in ("bubble_s", "pred_bubble_s", "pred_closed_bubble_s", "pred_step_s"):
                expect(np.isfinite(a[key]) and a[key] >= 0, f"{g.name}: {key} {a[key]}")
            expect(0 <= a["bubble_fraction"] < 1, f"{g.name}: bubble fraction {a['bubble_fraction']}")
    print("timelines hold every op once, the hops and bytes of the schedule")


def scenario_scripts(env: Env) -> None:
    """`suite plot` draws a Gantt chart per case; `suite trace` writes one complete event per op
    of the timeline, one thread per rank, which Perfetto reads as JSON."""
    out, _ = run_pipeline(env, 4, "scripts", "--schedule", "1f1b,zb-v", "--microbatches", "4")
    plots = env.workdir / "plots"
    proc = subprocess.run([*command_line("plot"), str(out), "--out", str(plots)], capture_output=True,
                          text=True, timeout=180)
    expect(proc.returncode == 0, "suite plot failed", proc)
    gantts = sorted(p.name for p in plots.glob("pipeline_gantt_*.png"))
    expect(len(gantts) == 2, f"Gantt charts: {gantts}", proc)
    trace = env.workdir / "trace.json"
    proc = subprocess.run([*command_line("trace"), str(out), "-o", str(trace)], capture_output=True,
                          text=True, timeout=180)
    expect(proc.returncode == 0, "suite trace failed", proc)
    events = json.loads(trace.read_text())["traceEvents"]
    ops = [e for e in events if e["ph"] == "X"]
    expect(len(ops) == 4 * 4 * 2 + 4 * 4 * 2 * 3, f"{len(ops)} op events")  # 1f1b: F, BW; zb-v: F, B, W x 2 chunks
    expect({e["tid"] for e in ops} == {0, 1, 2, 3}, "one thread per rank")
    expect(all(e["dur"] >= 0 and e["ts"] >= 0 for e in ops), "negative times")
    print(f"{len(gantts)} Gantt charts, {len(ops)} trace events")


def scenario_dropped(env: Env) -> None:
    """One micro-batch's weight gradients left out of the first stage's sums (a test hook): the
    check must fail (exit 1) for every schedule, with the MLP stages and with the block's (TP 2
    inside each of 2 stages)."""
    for name, ranks, args in (("dropped", 2, []), ("dropped_block", 4, [*BLOCK, "--tp", "2", "--pp", "2"])):
        out, proc = run_pipeline(env, ranks, name, *args, "--schedule", SCHEDULES, "--microbatches", "4",
                                 extra_env={"SUITE_TEST_DROP_MICROBATCH": "1"}, ok=False)
        expect(proc.returncode == 1, f"{name} micro-batch: exit {proc.returncode}, expected 1", proc)
        expect("differs from one rank running all" in proc.stdout + proc.stderr, f"{name}: message", proc)
        with h5py.File(out) as f:
            for g in f["pipeline"].values():
                expect(g.attrs["check_passed"] == 0, f"{g.name}: the dropped gradient passed")
    print("a dropped micro-batch gradient fails the check")


def scenario_sim_modeled(env: Env) -> None:
    """SMPI with modeled compute (each GEMM's FLOPs at F, so F = B = W per layer and the times
    are the platform's alone): the measured bubble equals the critical path of the schedule's
    graph with the F, B, W and hop times of the same step within 5%, and METHODS.md 7's closed
    form (which leaves out the hops) within 5% too, for every schedule, m = p and m = 2 p."""
    from scenarios_sim import run_ok  # the SMPI build's runner (skips without build-sim)

    for m in (4, 8):
        out = env.workdir / f"sim_m{m}.h5"
        with run_ok(env, "pipeline", out, "--platform", "flat", "--ranks", "4", "--bw", "1e9", "--lat", "1e-6",
                    "--sim-flops", "1e9", flags=["--schedule", SCHEDULES, "--microbatches", str(m), *SIM_SHAPE,
                                                 "--iters", "1", "--warmup", "0"]) as f:
            expect(f.attrs["sim_compute_mode"] == "modeled", "not modeled compute")
            for g in f["pipeline"].values():
                a = g.attrs
                split = a["schedule"] in ("zb-h1", "zb-v")
                expect(abs(a["forward_s"] / a["input_grad_s"] - (1 if split else 0.5)) < 1e-9,
                       f"{g.name}: F {a['forward_s']} B {a['input_grad_s']}: modeled GEMMs")
                expect(abs(a["bubble_s"] / a["pred_bubble_s"] - 1) < 0.05,
                       f"{g.name}: bubble {a['bubble_s']} against the critical path's {a['pred_bubble_s']}")
                expect(abs(a["bubble_s"] / a["pred_closed_bubble_s"] - 1) < 0.05,
                       f"{g.name}: bubble {a['bubble_s']} against the closed form's {a['pred_closed_bubble_s']}")
                print(f"{g.name}: bubble {a['bubble_s']:.6f} s, critical path {a['pred_bubble_s']:.6f} s, "
                      f"closed form {a['pred_closed_bubble_s']:.6f} s")


def scenario_model(env: Env) -> None:
    """`model --section pipeline` prints each schedule's step and bubble from the generator's
    graph; at F = B = W = 1 per rank's layers (1/v per chunk) they are METHODS.md 7's, worked out
    here: 3 (m + p - 1), interleaved 3 m + 3 (p - 1)/v, zb-h1 3 m + p - 1, zb-v 3 m + (p - 1)/2."""
    p, m = 4, 8
    proc = subprocess.run([str(env.bin_dir / "model"), "--section", "pipeline", "--pp", str(p),
                           "--microbatches", str(m), "--schedule", SCHEDULES], capture_output=True,
                          text=True, timeout=60)
    expect(proc.returncode == 0, "model --section pipeline failed", proc)
    want = {"gpipe": 3 * (m + p - 1), "1f1b": 3 * (m + p - 1), "interleaved": 3 * m + 3 * (p - 1) / 2,
            "zb-h1": 3 * m + p - 1, "zb-v": 3 * m + (p - 1) / 2}
    rows = {line.split()[0]: line.split() for line in proc.stdout.splitlines() if line.split()[:1] in
            [[k] for k in want]}
    expect(sorted(rows) == sorted(want), f"rows {sorted(rows)}", proc)
    for name, step in want.items():
        expect(abs(float(rows[name][3]) - step) < 1e-9, f"{name}: step {rows[name][3]}, want {step}", proc)
        expect(abs(float(rows[name][4]) - (step - 3 * m)) < 1e-9, f"{name}: bubble {rows[name][4]}", proc)
    proc = subprocess.run([str(env.bin_dir / "model"), "--section", "pipeline", "--pp", "4", "--microbatches",
                           "6", "--schedule", "interleaved"], capture_output=True, text=True, timeout=60)
    expect(proc.returncode == 2 and proc.stderr.count("error:") == 1 and "--microbatches 6" in proc.stderr,
           "model: interleaved with m = 6 not refused", proc)
    print("model's pipeline section holds the closed forms")


def scenario_bad_input(env: Env) -> None:
    expect_refused(env, "pipeline", {
        "pp not dividing": (["--pp", "3"], "--pp 3 must divide the job's 4 ranks"),
        "pp list": (["--pp", "1,2"], "--pp 1,2: one whole number here"),
        "layers below stages": (["--layers", "3"], "--layers 3 is fewer than the 4 stages"),
        "interleaved m": (["--schedule", "interleaved", "--microbatches", "6"],
                          "--microbatches 6: interleaved needs a multiple of --pp 4"),
        "chunks without chunks": (["--schedule", "1f1b", "--chunks", "2"], "--chunks 2: 1f1b has no chunks"),
        "zb-v chunks": (["--schedule", "zb-v", "--chunks", "3"], "--chunks 3: zb-v runs exactly 2"),
        "unknown schedule": (["--schedule", "1f1b,dualpipe"], "--schedule: unknown schedule 'dualpipe'"),
        "unknown stage": (["--stage", "moe"], "--stage moe: mlp or block"),
        # Refused as the flags are read, so a host without a GPU shows it too (the last --backend
        # given wins over the runner's --backend cpu).
        "mlp on cuda": (["--backend", "cuda"],
                        "--stage mlp runs its layers on the host in fp64: --backend cuda takes --stage block"),
        "tp with mlp": (["--tp", "2"], "--tp 2, --cp 1: --stage mlp has no TP or CP"),
        "cp with mlp": (["--cp", "2"], "--tp 1, --cp 2: --stage mlp has no TP or CP"),
        "T C not dividing": ([*BLOCK, "--tp", "3"], "--tp 3 x --cp 1 must divide the job's 4 ranks"),
        "pp beside T C": ([*BLOCK, "--tp", "2", "--pp", "4"],
                          "--pp 4 must divide the job's 4 ranks / (--tp x --cp = 2)"),
        "heads not multiple of T": ([*BLOCK, "--hidden", "192", "--heads", "3", "--tp", "2"],
                                    "--heads 3 is not divisible by --tp 2"),
        "seq not multiple of 2 C": ([*BLOCK, "--seq", "6", "--cp", "2"], "--seq 6 is not divisible by 2 x --cp = 4"),
        "head dimension": ([*BLOCK, "--hidden", "64"], "head dimension h/heads = 32"),
        "unknown dp shard": (["--pp", "2", "--dp-shard", "none,zero3"], "--dp-shard: unknown mode 'zero3'"),
        "dp shard without replicas": (["--dp-shard", "grads"],
                                      "--dp-shard grads: the job's 4 ranks hold one PP group"),
        "dp shard with block, one PP group": ([*BLOCK, "--tp", "2", "--pp", "2", "--dp-shard", "optimizer"],
                                              "--dp-shard optimizer: the job's 4 ranks hold one PP group"),
    }, ranks=4)
    print("bad input refused")


SCENARIOS = {
    "pipeline_correct": scenario_correct,
    "pipeline_block": scenario_block,
    "pipeline_dp_shard": scenario_dp_shard,
    "pipeline_block_dp_shard": scenario_block_dp_shard,
    "pipeline_timeline": scenario_timeline,
    "pipeline_dropped": scenario_dropped,
    "pipeline_scripts": scenario_scripts,
    "pipeline_bad_input": scenario_bad_input,
    "pipeline_sim_modeled": scenario_sim_modeled,
    "pipeline_model": scenario_model,
}

if __name__ == "__main__":
    run_cli(SCENARIOS, __doc__)
