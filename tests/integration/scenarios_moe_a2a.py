#!/usr/bin/env python3
"""Integration scenarios of `moe --mode a2a` (CPU backend), one per ctest test.

An all-to-all-v over a traffic matrix, by flat, pairwise and hierarchical algorithms on 4 ranks
as 2 nodes of 2. The matrices are rebuilt here from their definitions (uniform, incast, pair, a
CSV file of bytes or of fractions; zipf by its shares), every rank's received blocks are checked
by the benchmark element by element, and the bytes each rank's transport counted are recounted
here from the matrix: flat and pairwise send row r without its diagonal; hierarchical sends to
each other node what row r holds for it, and forwards inside its node what its rail peers sent
for each other rank of the node.
"""
from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np

from run_scenario import Env, expect, run_cli

N, P, ELEM = 4, 2, 4  # ranks, ranks per node, fp32
BYTES = 4096


def expected_matrix(traffic: str, file_rows: np.ndarray | None) -> np.ndarray | None:
    m = np.zeros((N, N), dtype=np.int64)
    if traffic == "uniform":
        m[:] = BYTES // N // ELEM * ELEM
    elif traffic == "incast":
        m[1:, 0] = BYTES
        m[0, :] = BYTES // N // ELEM * ELEM
    elif traffic == "pair":
        for l in range(P):
            m[l, P + l] = m[P + l, l] = BYTES
    elif traffic.startswith("file:"):
        rows = file_rows
        m = (np.floor(rows * BYTES / ELEM) * ELEM).astype(np.int64) if rows.max() <= 1 else rows.astype(np.int64)
    else:
        return None
    return m


def hierarchical_bytes(m: np.ndarray) -> np.ndarray:
    out = np.zeros(N, dtype=np.int64)
    for r in range(N):
        node, l = r // P, r % P
        across = sum(m[r, d] for d in range(N) if d // P != node)
        inside = sum(m[n * P + l, node * P + q] for q in range(P) if q != l for n in range(N // P))
        out[r] = across + inside
    return out


def scenario_patterns(env: Env) -> None:
    """Every pattern x every algorithm: checked, the matrix as defined, bytes as recounted."""
    bytes_csv = env.workdir / "bytes.csv"
    bytes_rows = np.array([[0, 100, 200, 300], [400, 0, 8, 12], [16, 20, 0, 24], [28, 32, 36, 0]])
    bytes_csv.write_text("\n".join(",".join(str(x) for x in r) for r in bytes_rows) + "\n")
    frac_csv = env.workdir / "fractions.csv"
    frac_rows = np.array([[0, 0.5, 0.25, 0.25], [0.1, 0, 0.2, 0.3], [1, 0, 0, 0], [0, 0, 0, 0.5]])
    frac_csv.write_text("\n".join(", ".join(str(x) for x in r) for r in frac_rows) + "\n")
    files = {f"file:{bytes_csv}": bytes_rows, f"file:{frac_csv}": frac_rows}
    traffic = ["uniform", "zipf:1.5", "incast", "pair", *files]
    out = env.workdir / "a2a.h5"
    proc = env.mpirun(N, "moe", "--backend", "cpu", "--mode", "a2a", "--traffic", ",".join(traffic), "--bytes",
                      str(BYTES), "--ranks-per-node", str(P), "--iters", "2", "--warmup", "1", "--out", str(out))
    expect(proc.returncode == 0, "moe --mode a2a failed", proc)
    expect("All-to-all-v over a traffic matrix" in proc.stdout, "no summary table", proc)
    with h5py.File(out) as f:
        cases = list(f["moe"].values())
        expect(len(cases) == len(traffic) * 3, f"{len(cases)} cases")
        for g in cases:
            a = g.attrs
            name = g.name
            expect(a["check_passed"] == 1 and a["bytes_match"] == 1, f"{name}: check {a['check_passed']}")
            m = g["traffic_bytes"][()].reshape(N, N)
            want = expected_matrix(str(a["traffic"]), files.get(str(a["traffic"])))
            if want is not None:
                expect(np.array_equal(m, want), f"{name}: matrix\n{m}\nnot\n{want}")
            else:  # zipf: every sender the same shares of rank^-alpha, over a permutation
                shares = np.arange(1, N + 1) ** -1.5
                zipf = np.floor(BYTES * shares / shares.sum() / ELEM) * ELEM
                for r in range(N):
                    expect(np.array_equal(np.sort(m[r]), np.sort(zipf)), f"{name}: zipf row {m[r]}")
                expect((m == m[0]).all(), f"{name}: zipf rows differ")
            algo = str(a["algo"])
            sent = g["a2a_bytes_sent"][()].ravel()
            want_sent = hierarchical_bytes(m) if algo == "hierarchical" else m.sum(axis=1) - np.diag(m)
            expect(np.array_equal(sent, want_sent), f"{name}: bytes sent {sent}, the matrix gives {want_sent}")
            # The harness's counters (group, and the node and rail communicators) saw the same.
            expect(np.array_equal(g["bytes_sent"][()].ravel(), sent), f"{name}: bytes_sent {g['bytes_sent'][()]}")
            expect(np.isclose(a["busbw_GBps"], a["algbw_GBps"] * (N - 1) / N), f"{name}: busbw")
            if algo == "pairwise":
                t = g["pair_time_s"][()].reshape(N, N)
                expect(np.all(t > 0), f"{name}: a pair step without a time\n{t}")
            else:
                expect("pair_time_s" not in g, f"{name}: per-pair times outside pairwise")
        print(f"  ok: {len(cases)} cases")


def scenario_bad_input(env: Env) -> None:
    def csv(name: str, text: str) -> str:
        p = env.workdir / name
        p.write_text(text)
        return f"file:{p}"

    cases = {
        "not N x N": (["--traffic", csv("three.csv", "1,2,3\n4,5,6\n7,8,9\n")], "N x N"),
        "short row": (["--traffic", csv("short.csv", "4,4,4,4\n4,4,4\n4,4,4,4\n4,4,4,4\n")], "row 2 has 3"),
        "negative": (["--traffic", csv("neg.csv", "4,4,4,4\n4,-4,4,4\n4,4,4,4\n4,4,4,4\n")], "not a non-negative"),
        "not a number": (["--traffic", csv("nan.csv", "4,4,4,4\n4,x,4,4\n4,4,4,4\n4,4,4,4\n")], "'x'"),
        "not whole elements": (["--traffic", csv("odd.csv", "4,4,4,4\n4,6,4,4\n4,4,4,4\n4,4,4,4\n")],
                               "whole number of 4-byte"),
        "missing file": (["--traffic", "file:/nonexistent/t.csv"], "cannot be read"),
        "unknown pattern": (["--traffic", "ring"], "--traffic: unknown pattern 'ring'"),
        "pair on one node": (["--traffic", "pair", "--ranks-per-node", "4"], "needs two nodes"),
        "unknown algorithm": (["--a2a-algo", "ring"], "--a2a-algo: unknown algorithm 'ring'"),
        "unknown mode": (["--mode", "collectives"], "--mode: unknown mode"),
        "P not dividing": (["--ranks-per-node", "3"], "--ranks-per-node 3"),
    }
    for what, (args, needle) in cases.items():
        out = env.workdir / "bad_a2a.h5"
        mode = [] if "--mode" in args else ["--mode", "a2a"]
        proc = env.mpirun(N, "moe", "--backend", "cpu", *mode, "--bytes", "1K", *args, "--out", str(out), timeout=120)
        expect(proc.returncode == 2, f"{what}: exit status {proc.returncode}", proc)
        expect(proc.stderr.count("error:") == 1 and needle in proc.stderr, f"{what}: message lacks '{needle}'", proc)
        expect(not out.exists() and not Path(str(out) + ".partial").exists(), f"{what}: results file left", proc)
        print(f"  ok: {what}")


SCENARIOS = {
    "moe_a2a_patterns": scenario_patterns,
    "moe_a2a_bad_input": scenario_bad_input,
}


def main() -> None:
    run_cli(SCENARIOS, __doc__)


if __name__ == "__main__":
    main()
