#!/usr/bin/env python3
"""Integration scenarios on simulated clusters: the SMPI build (`make sim`, build-sim/bin) run by
scripts/envs/simulate.py under SimGrid's smpirun, one scenario per ctest test.

--bin-dir is the SMPI build's bin folder; a missing SMPI build skips (exit 77) with a message.
"""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np

from scripts import module_command
from run_scenario import Env, expect, run_cli

REPO = Path(__file__).resolve().parents[2]
from scripts.studies.ring_crossing import crossing, sweeps
from scripts.results.suite_results import read_results

SKIP = 77


def simulate(env: Env, bench: str, *args: str, flags: list[str] = (), timeout: float = 240
             ) -> subprocess.CompletedProcess:
    if not (env.bin_dir / bench).exists():
        print(f"SKIP: {env.bin_dir / bench} is not built (make sim builds the SMPI variant)")
        raise SystemExit(SKIP)
    cmd = [*module_command("envs.simulate"), bench, *args,
           "--build", str(env.bin_dir.parent), "--no-plot", "--", *flags]
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=env.workdir)
    print(f"$ {' '.join(cmd)}\n-> exit {proc.returncode} in {time.monotonic() - start:.1f} s")
    return proc


def run_ok(env: Env, bench: str, out: Path, *args: str, flags: list[str] = ()) -> h5py.File:
    proc = simulate(env, bench, *args, "--out", str(out), flags=flags)
    expect(proc.returncode == 0, f"{bench}: simulation failed (exit {proc.returncode})", proc)
    for suffix in (".platform.xml", ".hosts", ".sim.json"):
        expect(out.with_suffix(suffix).exists(), f"{bench}: no {suffix} beside the results", proc)
    return h5py.File(out)


def sampled_memory(out: Path) -> dict:
    """simulate.py's <stem>.sim.json, once its memory sampler is known to have run: at least
    two samples and none failed (a failed one used to end the sampling and leave the peak at
    whatever came before, 0 when it was the first)."""
    summary = json.loads(out.with_suffix(".sim.json").read_text())
    expect(summary["memory_samples"] >= 2 and summary["memory_sample_errors"] == 0,
           f"memory sampler: {summary['memory_samples']} samples, {summary['memory_sample_errors']} "
           f"failed ({summary['memory_last_error']})")
    return summary


def check_sim_attrs(f: h5py.File, platform: str, mode: str, ranks: int) -> None:
    a = f.attrs
    expect(a["complete"] == 1 and a["simulated"] == 1, "not a complete simulated run")
    expect(a["sim_platform"] == platform and a["sim_compute_mode"] == mode,
           f"platform/mode {a['sim_platform']}/{a['sim_compute_mode']}")
    expect(str(a["smpi_version"]).startswith("SimGrid 3."), f"smpi_version {a['smpi_version']}")
    expect(a["watchdog"].startswith("off"), "the watchdog is not recorded as off")
    expect(a["world_size"] == ranks, "world size")
    hosts = [h.decode() if isinstance(h, bytes) else h for h in f["ranks/hostname"][()]]
    expect(len(set(hosts)) == ranks and all(h.startswith(("host", "node")) for h in hosts),
           f"hostnames are not the simulated hosts: {hosts[:4]}")


def scenario_bad_input(env: Env) -> None:
    """GPU-only flags, unknown presets, bad rates: exit 2, one message,
    no results file and no platform file."""
    cases = {
        "backend cuda": (["--platform", "flat", "--ranks", "4"], ["--backend", "cuda"], "--backend cuda"),
        "transport nccl": (["--platform", "flat", "--ranks", "4"], ["--transport", "nccl"], "--transport nccl"),
        "dtype bf16": (["--platform", "flat", "--ranks", "4"], ["--dtype", "bf16"], "--dtype bf16"),
        "unknown preset": (["--platform", "dragonfly", "--ranks", "4"], [], "unknown platform"),
        "too many ranks": (["--platform", "node8", "--ranks", "9"], [], "9 ranks"),
        "bad sim-flops": (["--platform", "flat", "--ranks", "4", "--sim-flops", "-5"], [], "--sim-flops"),
    }
    for what, (args, flags, needle) in cases.items():
        out = env.workdir / "bad" / "r.h5"
        proc = simulate(env, "sp_tp", *args, "--out", str(out), flags=flags, timeout=60)
        expect(proc.returncode == 2, f"{what}: exit {proc.returncode}, expected 2", proc)
        expect(proc.stderr.count("error:") == 1, f"{what}: expected one error line", proc)
        expect(needle in proc.stderr, f"{what}: message lacks {needle!r}", proc)
        expect(not out.parent.exists() or not list(out.parent.iterdir()), f"{what}: files left", proc)
        print(f"  ok: {what}")
    # Modeled compute holds no tensors, but each rank's own positions are real (its masks read
    # them): 16G positions per rank (128 GiB) cannot fit, and say so.
    out = env.workdir / "bad" / "r.h5"
    proc = simulate(env, "ring_attention", "--platform", "flat", "--ranks", "4", "--sim-flops",
                    "1e12", "--out", str(out), timeout=120,
                    flags=["--block", "16G", "--layout", "striped", "--causal", "1"])
    expect(proc.returncode == 2 and proc.stderr.count("error:") == 1, "modeled striped 16G", proc)
    expect("needs about" in proc.stderr, "the message does not say what it needs", proc)
    expect(not out.parent.exists() or not list(out.parent.iterdir()), "files left", proc)
    print("  ok: a modeled size that does not fit")
    # --help is SimGrid's own under smpirun; simulate.py asks the benchmark with -h
    out = env.workdir / "help" / "r.h5"
    proc = simulate(env, "ring_attention", "--platform", "flat", "--ranks", "2", "--out", str(out),
                    flags=["--help"], timeout=60)
    expect(proc.returncode == 0 and "--sim-flops" in proc.stdout and "SMPI build" in proc.stdout,
           "the benchmark's help does not describe the SMPI build", proc)
    expect(not out.exists(), "help left a results file", proc)


# The flat platform of these tests: links of BW bytes/s and LAT s each (a route crosses two),
# modeled compute at F FLOP/s. Simulated time is then a function of these numbers alone: the
# same on any host, however fast or busy (executed compute would inject the host's CPU time).
BW, LAT, F = 1e9, 5e-6, 5e10


def zigzag_positions(rank: int, n: int, c: int) -> np.ndarray:
    """Rank r of n holds zig-zag chunks r and 2n-1-r of c/2 tokens (METHODS.md section 2)."""
    h = c // 2
    return np.concatenate([np.arange(rank * h, (rank + 1) * h),
                           np.arange((2 * n - 1 - rank) * h, (2 * n - rank) * h)])


def contiguous_positions(rank: int, n: int, c: int) -> np.ndarray:
    return np.arange(rank * c, (rank + 1) * c)


def round_pairs(positions, n: int, c: int, causal: bool) -> np.ndarray:
    """Visible (query, key) pairs [round, rank], counted by brute force over the positions:
    in round k rank r holds the block of rank (r - k) mod n."""
    out = np.zeros((n, n), dtype=np.int64)
    for k in range(n):
        for r in range(n):
            q, kk = positions(r, n, c), positions((r - k) % n, n, c)
            out[k, r] = (kk[None, :] <= q[:, None]).sum() if causal else c * c
    return out


def ring_model(a, positions, causal: bool, bw: float = BW) -> dict[str, float]:
    """The ring step by the alpha-beta model, from the case's sizes alone: each round lasts the
    longer of its busiest rank's attention (4 d a b FLOPs per visible pair at F) and the block's
    transfer (2 c kv d e b bytes at bw plus the route's two latencies); the last round sends
    nothing."""
    n, c, b = int(a["n_c"]), int(a["c"]), int(a["batch"])
    d, heads, kv = int(a["head_dim"]), int(a["heads"]), int(a["kv_heads"])
    e = {"fp32": 4, "fp64": 8, "bf16": 2}[a["dtype"]]
    compute = round_pairs(positions, n, c, causal).max(axis=1) * 4.0 * d * heads * b / F
    transfer = 2.0 * c * kv * d * e * b / bw + 2 * LAT
    over = float(np.maximum(compute[:-1], transfer).sum() + compute[-1])
    return {"overlapped": over, "compute": float(compute.sum()), "transfer": (n - 1) * transfer}


def modeled_flat(ranks: int, bw: float = BW) -> list[str]:
    return ["--platform", "flat", "--ranks", str(ranks), "--bw", f"{bw:g}", "--lat", f"{LAT:g}",
            "--sim-flops", f"{F:g}"]


def near_model(got: float, want: float) -> bool:
    """Within 2% of the model, plus one route latency: the ranks leave the barrier that starts
    each timed step up to that far apart."""
    return want <= got * 1.02 and got <= want * 1.02 + 2 * LAT


def scenario_ring_crossing(env: Env) -> None:
    """The ring's whole block-size sweep on 4 flat hosts (1 GB/s, modeled compute at 5e10
    FLOP/s, zig-zag causal) against the alpha-beta model computed here from the sizes: every
    point's overlapped, compute-only and transfer-only step within 2%, the sweep going from
    exposed (transfer-bound) to hidden, and its crossing where the model's is."""
    out = env.workdir / "ring.h5"
    with run_ok(env, "ring_attention", out, *modeled_flat(4),
                flags=["--block", "32:320:+32", "--layout", "zigzag", "--causal", "1",
                       "--iters", "2", "--warmup", "1"]) as f:
        check_sim_attrs(f, "flat", "modeled", 4)
        model_ratio = {}
        for name, g in f["ring_attention"].items():
            a = g.attrs
            expect(a["bytes_sent_per_rank_per_layer"] == a["pred_bytes_sent_per_rank_per_layer"],
                   f"{name}: bytes {a['bytes_sent_per_rank_per_layer']} != predicted")
            m = ring_model(a, zigzag_positions, causal=True)
            got = {"overlapped": a["time_overlapped_median_s"],
                   "compute": a["time_compute_only_median_s"],
                   "transfer": a["time_transfer_only_median_s"]}
            for what, want in m.items():
                expect(near_model(got[what], want),
                       f"{name}: {what} {got[what]:.6g} s, the model says {want:.6g} s")
            model_ratio[int(a["c"])] = m["overlapped"] / m["compute"]
    sweep = sweeps(read_results(out).cases_of("ring_attention"))[0]
    model = [model_ratio[int(c)] for c in sweep.c]
    print(f"  overlapped/compute: {[round(float(r), 3) for r in sweep.ratio]}\n"
          f"  the model:          {[round(r, 3) for r in model]}\n"
          f"  crossing {sweep.cross}, c* there {sweep.c_star_at_cross}")
    expect(sweep.ratio[0] > 2 and abs(sweep.ratio[-1] - 1) < 0.01,
           f"no exposed-to-hidden sweep: {sweep.ratio}")
    model_cross = crossing(sweep.c, model, np.ones(len(model)))
    expect(sweep.cross is not None and model_cross is not None, "no crossing")
    expect(abs(sweep.cross / model_cross - 1) <= 0.05,
           f"crossing {sweep.cross:.0f}, the model's {model_cross:.0f}")
    # c* is the overlap bound F/W in tokens: the crossing sits at it, up to the latency and the
    # diagonal block the bound leaves out.
    expect(abs(sweep.cross / sweep.c_star_at_cross - 1) <= 0.15,
           f"crossing {sweep.cross:.0f} not within 15% of c* {sweep.c_star_at_cross:.0f}")
    plots = env.workdir / "plots"
    proc = subprocess.run([*module_command("plots.plot"), str(out), "--out", str(plots)],
                          capture_output=True, text=True, timeout=120)
    expect(proc.returncode == 0 and (plots / "ring_sweep_ring_zigzag_causal.png").exists(), "sweep plot", proc)


def scenario_overlap_by_time(env: Env) -> None:
    """Overlap shown in time, not by construction: on a link slow enough that a round's transfer
    takes about half as long as its attention (modeled compute, contiguous, no mask), the ring's
    overlapped step (forward and backward) lasts the sum over rounds of max(compute, transfer),
    well under compute + transfer, while the all-gather variant, which gathers and then
    computes, lasts their sum. Forward against the model computed here; the backward, whose
    rounds also carry the dK/dV partial sums, against its own rounds' compute-only and
    transfer-only times."""
    out = env.workdir / "overlap.h5"
    bw = 64e6  # a round's 192 KiB block in 3 ms, against 6 ms of attention
    with run_ok(env, "ring_attention", out, *modeled_flat(4, bw),
                flags=["--block", "384", "--layout", "contiguous", "--causal", "0", "--heads", "8",
                       "--kv-heads", "1", "--variant", "ring,allgather", "--pass", "fwd_bwd",
                       "--iters", "2", "--warmup", "1"]) as f:
        for name, g in f["ring_attention"].items():
            a = g.attrs
            for p in ("", "bwd_"):
                over = a[p + "time_overlapped_median_s"]
                comp, xfer = a[p + "time_compute_only_median_s"], a[p + "time_transfer_only_median_s"]
                print(f"  {name} {p or 'fwd_'}: overlapped {over:.4g} s, compute {comp:.4g}, transfer {xfer:.4g}")
                if a["variant"] == "ring":
                    expect(0.3 < xfer / comp < 3, f"{name} {p}: transfer {xfer}, compute {comp}: nothing to hide")
                    bound = a[p + "pred_time_overlapped_s"]
                    if not p:
                        model = ring_model(a, contiguous_positions, False, bw)["overlapped"]
                        expect(near_model(over, model), f"{name}: overlapped {over}, model {model}")
                    expect(abs(over / bound - 1) <= 0.02, f"{name} {p}: overlapped {over}, rounds' max {bound}")
                    expect(over <= 0.85 * (comp + xfer), f"{name} {p}: overlapped {over} near compute + transfer")
                else:
                    expect(over >= 0.98 * (comp + xfer), f"{name} {p}: the all-gather variant hid its gather")


def scenario_executed_checks(env: Env) -> None:
    """Executed compute: every benchmark's checks run and pass on a simulated flat cluster."""
    runs = {
        "ring_attention": ["--block", "32,64", "--layout", "zigzag", "--causal", "1", "--heads", "4",
                           "--kv-heads", "2", "--pass", "fwd,fwd_bwd", "--iters", "2", "--warmup", "1"],
        "ulysses": ["--seq", "256", "--heads", "4", "--kv-heads", "4", "--ulysses-degree", "all",
                    "--iters", "2", "--warmup", "1"],
        "moe": ["--tokens", "64", "--hidden", "64", "--ffn-hidden", "128", "--experts", "8",
                "--top-k", "2", "--skew", "none,zipf", "--capacity-factor", "0,1.25",
                "--pass", "fwd,fwd_bwd", "--iters", "2", "--warmup", "1"],
        "sp_tp": ["--mode", "all", "--sizes", "1K:64K:x8", "--seq", "64", "--batch", "1",
                  "--hidden", "256", "--heads", "4", "--iters", "2", "--warmup", "1"],
    }
    for bench, flags in runs.items():
        with run_ok(env, bench, env.workdir / f"{bench}.h5", "--platform", "flat", "--ranks", "4",
                    "--bw", "1G", flags=flags) as f:
            check_sim_attrs(f, "flat", "executed", 4)
            expect(np.isnan(f.attrs["sim_flops"]) and f.attrs["sim_compute_scale"] == 1.0, "compute scale")
            for name, g in f[bench].items():
                expect(g.attrs["check_passed"] == 1, f"{bench}/{name}: check {g.attrs['check_passed']} "
                       f"({g.attrs.get('check_note', '')})")
                expect(g.attrs["time_median_s"] > 0, f"{bench}/{name}: no simulated time")
                if bench == "ring_attention":  # SMPI moves the transfers; no poll cuts a burst
                    expect("no polling" in g.attrs["overlap_mechanism"],
                           f"{name}: {g.attrs['overlap_mechanism']}")
        print(f"  ok: {bench}")


def scenario_modeled(env: Env) -> None:
    """Modeled compute on a 2-node fat tree (16 ranks): FLOPs injected at exactly F, checks
    skipped and recorded, bytes per rank equal to the predictions."""
    F = 2e14
    common = ["--platform", "fattree", "--nodes", "2", "--ranks", "16", "--sim-flops", "2e14"]
    with run_ok(env, "ring_attention", env.workdir / "ring.h5", *common,
                flags=["--block", "256", "--layout", "zigzag", "--causal", "1", "--heads", "8",
                       "--kv-heads", "2", "--pass", "fwd,fwd_bwd", "--iters", "1", "--warmup", "0"]) as f:
        check_sim_attrs(f, "fattree", "modeled", 16)
        expect(f.attrs["sim_flops"] == F, "sim_flops")
        for name, g in f["ring_attention"].items():
            a = g.attrs
            expect(a["check_passed"] == -1 and "modeled" in a["check_note"], f"{name}: check not skipped")
            expect(abs(a["measured_F_flops"] / F - 1) < 1e-6, f"{name}: F {a['measured_F_flops']} != {F}")
            expect(a["attn_kernel"] == "modeled", f"{name}: kernel {a['attn_kernel']}")
            expect(a["bytes_sent_per_rank_per_layer"] == a["pred_bytes_sent_per_rank_per_layer"], f"{name}: bytes")
            if "bwd_bytes_sent_per_rank_per_layer" in a:
                expect(a["bwd_bytes_sent_per_rank_per_layer"] == a["pred_bwd_bytes_sent_per_rank_per_layer"],
                       f"{name}: backward bytes")
            expect(a["efficiency_vs_ideal_fwd"] > 0, f"{name}: no ideal")
            # Modeled time charges every visible pair the same, on the ring's blocks as in the
            # ideal's one call: the measured pair rate is the ideal's, and the three factors
            # multiply to the efficiency.
            for p in ("", "bwd_") if "bwd_eff_pair_rate" in a else ("",):
                expect(abs(a[p + "eff_pair_rate"] - 1) < 1e-3, f"{name}: {p}pair rate {a[p + 'eff_pair_rate']}")
                eff = a["efficiency_vs_ideal_" + (p[:-1] if p else "fwd")]
                product = a[p + "eff_balance"] * a[p + "eff_pair_rate"] * a[p + "eff_exchange"]
                expect(abs(product / eff - 1) < 1e-9, f"{name}: {p}factors {product} != {eff}")
    with run_ok(env, "ulysses", env.workdir / "uly.h5", *common,
                flags=["--seq", "4096", "--heads", "16", "--kv-heads", "16", "--ulysses-degree", "8,16",
                       "--iters", "1", "--warmup", "0"]) as f:
        for name, g in f["ulysses"].items():
            a = g.attrs
            for k in ("ulysses_bytes_sent_per_rank", "ring_bytes_sent_per_rank"):
                expect(a[k] == a["pred_" + k], f"ulysses/{name}: {k} {a[k]} != {a['pred_' + k]}")
    with run_ok(env, "moe", env.workdir / "moe.h5", *common,
                flags=["--tokens", "256", "--hidden", "64", "--ffn-hidden", "128", "--experts", "16",
                       "--top-k", "2", "--skew", "none,zipf", "--capacity-factor", "0,1.25",
                       "--iters", "1", "--warmup", "0"]) as f:
        for name, g in f["moe"].items():
            a = g.attrs
            # SimGrid ends a compute action within surf/precision (1e-9 s) of another event.
            expect(abs(a["phase_expert_median_s"] - a["expert_flops_per_rank_max"] / F) <= 2e-9,
                   f"moe/{name}: expert F {a['expert_flops_per_s']}")
            sent, implied = g["moe_bytes_sent"][()], g["moe_bytes_implied"][()]
            expect(sent.min() > 0 and np.array_equal(sent, implied),
                   f"moe/{name}: bytes sent {sent} != the routing's {implied}")
            expect(a["drop_rate"] >= 0 and a["expert_load_max_over_mean"] >= 1, f"moe/{name}: routing figures")
    with run_ok(env, "sp_tp", env.workdir / "sp.h5", *common,
                flags=["--sizes", "64K,4M", "--activation-case", "0", "--iters", "2", "--warmup", "1"]) as f:
        for name, g in f["sp_tp"].items():
            a = g.attrs
            expect(a["bytes_sent_per_rank"] == a["pred_bytes_sent_per_rank"], f"sp_tp/{name}: bytes")
    print("  ok: ring, ulysses, moe, sp_tp modeled")


def scenario_modeled_memory(env: Env) -> None:
    """Modeled compute holds no tensor values (placeholders, common/sim/sim.hpp): 16 ranks of a
    Llama-sized ring step, whose tensors the allocator counts at gigabytes, take a small
    fraction of that in memory (PSS sampled from /proc by simulate.py), while every byte is
    still sent and the allocator still counts every tensor."""
    out = env.workdir / "mem.h5"
    with run_ok(env, "ring_attention", out, "--platform", "fattree", "--nodes", "2", "--ranks",
                "16", "--sim-flops", "5e14",
                flags=["--block", "4K", "--layout", "zigzag", "--causal", "1", "--heads", "32",
                       "--kv-heads", "8", "--head-dim", "128", "--dtype", "bf16", "--pass",
                       "fwd,fwd_bwd", "--iters", "1", "--warmup", "0"]) as f:
        check_sim_attrs(f, "fattree", "modeled", 16)
        expect(f.attrs["sim_tensor_data"].startswith("placeholders"), "tensor data not recorded")
        tensors = 0
        for name, g in f["ring_attention"].items():
            a = g.attrs
            expect(a["bytes_sent_per_rank_per_layer"] == a["pred_bytes_sent_per_rank_per_layer"],
                   f"{name}: bytes")
            peak = g["allocated_peak_bytes"][()]
            expect(peak.min() >= 0.9 * a["pred_memory_bytes"],
                   f"{name}: the allocator counted {peak.min()} B, the method holds "
                   f"{a['pred_memory_bytes']}")
            tensors = max(tensors, int(peak.sum()))
    summary = sampled_memory(out)
    pss = summary["peak_pss_bytes"]
    print(f"  tensors {tensors / 2**30:.2f} GiB on 16 ranks; the run's peak PSS {pss / 2**30:.2f} GiB, "
          f"RSS {summary['peak_rss_bytes'] / 2**30:.2f} GiB")
    expect(tensors > 2**31, f"the case is too small to show anything: {tensors} B")
    expect(0 < pss < 0.1 * tensors, f"peak PSS {pss} B for {tensors} B of tensors")


def document_round_pairs(rows: np.ndarray, cu: np.ndarray, slots: np.ndarray) -> np.ndarray:
    """Visible causal (query, key) pairs [round, rank], by brute force from each rank's row
    positions ([rows, ranks]) and the documents' token counts (cu_seqlens) and slot offsets
    (cu_seqlens_padded): a key is visible when it lies in the query's document, at or before it,
    and neither is a pad slot; in round k rank r holds the block of rank (r - k) mod n."""
    n = rows.shape[1]
    doc = np.searchsorted(slots, rows, side="right") - 1
    token = rows - slots[doc] < (cu[doc + 1] - cu[doc])
    out = np.zeros((n, n), dtype=np.int64)
    for k in range(n):
        for r in range(n):
            s = (r - k) % n
            q, kk = rows[:, r], rows[:, s]
            seen = (doc[:, r][:, None] == doc[:, s][None, :]) & (kk[None, :] <= q[:, None])
            out[k, r] = (seen & token[:, r][:, None] & token[:, s][None, :]).sum()
    return out


def scenario_docs_modeled(env: Env) -> None:
    """Packed documents under modeled compute on 8 flat hosts, every ring layout: each rank's
    visible pairs per round equal a brute-force count over the positions its rows hold and the
    document boundaries (both saved in the file), and each round's compute-only time is exactly
    those pairs' FLOPs at F (4 d a per pair forward, 10 backward), so the schedule injects every
    pair it planned, however it holds them."""
    out = env.workdir / "docs.h5"
    with run_ok(env, "ring_attention", out, *modeled_flat(8), "--nodes", "8",
                flags=["--block", "512", "--layout", "contiguous,striped,doc_zigzag,balanced",
                       "--docs", "lognormal:64:1", "--causal", "1", "--heads", "4", "--kv-heads",
                       "2", "--pass", "fwd_bwd", "--iters", "1", "--warmup", "0"]) as f:
        check_sim_attrs(f, "flat", "modeled", 8)
        layouts = set()
        for name, g in f["ring_attention"].items():
            a = g.attrs
            layouts.add(str(a["layout"]))
            cu = g["cu_seqlens"][()]
            slots = g["cu_seqlens_padded"][()] if "cu_seqlens_padded" in g else cu
            want = document_round_pairs(g["row_positions"][()], cu, slots)
            expect(want.sum() > 0, f"{name}: nothing visible")
            expect(np.array_equal(g["round_work_pairs"][()], want),
                   f"{name}: round pairs differ from the brute-force count")
            bwd = g["bwd_round_work_pairs"][()]
            expect(np.array_equal(bwd[:8], want) and not bwd[8:].any(),
                   f"{name}: backward round pairs differ from the brute-force count")
            per_pair = int(a["head_dim"]) * int(a["heads"]) / F
            for key, flops, pairs in (("compute_only_round_s", 4, want),
                                      ("bwd_compute_only_round_s", 10, bwd)):
                got = g[key][()]
                # SimGrid ends a compute action within surf/precision (1e-9 s) of another event.
                err = np.abs(got - flops * per_pair * pairs).max()
                expect(err <= 2e-9, f"{name}: {key} off the pairs' FLOPs at F by {err} s")
        expect(layouts == {"contiguous", "striped", "doc_zigzag", "balanced"}, f"layouts {layouts}")
    print("  ok: 4 layouts, round pairs and injected FLOPs match the brute-force count")


def scenario_groupcast_modeled(env: Env) -> None:
    """Short packed documents on 16 simulated ranks (fattree: two nodes of 8), modeled compute,
    c = 8K, the balanced layout: the ring is transfer-bound (every block travels while almost no
    query sees a remote key) and the group-cast is not: at least 0.8 of the ideal forward and
    backward, ten times the ring's, with at most a tenth of its bytes, counted by the transport
    and equal to the layout's exact figure. Modeled compute: the same on any host."""
    out = env.workdir / "groupcast.h5"
    with run_ok(env, "ring_attention", out, "--platform", "fattree", "--ranks", "16",
                "--sim-flops", "4e14",  # a GPU's attention: 0.2 ms of compute a rank
                flags=["--block", "8K", "--layout", "balanced", "--variant", "ring,groupcast",
                       "--docs", "lognormal:256:1", "--causal", "1", "--heads", "32", "--kv-heads",
                       "8", "--head-dim", "128", "--dtype", "bf16", "--pass", "fwd_bwd",
                       "--iters", "1", "--warmup", "0"]) as f:
        check_sim_attrs(f, "fattree", "modeled", 16)
        cases = {str(g.attrs["variant"]): g.attrs for g in f["ring_attention"].values()}
        ring, gc = cases["ring"], cases["groupcast"]
        expect(gc["groupcast_schedule"] == "groupcast", f"schedule {gc['groupcast_schedule']}")
        for key in ("efficiency_vs_ideal_fwd", "efficiency_vs_ideal_bwd"):
            expect(gc[key] >= 0.8 and gc[key] >= 10 * ring[key], f"{key}: {gc[key]} against the ring's {ring[key]}")
        sent = gc["bytes_sent_per_rank_per_layer"]
        expect(sent == gc["pred_bytes_sent_per_rank_per_layer"] and 0 < sent <= ring["bytes_sent_per_rank_per_layer"] / 10,
               f"bytes {sent}, exact {gc['pred_bytes_sent_per_rank_per_layer']}, ring {ring['bytes_sent_per_rank_per_layer']}")
        print(f"  ok: group-cast {gc['efficiency_vs_ideal_fwd']:.3f} of the ideal, ring "
              f"{ring['efficiency_vs_ideal_fwd']:.3f}; bytes {sent / ring['bytes_sent_per_rank_per_layer']:.4f} of the ring's")
    # Its overlap condition: on 8 flat hosts of 0.5 GB/s links the exchange does not hide
    # (model --section varlen: it hides above 1.09 GB/s), and the step is what the model
    # predicts from the layout's bytes at that W.
    out = env.workdir / "groupcast_flat.h5"
    flags = ["--block", "8K", "--layout", "balanced", "--variant", "groupcast", "--docs",
             "lognormal:256:1", "--causal", "1", "--heads", "32", "--kv-heads", "8", "--head-dim",
             "128", "--dtype", "bf16", "--iters", "1", "--warmup", "0"]
    with run_ok(env, "ring_attention", out, "--platform", "flat", "--nodes", "8", "--ranks", "8",
                "--bw", "5e8", "--lat", "1e-6", "--sim-flops", "4e14", flags=flags) as f:
        got = next(iter(f["ring_attention"].values())).attrs["efficiency_vs_ideal_fwd"]
    model = Path(os.environ.get("SUITE_MODEL", REPO / "build" / "bin" / "model"))
    expect(model.exists(), f"no model executable at {model} (SUITE_MODEL)")
    proc = subprocess.run([str(model), "--section", "varlen", "--docs",
                           "lognormal:256:1", "--cp-sweep", "8", "--tokens-per-rank", "8K", "--causal",
                           "--hidden", "4096", "--heads", "32", "--kv-heads", "8", "--flops", "4e14",
                           "--bw", "5e8", "--layout", "balanced", "--csv", str(env.workdir / "gc.csv")],
                          capture_output=True, text=True, timeout=60)
    expect(proc.returncode == 0, "model --section varlen", proc)
    with (env.workdir / "gc.csv").open() as csv_file:
        row = next(csv.DictReader(csv_file))
    want = float(row["eff_groupcast_w"])
    expect(float(row["groupcast_hides_above_bw"]) > 5e8, f"model: {row}")
    expect(abs(got - want) <= 0.03 * want, f"flat 0.5 GB/s: measured {got:.4f}, model {want:.4f}")
    print(f"  ok: below its W*, measured {got:.4f} against the model's {want:.4f}")


def scenario_sweep(env: Env) -> None:
    """sweep.py --simulate runs the job script's cell on node8 and leaves a simulated results file."""
    if not (env.bin_dir / "ring_attention").exists():
        print(f"SKIP: {env.bin_dir} has no SMPI build (make sim)")
        raise SystemExit(SKIP)
    out = env.workdir / "sweep"
    cmd = [*module_command("envs.sweep"), "ring_attention", "--values", "32",
           "--link", "nvlink", "--nodes", "1", "--tasks-per-node", "4", "--simulate",
           "--sweep-dir", str(out), "--model", str(env.bin_dir / "none")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=env.workdir,
                          env={**os.environ, "SUITE_SIM_BUILD": str(env.bin_dir.parent)})
    expect(proc.returncode == 0, "sweep --simulate failed", proc)
    files = list(out.glob("*.h5"))
    expect(len(files) == 1, f"expected one results file in {out}: {files}", proc)
    with h5py.File(files[0]) as f:
        check_sim_attrs(f, "node8", "executed", 4)
        expect(f.attrs["link"] == "nvlink", f"link {f.attrs['link']}")
        expect(all(g.attrs["check_passed"] == 1 for g in f["ring_attention"].values()), "checks")
    summary = json.loads(files[0].with_suffix(".sim.json").read_text())
    expect(summary["ranks"] == 4 and summary["platform"] == "node8", f"summary {summary}")


SCENARIOS = {
    "sim_bad_input": scenario_bad_input,
    "sim_ring_crossing": scenario_ring_crossing,
    "sim_executed_checks": scenario_executed_checks,
    "sim_overlap_by_time": scenario_overlap_by_time,
    "sim_modeled": scenario_modeled,
    "sim_modeled_memory": scenario_modeled_memory,
    "sim_docs_modeled": scenario_docs_modeled,
    "sim_groupcast_modeled": scenario_groupcast_modeled,
    "sim_sweep": scenario_sweep,
}


if __name__ == "__main__":
    sys.exit(run_cli(SCENARIOS, __doc__))
