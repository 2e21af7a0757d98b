#!/usr/bin/env python3
"""Integration scenarios for ring_attention's group-cast variant (--variant groupcast) and the
hybrid's ring part with it (ulysses --ring-variant groupcast), one per ctest test.

The rows each rank receives and sends are counted here from the recorded row positions and the
document mask (a key travels to a rank when one of its queries sees it) and checked against the
bytes the transport counted, and the buffers they need against what the allocator counted; the
tensors against attention numpy computes. `model --section varlen` and the benchmark's
predictions share one traffic count (ring::group_cast_traffic), checked against those.
"""
from __future__ import annotations

import csv
import sys

import h5py
import numpy as np

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


ELEM = {"fp32": 4, "fp64": 8, "bf16": 2}


def hand_count(g, a) -> dict:
    """A case's group-cast counted here from its recorded rows and documents: [receiver, source]
    rows (a key travels to a rank when one of its queries sees it; striped's strided run goes
    whole or not at all), whether the busiest rank would move the ring's (n - 1) c rows anyway
    (the ring's schedule then runs), and per rank the rows of its buffers: the staging copy (K
    and V of its rows the others see) and a slot (K and V of its largest batch: its sources in
    ring order, r - 1, r - 2, ..., a batch the sources whose rows fit one block of c)."""
    n, c = int(a["n_c"]), int(a["c"])
    need = seen_rows(g["row_positions"][()].reshape(c, n).T, bool(a["causal"]), Pack.of(g))
    if a["layout"] == "striped":
        need = np.where(need > 0, c, 0)
    sent, got = need.sum(axis=0), need.sum(axis=1)
    slot = np.zeros(n, np.int64)
    for r in range(n):
        filled = 0
        for k in range(1, n):
            rows = need[r, (r - k) % n]
            if rows and filled + rows > c:
                filled = 0
            filled += rows
            slot[r] = max(slot[r], 2 * filled)
    return {"sent": sent, "got": got, "falls_back": max(sent.max(), got.max()) >= (n - 1) * c,
            "staged": 2 * sent, "slot": slot}


def scenario_groupcast_np4(env: Env) -> None:
    """4 ranks, fp32, GQA, short and long-tailed documents, every layout, forward and backward,
    the group-cast beside the all-gather variant: every case passes its check against the
    per-document reference. From each case's recorded rows and documents the test counts what
    the group-cast must move and hold: whether it falls back to the ring's schedule, the bytes
    each rank sent and received (forward and backward, as the transport counted them), and the
    buffers each rank allocated (as the allocator counted them) and the busiest rank's memory.
    The benchmark's predictions and `model --section varlen` (the same traffic count, shared
    code) must agree with the measurements; with balanced it moves fewer bytes than the ring."""
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
        schedules = set()
        with h5py.File(out) as f:
            for name, g in f[BIN].items():
                a = g.attrs
                expect(int(a["check_passed"]) == 1, f"{spec} {name}: check failed", proc)
                if a["variant"] != "groupcast":
                    continue
                n, c, b = int(a["n_c"]), int(a["c"]), int(a["batch"])
                e, eg = ELEM[a["dtype"]], ELEM[a["grad_dtype"]]
                kv_row = b * int(a["kv_heads"]) * int(a["head_dim"])  # elements of one token's K (or V)
                q_bytes = c * b * int(a["heads"]) * int(a["head_dim"]) * e
                row = 2 * kv_row * e  # K and V of one token
                hand = hand_count(g, a)
                falls_back = a["groupcast_schedule"].startswith("ring")
                schedules.add(falls_back)
                expect(falls_back == hand["falls_back"], f"{spec} {name}: schedule {a['groupcast_schedule']}, "
                       f"counted {'the ring' if hand['falls_back'] else 'the group-cast'}")
                fwd_sent, bwd_sent = g["cp_bytes_sent"][()].reshape(-1), g["bwd_cp_bytes_sent"][()].reshape(-1)
                allocated = g["groupcast_allocated_bytes"][()].reshape(2, n)
                if falls_back:
                    expect(np.all(fwd_sent == (n - 1) * c * row) and not allocated.any(),
                           f"{spec} {name}: the ring's bytes {fwd_sent}, group-cast buffers {allocated.tolist()}")
                else:
                    sent, got = hand["sent"], hand["got"]
                    recv = g["cp_bytes_recv"][()].reshape(-1)
                    expect(np.array_equal(fwd_sent, sent * row) and np.array_equal(recv, got * row),
                           f"{spec} {name}: sent {fwd_sent}, received {recv}; counted {sent * row}, {got * row}")
                    # The backward: the rows again, and the partial sums of the rows it received.
                    expect(np.array_equal(bwd_sent, (sent + got) * row), f"{spec} {name}: backward {bwd_sent}")
                    # Its buffers: the forward's staging copy and two slots; the backward's
                    # contributions of a batch (the kernel's type: fp32 on the CPU), two
                    # travelling slots and the arriving partial sums (grad_dtype) and its own
                    # block's total.
                    staged, slot = hand["staged"], hand["slot"]
                    fwd_mem = (staged + 2 * slot) * kv_row * e
                    bwd_mem = slot * kv_row * (e + 2 * eg) + staged * kv_row * eg + 2 * c * kv_row * eg
                    expect(np.array_equal(allocated[0], fwd_mem) and np.array_equal(allocated[1], bwd_mem),
                           f"{spec} {name}: allocated {allocated.tolist()}, counted {[fwd_mem.tolist(), bwd_mem.tolist()]}")
                    # The busiest rank's memory: Q and O, its own K/V block and those buffers;
                    # the backward adds dO, dQ, its block's contributions and the backward's.
                    mem = 2 * q_bytes + c * row + fwd_mem
                    bwd = mem + q_bytes + q_bytes + c * row + bwd_mem
                    expect(float(a["memory_method_bytes"]) == mem.max()
                           and float(a["bwd_memory_method_bytes"]) == bwd.max(),
                           f"{spec} {name}: memory {a['memory_method_bytes']}, {a['bwd_memory_method_bytes']}; "
                           f"counted {mem.max()}, {bwd.max()}")
                # The prediction and the model: the same count in the suite's code, which must
                # agree with what ran.
                m = model[a["layout"]]
                expect(falls_back == (m["groupcast_falls_back"] == "1") == bool(a["pred_groupcast_falls_back"]),
                       f"{spec} {name}: model {m['groupcast_falls_back']}, prediction {a['pred_groupcast_falls_back']}")
                for key in ("bytes_sent_per_rank_per_layer", "bytes_recv_per_rank_per_layer",
                            "bwd_bytes_sent_per_rank_per_layer", "memory_method_bytes",
                            "bwd_memory_method_bytes"):
                    pred = "pred_" + key.replace("_method", "")
                    expect(float(a[key]) == float(a[pred]), f"{spec} {name}: {key} {a[key]} != {a[pred]}")
                sent = float(a["bytes_sent_per_rank_per_layer"])
                ring = float(a["ring_bytes_sent_per_rank_per_layer"])
                expect(sent == float(m["groupcast_bytes_per_rank"]) == fwd_sent.max(),
                       f"{spec} {name}: sent {sent}, model {m['groupcast_bytes_per_rank']}, per rank {fwd_sent}")
                expect(sent == ring if falls_back else sent < ring, f"{spec} {name}: {sent} against the ring's {ring}")
                if a["layout"] == "balanced":
                    expect(not falls_back and sent < ring / 2, f"{spec} {name}: {sent} of {ring}")
        expect(schedules == {False, True}, f"{spec}: schedules run {schedules}: both the group-cast and the ring's")
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
