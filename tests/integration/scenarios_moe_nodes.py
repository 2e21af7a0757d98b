#!/usr/bin/env python3
"""Integration scenarios of moe across nodes (CPU backend), one per ctest test.

Node-limited routing (`--max-nodes-per-token`): no token uses more nodes than allowed.
Redundant experts (`--redundant-experts`, EPLB): replicas where the loads say, outputs and
gradients unchanged, the replicas' gradient all-reduce counted.

`--dispatch flat,hierarchical` with `--ranks-per-node` cutting 4 local ranks into 2 nodes of 2,
1 node of 4 and 4 nodes of 1. Hierarchical dispatch must give what flat gives (output and input
gradient to fp64 rounding; expert weights and gate gradients exactly, the same products), and
every byte it counted per level must equal a recount made here from the saved routing alone:
a row per (token, other node) across nodes, a row per copy inside the node from the relay
(the rank of the destination node with the sender's local index), the combine the reverse, the
backward the same plus 4 bytes per copy's gate gradient coming home.
"""
from __future__ import annotations

import h5py
import numpy as np

from run_scenario import Env, expect, expect_refused, run_cli

SMALL = ["--tokens", "64", "--hidden", "16", "--ffn-hidden", "32", "--iters", "2", "--warmup", "1",
         "--backend", "cpu", "--dtype", "fp64", "--pass", "fwd_bwd", "--save-tensors"]


def recount_levels(chosen: np.ndarray, kept: np.ndarray, experts: int, n_e: int, P: int,
                   row: int) -> np.ndarray:
    """[ranks, 16] level bytes of one hierarchical group from its routing: per exchange (fwd
    dispatch, fwd combine, bwd combine, bwd dispatch) inter sent, inter received, intra sent,
    intra received."""
    ranks = chosen.shape[0]
    per_rank = experts // n_e
    dest = chosen // per_rank  # [ranks, T k] destination rank of every copy
    copies = chosen.shape[1]
    k = copies // TOKENS
    node = lambda r: r // P  # noqa: E731
    rows = np.zeros((ranks, ranks), dtype=np.int64)  # rows[s, d]: kept copies of s for d
    distinct = np.zeros((ranks, ranks // P), dtype=np.int64)  # (token, node) pairs of s
    for s in range(ranks):
        for c in range(copies):
            if kept[s, c]:
                rows[s, dest[s, c]] += 1
        for t in range(TOKENS):
            nodes = {node(dest[s, t * k + j]) for j in range(k) if kept[s, t * k + j]}
            for n in nodes:
                distinct[s, n] += 1
    out = np.zeros((ranks, 16), dtype=np.int64)
    for r in range(ranks):
        m, l = node(r), r % P
        rail = [n * P + l for n in range(ranks // P)]
        inter_sent = sum(distinct[r, n] for n in range(ranks // P) if n != m) * row
        inter_recv = sum(distinct[s, m] for s in rail if s != r) * row
        intra_sent = sum(rows[s, d] for s in rail for d in range(m * P, (m + 1) * P) if d != r) * row
        intra_recv = sum(rows[s, r] for s in range(ranks) if s % P != l) * row
        gates_out = sum(rows[s, d] for s in rail if s != r for d in range(m * P, (m + 1) * P)) * 4
        gates_in = sum(rows[r, d] for d in range(ranks) if node(d) != m) * 4
        dispatch = [inter_sent, inter_recv, intra_sent, intra_recv]
        combine = [inter_recv, inter_sent, intra_recv, intra_sent]
        bwd_combine = [inter_sent + gates_out, inter_recv + gates_in, intra_sent, intra_recv]
        out[r] = dispatch + combine + bwd_combine + combine
    return out


TOKENS = 64


def scenario_hierarchical(env: Env, P: int) -> None:
    """Flat and hierarchical side by side on 4 ranks as 4 // P nodes of P, under skew and
    capacity drops: both checked against the host reference by the benchmark; here against
    each other and their bytes per level against the routing."""
    out = env.workdir / f"moe_nodes_{P}.h5"
    proc = env.mpirun(4, "moe", *SMALL, "--skew", "none,hot", "--capacity-factor", "0,0.5",
                      "--dispatch", "flat,hierarchical", "--ranks-per-node", str(P), "--out", str(out))
    expect(proc.returncode == 0, "moe failed", proc)
    with h5py.File(out) as f:
        cases = f["moe"]
        expect(len(cases) == 8, f"expected 8 cases, got {len(cases)}")
        hier = [g for g in cases.values() if g.attrs["dispatch"] == "hierarchical"]
        expect(len(hier) == 4, f"{len(hier)} hierarchical cases")
        for g in hier:
            a = g.attrs
            name = g.name
            flat = cases[name.rsplit("/", 1)[1].replace(f"_hier{P}", "")]
            for c in (g, flat):
                expect(c.attrs["check_passed"] == 1 and c.attrs["bytes_match"] == 1,
                       f"{c.name}: check {c.attrs['check_passed']} bytes {c.attrs['bytes_match']}")
                expect(int(c.attrs["ranks_per_node"]) == P and int(c.attrs["nodes"]) == 4 // P,
                       f"{c.name}: nodes {c.attrs['nodes']}")
            for t in ("chosen_expert", "kept", "gate", "grad_gate", "grad_w1", "grad_w2"):
                expect(np.array_equal(g[f"tensor_{t}"][()], flat[f"tensor_{t}"][()]), f"{name}: {t} differs from flat's")
            for t in ("output", "grad_input", "grad_router"):
                x, y = g[f"tensor_{t}"][()], flat[f"tensor_{t}"][()]
                expect(np.allclose(x, y, rtol=1e-12, atol=1e-12 * np.abs(y).max()), f"{name}: {t} differs from flat's "
                       f"by {np.abs(x - y).max():.3g}")
            chosen, kept = g["tensor_chosen_expert"][()].astype(int), g["tensor_kept"][()].astype(bool)
            row = int(a["h"]) * 8
            want = recount_levels(chosen, kept, int(a["experts"]), int(a["n_e"]), P, row)
            got = g["level_bytes"][()].reshape(4, 16)
            expect(np.array_equal(got, want), f"{name}: level bytes\n{got}\nagainst the routing's\n{want}")
            # Per token across nodes: flat one row per kept copy on another node, hierarchical
            # one per other node; both from the routing; and the uniform prediction.
            k, E, M = int(a["top_k"]), int(a["experts"]), 4 // P
            per_node = E // M
            dest_node = chosen // per_node
            flat_rows = sum(int(np.sum(kept[r] & (dest_node[r] != r // P))) for r in range(4))
            expect(np.isclose(a["flat_inter_node_rows_per_token"], flat_rows / (4 * TOKENS)),
                   f"{name}: flat rows per token {a['flat_inter_node_rows_per_token']}")
            expect(np.isclose(a["hier_inter_node_rows_per_token"], want[:, 0].sum() / row / (4 * TOKENS)),
                   f"{name}: hierarchical rows per token {a['hier_inter_node_rows_per_token']}")
            none = 1.0
            for i in range(k):
                none *= max(0.0, (E - per_node - i) / (E - i))
            expect(np.isclose(a["pred_hier_inter_node_rows_per_token"], (M - 1) * (1 - none)), f"{name}: prediction")
            expect(np.isclose(a["pred_flat_inter_node_rows_per_token"], k * (M - 1) / M), f"{name}: flat prediction")
            # The harness's counters (group, node and rail communicators) saw what the layer counted.
            expect(np.array_equal(g["bytes_sent"][()].ravel(), g["moe_bytes_sent"][()].ravel()),
                   f"{name}: bytes_sent {g['bytes_sent'][()]} != moe_bytes_sent {g['moe_bytes_sent'][()]}")
            calls = g["collective_calls"][()].reshape(-1, 3).tolist()
            want_calls = [[2, 5, int(a["capacity"] >= 0)], [0, 5, 1]]
            expect(calls == want_calls, f"{name}: collective calls {calls} != {want_calls}")
        print(f"  ok: {len(hier)} hierarchical cases as {4 // P} node(s) of {P}")


def scenario_node_limited(env: Env) -> None:
    """--max-nodes-per-token 0,1,2 on 4 ranks as 4 nodes of 1 (E 16, k 4), flat and
    hierarchical: the benchmark checks each token's choice against its reference router (the
    M nodes of highest top-(k/M) score sums, then the top-k among their experts); here no token
    uses more than M nodes (from the saved routing), the cross-node rows fall with M, and each
    limit's flat and hierarchical cases route alike."""
    out = env.workdir / "moe_nodes_limited.h5"
    proc = env.mpirun(4, "moe", *SMALL, "--experts", "16", "--top-k", "4", "--ranks-per-node", "1",
                      "--max-nodes-per-token", "0,1,2", "--dispatch", "flat,hierarchical", "--out", str(out))
    expect(proc.returncode == 0, "moe failed", proc)
    with h5py.File(out) as f:
        cases = list(f["moe"].values())
        expect(len(cases) == 6, f"expected 6 cases, got {len(cases)}")
        rows_per_token = {}
        for g in cases:
            a = g.attrs
            M = int(a["max_nodes_per_token"])
            expect(a["check_passed"] == 1 and a["bytes_match"] == 1, f"{g.name}: check")
            expect((f"_maxnodes{M}" in g.name) == (M > 0), f"{g.name}: name and limit {M}")
            chosen = g["tensor_chosen_expert"][()].astype(int).reshape(4, TOKENS, 4)
            used = max(len(set((chosen[r, t] // 4).tolist())) for r in range(4) for t in range(TOKENS))
            expect(used == int(a["most_nodes_per_token"]), f"{g.name}: most nodes {a['most_nodes_per_token']} vs {used}")
            if M:
                expect(used <= M, f"{g.name}: a token used {used} nodes, limit {M}")
            key = (M, a["dispatch"])
            rows_per_token[key] = float(a["hier_inter_node_rows_per_token"])
        for M in (0, 1, 2):
            expect(rows_per_token[(M, "flat")] == rows_per_token[(M, "hierarchical")], f"M {M}: routing differs")
        expect(rows_per_token[(1, "flat")] < rows_per_token[(2, "flat")] < rows_per_token[(0, "flat")],
               f"cross-node rows per token do not fall with the limit: {rows_per_token}")


def scenario_redundant(env: Env) -> None:
    """--redundant-experts 0,4 under hot and zipf skew, flat and hierarchical: the 4 most loaded
    experts get a second replica on another rank, rank loads follow the placement, outputs and
    gradients equal the unreplicated case's, the replicas' weight-gradient all-reduce is
    counted."""
    out = env.workdir / "moe_redundant.h5"
    proc = env.mpirun(4, "moe", *SMALL, "--skew", "hot,zipf", "--redundant-experts", "0,4",
                      "--dispatch", "flat,hierarchical", "--ranks-per-node", "2", "--out", str(out))
    expect(proc.returncode == 0, "moe failed", proc)
    with h5py.File(out) as f:
        cases = f["moe"]
        red = [g for g in cases.values() if "_red4" in g.name]
        expect(len(red) == 4 and len(cases) == 8, f"{len(cases)} cases")
        for g in red:
            a = g.attrs
            name = g.name
            base = cases[name.rsplit("/", 1)[1].replace("_red4", "")]
            for c in (g, base):
                expect(c.attrs["check_passed"] == 1 and c.attrs["bytes_match"] == 1, f"{c.name}: check")
            E, h, d_ff = int(a["experts"]), int(a["h"]), int(a["d_ff"])
            load = g["expert_load_routed"][()].ravel().astype(float)
            slots = g["slot_expert"][()].ravel()
            per = len(slots) // 4
            hottest = sorted(range(E), key=lambda e: (-load[e], e))[:4]
            counts = np.bincount(slots, minlength=E)
            expect(all(counts[e] == (2 if e in hottest else 1) for e in range(E)), f"{name}: replicas {counts}")
            for r in range(4):
                held = slots[r * per:(r + 1) * per]
                expect(len(set(held)) == per, f"{name}: rank {r} holds an expert twice: {held}")
            # Rank loads: the block placement's and EPLB's from the loads, and what was received.
            block = np.array([load[r * (E // 4):(r + 1) * (E // 4)].sum() for r in range(4)])
            eplb = np.array([sum(load[e] / counts[e] for e in slots[r * per:(r + 1) * per]) for r in range(4)])
            expect(np.isclose(a["block_rank_load_max_over_mean"], block.max() / block.mean()), f"{name}: block load")
            expect(np.isclose(a["pred_rank_load_max_over_mean"], eplb.max() / eplb.mean()), f"{name}: EPLB load")
            got = g["rank_load"][()].ravel()
            expect(np.abs(got - eplb).max() <= 4 * per, f"{name}: received rows {got} vs the placement's {eplb}")
            expect(eplb.max() < block.max(), f"{name}: EPLB's busiest rank {eplb.max()} not below {block.max()}")
            # Same layer: output and gradients; each slot's weight gradient is its expert's.
            for t in ("output", "grad_input", "grad_router", "grad_gate"):
                x, y = g[f"tensor_{t}"][()], base[f"tensor_{t}"][()]
                expect(np.allclose(x, y, rtol=1e-12, atol=1e-12 * np.abs(y).max()), f"{name}: {t} differs")
            w1c = 2 * d_ff
            for t, size in (("grad_w1", h * w1c), ("grad_w2", d_ff * h)):
                x = g[f"tensor_{t}"][()].reshape(4 * per, size)
                y = base[f"tensor_{t}"][()].reshape(E, size)
                for s_, e in enumerate(slots):
                    expect(np.allclose(x[s_], y[e], rtol=1e-12, atol=1e-12 * np.abs(y[e]).max()),
                           f"{name}: slot {s_} (expert {e}) {t}")
            # Backward control: the routed counts' all-gather plus each held replica's gradients.
            ctrl = g["bwd_control_bytes"][()].ravel()
            for r in range(4):
                mine = [e for e in slots[r * per:(r + 1) * per] if counts[e] == 2]
                want = 3 * E * 8 + len(mine) * (h * w1c + d_ff * h) * 8
                expect(ctrl[r] == want, f"{name}: rank {r} backward control {ctrl[r]} != {want}")
            expect(np.array_equal(g["bytes_sent"][()].ravel(), g["moe_bytes_sent"][()].ravel()),
                   f"{name}: bytes_sent != moe_bytes_sent")
        print(f"  ok: {len(red)} cases with redundant experts")


def scenario_groups(env: Env) -> None:
    """Two EP groups of 2 on 4 ranks, each cut into 2 nodes of 1: every rank's rail and node
    stay inside its group."""
    out = env.workdir / "moe_nodes_groups.h5"
    proc = env.mpirun(4, "moe", *SMALL, "--ep", "2", "--dispatch", "hierarchical", "--ranks-per-node", "1",
                      "--out", str(out))
    expect(proc.returncode == 0, "moe failed", proc)
    with h5py.File(out) as f:
        (g,) = f["moe"].values()
        expect(g.attrs["check_passed"] == 1 and g.attrs["bytes_match"] == 1, f"{g.name}: check")
        chosen, kept = g["tensor_chosen_expert"][()].astype(int), g["tensor_kept"][()].astype(bool)
        got = g["level_bytes"][()].reshape(4, 16)
        for grp in range(2):
            sl = slice(2 * grp, 2 * grp + 2)
            want = recount_levels(chosen[sl], kept[sl], int(g.attrs["experts"]), 2, 1, int(g.attrs["h"]) * 8)
            expect(np.array_equal(got[sl], want), f"group {grp}: level bytes {got[sl]} != {want}")


def scenario_bad_input(env: Env) -> None:
    cases = {
        "P not dividing N_e": (["--ranks-per-node", "3"], "--ranks-per-node 3"),
        "P < 0": (["--ranks-per-node", "-1"], "--ranks-per-node"),
        "unknown dispatch": (["--dispatch", "ring"], "--dispatch: unknown dispatch 'ring'"),
        "M above the nodes": (["--ranks-per-node", "2", "--max-nodes-per-token", "3"], "must be in [1, 2]"),
        "M leaving fewer than k": (["--ranks-per-node", "1", "--top-k", "4", "--max-nodes-per-token", "1"],
                                   "leaves fewer than k = 4"),
        "M not a count": (["--max-nodes-per-token", "1.5"], "--max-nodes-per-token"),
        "R above E": (["--redundant-experts", "9"], "--redundant-experts 9 must be in"),
        "E + R not dividing": (["--redundant-experts", "3"], "do not divide over N_e = 4"),
        "R with a capacity": (["--redundant-experts", "4", "--capacity-factor", "1"], "needs dropless"),
    }
    small = ["--tokens", "8", "--hidden", "8", "--ffn-hidden", "8"]
    expect_refused(env, "moe", {what: ([*small, *args], needle) for what, (args, needle) in cases.items()})


SCENARIOS = {
    "moe_hier_2x2": lambda e: scenario_hierarchical(e, 2),
    "moe_hier_1x4": lambda e: scenario_hierarchical(e, 4),
    "moe_hier_4x1": lambda e: scenario_hierarchical(e, 1),
    "moe_hier_groups": scenario_groups,
    "moe_node_limited": scenario_node_limited,
    "moe_redundant": scenario_redundant,
    "moe_hier_bad_input": scenario_bad_input,
}


def main() -> None:
    run_cli(SCENARIOS, __doc__)


if __name__ == "__main__":
    main()
