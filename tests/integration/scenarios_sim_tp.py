#!/usr/bin/env python3
"""TP+SP's collective matmul on a simulated node with modeled compute: the SMPI build
(`make sim`, build-sim/bin) run through scripts/studies/tp_overlap_crossing.py; the model executable
(the CPU build's) comes from $SUITE_MODEL.

--bin-dir is the SMPI build's bin folder; a missing SMPI build skips (exit 77) with a message.
"""
from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

from scripts import module_command
from run_scenario import Env, expect, run_cli

REPO = Path(__file__).resolve().parents[2]
from scripts.studies.tp_overlap_crossing import Point, crossing

SKIP = 77


def scenario_crossing(env: Env) -> None:
    """Per forward op, where the ring stops exposing its transfer against METHODS.md 1.1's
    h/t = e F / (2 c W): 4 ranks on node8 (NVLink, W = 450 GB/s), bf16, F = 2.7e14, so the
    thresholds are 600 (out_proj, c = 1), 200 (qkv, c = 3) and 150 (fc1 and fc2, c = 4); s =
    32768 keeps the per-step latency, which the condition leaves out, under a tenth of a step.
    Each op's simulated crossing lies within 25% of its threshold, in the model's order, the
    blocking transfer is the same for the ring (no byte saved, none hidden there) and the ring
    hides every op's transfer at the largest h/t (modeled time: the same on any host)."""
    if not (env.bin_dir / "sp_tp").exists():
        print(f"SKIP: {env.bin_dir / 'sp_tp'} is not built (make sim builds the SMPI variant)")
        raise SystemExit(SKIP)
    model = Path(os.environ.get("SUITE_MODEL", REPO / "build" / "bin" / "model"))
    expect(model.exists(), f"no model executable at {model} (SUITE_MODEL)")
    out = env.workdir / "crossing.csv"
    cmd = [*module_command("studies.tp_overlap_crossing"), "--tp", "4", "--seq", "32768",
           "--sim-flops", "2.7e14", "--h-over-t", "64,128,192,256,512,576,640,768", "--model", str(model),
           "--build", str(env.bin_dir.parent), "--csv", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=280, cwd=env.workdir)
    print(proc.stdout[-3000:])
    expect(proc.returncode == 0, "tp_overlap_crossing.py failed", proc)
    with out.open() as f:
        rows = list(csv.DictReader(f))
    thr = {r["op"]: float(r["threshold_h_over_t"]) for r in rows}
    expect(thr == {"qkv": 200.0, "out_proj": 600.0, "fc1": 150.0, "fc2": 150.0}, f"model thresholds {thr}")
    points = [Point(int(r["h_over_t"]), r["op"], float(r["transfer_s"]), float(r["compute_s"]),
                    float(r["exposed_s"])) for r in rows]
    for op, t in thr.items():
        mine = [p for p in points if p.op == op]
        cross = crossing(mine, 0.05)
        expect(cross is not None, f"{op}: the sweep does not cross")
        expect(0.75 * t <= cross <= 1.25 * t, f"{op}: simulated crossing h/t {cross:.0f}, threshold {t:.0f}")
        last = max(mine, key=lambda p: p.h_over_t)
        expect(last.exposed_s <= 1e-3 * last.transfer_s, f"{op}: {last.exposed_s} s exposed at h/t {last.h_over_t}")
        first = min(mine, key=lambda p: p.h_over_t)
        expect(first.exposed_s > 0.2 * first.transfer_s, f"{op}: hidden already at h/t {first.h_over_t}")
        print(f"  ok: {op} crosses at h/t {cross:.0f} (threshold {t:.0f})")


SCENARIOS = {"sim_tp_overlap_crossing": scenario_crossing}


if __name__ == "__main__":
    sys.exit(run_cli(SCENARIOS, __doc__))
