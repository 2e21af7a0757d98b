#!/usr/bin/env python3
"""Integration scenarios on simulated clusters: the SMPI build (`make sim`, build-sim/bin) run by
scripts/simulate.py under SimGrid's smpirun, one scenario per ctest test.

--bin-dir is the SMPI build's bin folder; a missing SMPI build skips (exit 77) with a message.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_scenario import Env, expect, run_cli  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
from ring_crossing import sweeps  # noqa: E402
from suite_results import read_results  # noqa: E402

SKIP = 77


def simulate(env: Env, bench: str, *args: str, flags: list[str] = (), timeout: float = 240
             ) -> subprocess.CompletedProcess:
    if not (env.bin_dir / bench).exists():
        print(f"SKIP: {env.bin_dir / bench} is not built (make sim builds the SMPI variant)")
        raise SystemExit(SKIP)
    cmd = [sys.executable, str(REPO / "scripts" / "simulate.py"), bench, *args,
           "--build", str(env.bin_dir.parent), "--no-plot", "--", *flags]
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=env.workdir)
    print(f"$ {' '.join(cmd)}\n-> exit {proc.returncode} in {time.monotonic() - start:.1f} s")
    return proc


def run_ok(env: Env, bench: str, out: Path, *args: str, flags: list[str] = ()) -> h5py.File:
    proc = simulate(env, bench, *args, "--out", str(out), flags=flags)
    expect(proc.returncode == 0, f"{bench}: simulation failed", proc)
    for suffix in (".platform.xml", ".hosts", ".sim.json"):
        expect(out.with_suffix(suffix).exists(), f"{bench}: no {suffix} beside the results", proc)
    return h5py.File(out)


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
    """GPU-only flags, a layer without modeled compute, unknown presets: exit 2, one message,
    no results file and no platform file."""
    cases = {
        "backend cuda": (["--platform", "flat", "--ranks", "4"], ["--backend", "cuda"], "--backend cuda"),
        "transport nccl": (["--platform", "flat", "--ranks", "4"], ["--transport", "nccl"], "--transport nccl"),
        "dtype bf16": (["--platform", "flat", "--ranks", "4"], ["--dtype", "bf16"], "--dtype bf16"),
        "layer modeled": (["--platform", "flat", "--ranks", "4", "--sim-flops", "1e12"],
                          ["--mode", "layer"], "no modeled compute"),
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
    # --help is SimGrid's own under smpirun; simulate.py asks the benchmark with -h
    out = env.workdir / "help" / "r.h5"
    proc = simulate(env, "ring_attention", "--platform", "flat", "--ranks", "2", "--out", str(out),
                    flags=["--help"], timeout=60)
    expect(proc.returncode == 0 and "--sim-flops" in proc.stdout and "SMPI build" in proc.stdout,
           "the benchmark's help does not describe the SMPI build", proc)
    expect(not out.exists(), "help left a results file", proc)


def scenario_ring_crossing(env: Env) -> None:
    """The ring on 4 flat hosts whose link (100 MB/s) puts c* inside the sweep, executed compute:
    exposed transfer at small c, hidden at large c, the crossing within 30% of the c* measured."""
    out = env.workdir / "ring.h5"
    with run_ok(env, "ring_attention", out, "--platform", "flat", "--ranks", "4", "--bw", "100M",
                flags=["--block", "64:512:+64", "--layout", "contiguous", "--causal", "0",
                       "--heads", "8", "--kv-heads", "1", "--iters", "2", "--warmup", "1",
                       "--check", "0"]) as f:
        check_sim_attrs(f, "flat", "executed", 4)
        for name, g in f["ring_attention"].items():
            a = g.attrs
            expect(a["bytes_sent_per_rank_per_layer"] == a["pred_bytes_sent_per_rank_per_layer"],
                   f"{name}: bytes {a['bytes_sent_per_rank_per_layer']} != predicted")
            # Below the link by the links' latency and SMPI's injection of the host's own CPU
            # bursts between MPI calls (copies, bookkeeping; executed compute): 5 to 8% here on an
            # otherwise idle 2-core machine, 11% at c = 64 with other tests running beside it.
            expect(0.8e8 < a["measured_W_Bps"] < 1e8, f"{name}: W {a['measured_W_Bps']} is not the link's")
    sweep = sweeps(read_results(out).cases_of("ring_attention"))[0]
    print(f"  overlapped/compute: {[round(r, 2) for r in sweep.ratio]}, crossing {sweep.cross}, "
          f"c* there {sweep.c_star_at_cross}")
    expect(sweep.ratio[0] > 1.5 and sweep.ratio[-1] < 1.15, f"no exposed-to-hidden sweep: {sweep.ratio}")
    expect(sweep.cross is not None, "no crossing")
    expect(abs(sweep.cross / sweep.c_star_at_cross - 1) <= 0.3,
           f"crossing {sweep.cross:.0f} not within 30% of c* {sweep.c_star_at_cross:.0f}")
    plots = env.workdir / "plots"
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "plot.py"), str(out), "--out", str(plots)],
                          capture_output=True, text=True, timeout=120)
    expect(proc.returncode == 0 and (plots / "ring_sweep_ring_contiguous_full.png").exists(), "sweep plot", proc)


def scenario_overlap_by_time(env: Env) -> None:
    """Overlap shown in time, not by construction: on a link slow enough that a round's transfer
    takes half as long as its attention (c about 2 c*, executed compute), the ring's overlapped
    step (forward and backward) lasts about the sum over rounds of max(compute, transfer), well
    under compute + transfer, while the all-gather variant, which gathers and then computes,
    lasts about their sum."""
    out = env.workdir / "overlap.h5"
    with run_ok(env, "ring_attention", out, "--platform", "flat", "--ranks", "4", "--bw", "100M",
                flags=["--block", "384", "--layout", "contiguous", "--causal", "0", "--heads", "8",
                       "--kv-heads", "1", "--variant", "ring,allgather", "--pass", "fwd_bwd",
                       "--iters", "2", "--warmup", "1", "--check", "0"]) as f:
        for name, g in f["ring_attention"].items():
            a = g.attrs
            for p in ("", "bwd_"):
                over = a[p + "time_overlapped_median_s"]
                comp, xfer = a[p + "time_compute_only_median_s"], a[p + "time_transfer_only_median_s"]
                print(f"  {name} {p or 'fwd_'}: overlapped {over:.4g} s, compute {comp:.4g}, transfer {xfer:.4g}")
                if a["variant"] == "ring":
                    expect(0.3 < xfer / comp < 3, f"{name} {p}: transfer {xfer}, compute {comp}: nothing to hide")
                    # Round by round the longer of the busiest rank's attention and the block's
                    # transfer, at this run's F and W (the last round sends nothing).
                    bound = a[p + "pred_time_overlapped_s"]
                    expect(over <= 1.15 * bound, f"{name} {p}: overlapped {over} above the rounds' max {bound}")
                    expect(over <= 0.85 * (comp + xfer), f"{name} {p}: overlapped {over} near compute + transfer")
                else:
                    expect(over >= 0.9 * (comp + xfer), f"{name} {p}: the all-gather variant hid its gather")


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
            expect(abs(a["expert_flops_per_s"] / F - 1) < 1e-6, f"moe/{name}: expert F {a['expert_flops_per_s']}")
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


def scenario_sweep(env: Env) -> None:
    """sweep.py --simulate runs the job script's cell on node8 and leaves a simulated results file."""
    if not (env.bin_dir / "ring_attention").exists():
        print(f"SKIP: {env.bin_dir} has no SMPI build (make sim)")
        raise SystemExit(SKIP)
    out = env.workdir / "sweep"
    cmd = [sys.executable, str(REPO / "scripts" / "sweep.py"), "ring_attention", "--values", "32",
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
    "sim_sweep": scenario_sweep,
}


if __name__ == "__main__":
    sys.exit(run_cli(SCENARIOS, __doc__))
