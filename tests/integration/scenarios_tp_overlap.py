#!/usr/bin/env python3
"""Integration scenarios of `sp_tp --mode layer --tp-overlap` (CPU backend), one per ctest test.

The TP+SP layer with its forward all-gathers fed block by block into the QKV and fc1 GEMMs and
its reduce-scatters built from the output projection's and fc2's per-block partial products
(the ring of METHODS.md 1.1), and the same by K = 3 pieces of every rank's rows (chunks:3, the
pieces uneven), forward and training step, fused and unfused attention, on 2 and 4 ranks in
fp64: each case passes the layer's own check; its output and every gradient equal the blocking
TP+SP case's to fp64 rounding (the sums run in another order); it sends the same bytes in the
same count of collectives; its exposed communication is timed, the backward's (whose
output-gradient all-gathers and input-gradient reduce-scatters run as rings too) apart, and
every op's (phases <op>_exposed, <op>_gemm) in blocking and overlapped cases alike.
"""
from __future__ import annotations

import h5py
import numpy as np

from run_scenario import Env, expect, expect_refused, run_cli


def scenario_ring(env: Env, ranks: int) -> None:
    out = env.workdir / f"tp_overlap_{ranks}.h5"
    proc = env.mpirun(ranks, "sp_tp", "--backend", "cpu", "--mode", "layer", "--seq", "128", "--hidden", "256",
                      "--heads", "4", "--dtype", "fp64", "--iters", "2", "--warmup", "1", "--tp-overlap",
                      "none,ring,chunks:3",
                      "--pass", "fwd,fwd_bwd", "--attention", "fused,unfused", "--save-tensors", "--out", str(out))
    expect(proc.returncode == 0, "sp_tp --tp-overlap failed", proc)
    with h5py.File(out) as f:
        cases = f["sp_tp"]
        ring = [g for g in cases.values() if "_ovring" in g.name or "_ovchunks3" in g.name]
        expect(len(ring) == 8, f"{len(ring)} ring and chunks cases of {len(cases)}")
        for g in ring:
            name = g.name
            mode = "ring" if "_ovring" in name else "chunks:3"
            base = cases[name.rsplit("/", 1)[1].replace("_ovring", "").replace("_ovchunks3", "")]
            a, b = g.attrs, base.attrs
            expect(a["check_passed"] == 1 and b["check_passed"] == 1, f"{name}: check")
            expect(a["tp_overlap"] == mode and "tp_overlap" not in b, f"{name}: parameters")
            for t in [k for k in g if k.startswith("tensor_")]:
                x, y = g[t][()], base[t][()]
                scale = max(1.0, float(np.abs(y).max()))
                expect(np.abs(x - y).max() <= 1e-12 * scale, f"{name}: {t} differs by {np.abs(x - y).max():.3g}")
            for k in [k for k in b if k in ("bytes_sent",)]:
                expect(np.array_equal(g[k][()], base[k][()]), f"{name}: {k} differs from the blocking case's")
            for k in [k for k in b if k.endswith("_calls") or k.endswith("comm_bytes_per_rank")]:
                expect(a[k] == b[k], f"{name}: {k} {a[k]} != {b[k]}")
            # The forward's exposed communication (a training step prefixes its forward's phases).
            step = "pass" in a and a["pass"] == "fwd_bwd"
            exposed = a["phase_fwd_exposed_comm_median_s" if step else "phase_exposed_comm_median_s"]
            forward = a["phase_fwd_median_s"] if step else a["time_median_s"]
            expect(0 < exposed <= forward * 1.0001, f"{name}: exposed {exposed} against the forward's {forward}")
            if step:  # the backward's rings: its own exposed communication, within the pass
                bwd = a["phase_bwd_exposed_comm_median_s"]
                expect(0 < bwd <= a["phase_bwd_median_s"] * 1.0001, f"{name}: backward exposed {bwd}")
                block = 128 * 256 // ranks * 8  # the ring's one incoming block of partial sums
                expect(a["bwd_peak_bytes"] <= b["bwd_peak_bytes"] + block,
                       f"{name}: backward peak {a['bwd_peak_bytes']} against {b['bwd_peak_bytes']}")
            expect(a["h_over_t"] == 256 / ranks and a["overlap_c_out_proj"] == 1, f"{name}: h/t and widths")
            # Per op: what it waited for and its GEMMs, in the overlapped and the blocking case.
            passes = ["fwd_", "bwd_"] if step else [""]
            for attrs in (a, b):
                for pre in passes:
                    for op in ("qkv", "out_proj", "fc1", "fc2"):
                        for what in ("exposed", "gemm"):
                            key = f"phase_{pre}{op}_{what}_median_s"
                            expect(key in attrs and attrs[key] > 0, f"{name}: {key} missing or zero")
            expect("cannot hide" in a["tp_overlap_note"], f"{name}: the CPU note is missing")
        print(f"  ok: {len(ring)} ring and chunks cases on {ranks} ranks")


def scenario_bad_input(env: Env) -> None:
    cases = {
        "ring without TP+SP": (["--mode", "layer", "--variants", "tp", "--tp-overlap", "ring"], "--variants tp"),
        "chunks of zero": (["--mode", "layer", "--tp-overlap", "chunks:0"], "K must be a whole number >= 1"),
        "chunks above the rows": (["--mode", "layer", "--tp-overlap", "none,chunks:33"],
                                  "K is above the 32 rows (s*b/t) a rank holds"),
        "chunks without TP+SP": (["--mode", "layer", "--variants", "tp", "--tp-overlap", "chunks:2"],
                                 "--variants tp"),
        "unknown mode": (["--mode", "layer", "--tp-overlap", "pipe"], "--tp-overlap: unknown mode 'pipe'"),
        "collectives mode": (["--mode", "collectives", "--tp-overlap", "ring"], "add --mode layer"),
    }
    small = ["--seq", "64", "--hidden", "128", "--heads", "2"]
    expect_refused(env, "sp_tp", {what: ([*small, *args], needle) for what, (args, needle) in cases.items()},
                   ranks=2)


SCENARIOS = {
    "tp_overlap_np2": lambda e: scenario_ring(e, 2),
    "tp_overlap_np4": lambda e: scenario_ring(e, 4),
    "tp_overlap_bad_input": scenario_bad_input,
}


def main() -> None:
    run_cli(SCENARIOS, __doc__)


if __name__ == "__main__":
    main()
