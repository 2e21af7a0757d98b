#!/usr/bin/env python3
"""Integration scenarios for ring_attention's group-cast variant (--variant groupcast) and the
hybrid's ring part with it (ulysses --ring-variant groupcast), one per ctest test.

The rows each rank receives and sends are counted here from the recorded row positions and the
document mask (a key travels to a rank when one of its queries sees it) and checked against the
bytes the transport counted; the tensors against attention numpy computes; the bytes, memory and
schedule against `model --section varlen`, which counts the traffic on its own.
"""
from __future__ import annotations

import csv
import sys
from pathlib import Path

import h5py
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_scenario import Env, expect, expect_refused, model_run, run_cli  # noqa: E402
from scenarios_ring import BIN, Pack, check_docs_tensors, run_ok, visible  # noqa: E402


def seen_rows(rows: np.ndarray, causal: bool, pack: Pack) -> np.ndarray:
    """[receiver, source]: rows of the source that some query of the receiver sees."""
    n = len(rows)
    need = np.zeros((n, n), dtype=np.int64)
    for r in range(n):
        queries = rows[r][pack.doc(rows[r]) >= 0]
        for s in range(n):
            if s != r:
                need[r, s] = visible(queries, rows[s], causal, pack).any(axis=0).sum()
    return need


def scenario_groupcast_tensors(env: Env) -> None:
    """2 ranks, fp64, every layout (doc_zigzag with its padding), causal and full within
    documents, GQA, forward and backward: O, lse, dQ, dK and dV equal numpy's attention with the
    document mask, and each rank sent and received exactly the rows some query of the other
    rank sees (K and V, then in the backward their partial sums back), as the transport counted
    them; where a rank would move the ring's whole block (striped's strided runs, doc_zigzag's
    padded rank) the ring's schedule ran and says so."""
    check_docs_tensors(env, "pair", "groupcast")
    n, row = 2, 2 * 1 * 64 * 8  # K and V of one token: 1 K/V head of 64, fp64
    schedules = set()
    with h5py.File(env.workdir / "docs_pair_groupcast.h5") as f:
        for name, g in f[BIN].items():
            a = g.attrs
            c, causal = int(a["c"]), bool(a["causal"])
            need = seen_rows(g["row_positions"][()].reshape(c, n).T, causal, Pack.of(g))
            sent, got = need.sum(axis=0), need.sum(axis=1)
            schedule = a["groupcast_schedule"]
            schedules.add(schedule.split(":")[0])
            fwd_sent = g["cp_bytes_sent"][()].reshape(-1)
            bwd_sent = g["bwd_cp_bytes_sent"][()].reshape(-1)
            if a["layout"] == "striped" or max(sent.max(), got.max()) >= (n - 1) * c:
                expect(schedule.startswith("ring: "), f"{name}: schedule {schedule}")
                expect(np.all(fwd_sent == (n - 1) * c * row), f"{name}: fallback bytes {fwd_sent}")
                continue
            expect(schedule == "groupcast", f"{name}: schedule {schedule}")
            expect(np.array_equal(fwd_sent, sent * row), f"{name}: sent {fwd_sent} != {sent * row}")
            recv = g["cp_bytes_recv"][()].reshape(-1)
            expect(np.array_equal(recv, got * row), f"{name}: received {recv} != {got * row}")
            # The backward: its rows again, and the partial sums of the rows it received.
            expect(np.array_equal(bwd_sent, (sent + got) * row), f"{name}: backward {bwd_sent}")
            for key in ("memory_method_bytes", "bwd_memory_method_bytes"):
                pred = "pred_" + key.replace("_method", "")
                expect(float(a[key]) == float(a[pred]), f"{name}: {key} {a[key]} != {pred} {a[pred]}")
    expect(schedules == {"groupcast", "ring"}, f"schedules {schedules}")
    print("  ok: bytes of every case are the rows its queries see")


def model_rows(env: Env, *args: str) -> dict[str, dict[str, str]]:
    path = env.workdir / "varlen.csv"
    proc = model_run(env, "--section", "varlen", "--csv", str(path), *args)
    expect(proc.returncode == 0, "model --section varlen", proc)
    with path.open() as f:
        return {r["layout"]: r for r in csv.DictReader(f)}


def scenario_groupcast_np4(env: Env) -> None:
    """4 ranks, fp32, GQA, short and long-tailed documents, every layout, forward and backward,
    the group-cast beside the all-gather variant: every case passes its check against the
    per-document reference; the group-cast's bytes sent and received, its memory and its
    schedule equal what the layout gives (the file's own figures and `model --section varlen`,
    which counts every rank's rows itself); it moves fewer bytes than the ring with balanced."""
    out = env.workdir / "gc4.h5"
    layouts = "contiguous,zigzag,striped,doc_zigzag,balanced"
    for spec in ("lognormal:40:1", "pareto:8:1.1"):
        proc = run_ok(env, 4, out, "--block", "64", "--layout", layouts, "--causal", "1",
                      "--variant", "groupcast,allgather", "--heads", "4", "--kv-heads", "2",
                      "--pass", "fwd_bwd", "--docs", spec)
        expect("Group-cast: bytes the busiest rank sent" in proc.stdout, "no group-cast table", proc)
        model = model_rows(env, "--docs", spec, "--cp-sweep", "4", "--tokens-per-rank", "64",
                           "--causal", "--hidden", "256", "--heads", "4", "--kv-heads", "2",
                           "--dtype", "fp32", "--layout", layouts)
        with h5py.File(out) as f:
            for name, g in f[BIN].items():
                a = g.attrs
                expect(int(a["check_passed"]) == 1, f"{spec} {name}: check failed", proc)
                if a["variant"] != "groupcast":
                    continue
                m = model[a["layout"]]
                ring = float(a["ring_bytes_sent_per_rank_per_layer"])
                falls_back = a["groupcast_schedule"].startswith("ring")
                expect(falls_back == (m["groupcast_falls_back"] == "1") == bool(a["pred_groupcast_falls_back"]),
                       f"{spec} {name}: schedule {a['groupcast_schedule']}, model {m['groupcast_falls_back']}")
                for key in ("bytes_sent_per_rank_per_layer", "bytes_recv_per_rank_per_layer",
                            "bwd_bytes_sent_per_rank_per_layer", "memory_method_bytes",
                            "bwd_memory_method_bytes"):
                    pred = "pred_" + key.replace("_method", "")
                    expect(float(a[key]) == float(a[pred]), f"{spec} {name}: {key} {a[key]} != {a[pred]}")
                sent = float(a["bytes_sent_per_rank_per_layer"])
                expect(sent == float(m["groupcast_bytes_per_rank"]),
                       f"{spec} {name}: sent {sent}, model {m['groupcast_bytes_per_rank']}")
                expect(sent == ring if falls_back else sent < ring, f"{spec} {name}: {sent} against the ring's {ring}")
                if a["layout"] == "balanced":
                    expect(not falls_back and sent < ring / 2, f"{spec} {name}: {sent} of {ring}")
        print(f"  ok: {spec}")


def scenario_groupcast_hybrid_and_groups(env: Env) -> None:
    """The hybrid's ring part with the group-cast (4 ranks, u = 2, its ring over 2 Ulysses
    groups) and ring_attention in two --cp groups of 2: both pass their checks against the
    per-document reference, the hybrid's ring bytes equal the layout's count, and without
    --docs the group-cast runs the ring's schedule and says why."""
    out = env.workdir / "hyb.h5"
    proc = env.mpirun(4, "ulysses", "--backend", "cpu", "--iters", "2", "--warmup", "1", "--out", str(out),
                      "--seq", "512", "--ulysses-degree", "2", "--layout", "balanced,contiguous",
                      "--ring-variant", "groupcast", "--docs", "lognormal:40:1", "--pass", "fwd_bwd",
                      "--dtype", "fp64")
    expect(proc.returncode == 0, "ulysses --ring-variant groupcast failed", proc)
    with h5py.File(out) as f:
        names = list(f["ulysses"])
        expect(len(names) == 2, f"cases {names}")
        for name, g in f["ulysses"].items():
            a = g.attrs
            expect(int(a["check_passed"]) == 1 and a["ring_variant"] == "groupcast", f"{name}: check", proc)
            for key in ("ring_bytes_sent_per_rank", "bwd_ring_bytes_sent_per_rank"):
                expect(float(a[key]) == float(a["pred_" + key]), f"{name}: {key} {a[key]} != {a['pred_' + key]}")
    out = env.workdir / "cp2.h5"
    proc = run_ok(env, 4, out, "--block", "64", "--cp", "2", "--layout", "balanced,contiguous",
                  "--variant", "groupcast", "--docs", "lognormal:40:1", "--pass", "fwd_bwd", "--dtype", "fp64")
    with h5py.File(out) as f:
        for name, g in f[BIN].items():
            expect(int(g.attrs["check_passed"]) == 1 and int(g.attrs["cp_groups"]) == 2, f"--cp 2 {name}", proc)
    out = env.workdir / "nodocs.h5"
    proc = run_ok(env, 4, out, "--block", "32", "--layout", "contiguous,zigzag", "--variant", "groupcast",
                  "--causal", "0,1")
    expect("no --docs: one document" in proc.stdout, "the fallback is not said", proc)
    with h5py.File(out) as f:
        for name, g in f[BIN].items():
            a = g.attrs
            expect(a["groupcast_schedule"].startswith("ring: ") and int(a["check_passed"]) == 1, f"{name}: {a['groupcast_schedule']}")
            expect(float(a["bytes_sent_per_rank_per_layer"]) == float(a["ring_bytes_sent_per_rank_per_layer"]),
                   f"{name}: bytes")
    expect_refused(env, BIN, {"unknown variant": (["--variant", "groupkast"], "groupcast")})
    expect_refused(env, "ulysses", {"unknown ring variant": (["--ring-variant", "hops"], "--ring-variant")})
    print("  ok")


SCENARIOS = {
    "groupcast_tensors": scenario_groupcast_tensors,
    "groupcast_np4": scenario_groupcast_np4,
    "groupcast_hybrid_and_groups": scenario_groupcast_hybrid_and_groups,
}


if __name__ == "__main__":
    sys.exit(run_cli(SCENARIOS, __doc__))
