#!/usr/bin/env python3
"""MoE on simulated clusters with modeled compute: the SMPI build (`make sim`, build-sim/bin) run
by scripts/envs/simulate.py under SimGrid's smpirun, one scenario per ctest test (helpers from
scenarios_sim.py).

--bin-dir is the SMPI build's bin folder; a missing SMPI build skips (exit 77) with a message.
"""
from __future__ import annotations

import math
import sys

import numpy as np

from run_scenario import Env, expect, run_cli
from scenarios_sim import check_sim_attrs, run_ok, sampled_memory

M64 = (1 << 64) - 1


def mix64(z: np.ndarray) -> np.ndarray:
    """kernels/core/counter_rng.hpp's splitmix64 finaliser on uint64 arrays (wrapping)."""
    z = z + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def drawn_logits(seed: int, tokens: np.ndarray, experts: int) -> np.ndarray:
    """bench/moe's modeled router logits [tokens, experts]: counter_hash(seed ^ (6 << 56), global
    token, expert) made an Irwin-Hall sum of its four 16-bit quarters, to unit variance, float32."""
    s = mix64(np.array([(seed ^ (6 << 56)) & M64], dtype=np.uint64))
    row = mix64(s ^ tokens.astype(np.uint64))
    bits = mix64(row[:, None] ^ np.arange(experts, dtype=np.uint64)[None, :])
    total = np.zeros(bits.shape)
    for i in range(4):  # in the C++ order: the sum's rounding is the same
        total = total + (((bits >> np.uint64(16 * i)) & np.uint64(0xFFFF)).astype(np.float64) + 0.5) * 2.0**-16
    return ((total - 2.0) * math.sqrt(3.0)).astype(np.float32)


def zipf_bias(seed: int, experts: int, alpha: float) -> np.ndarray:
    """moe_config.cpp's skew_logit_bias for zipf: log(E p_r) over a seeded permutation."""
    perm = list(range(experts))
    tag = np.array([(seed ^ 0x5E3D0B1A5) & M64], dtype=np.uint64)
    for i in range(experts - 1, 0, -1):
        h = mix64(mix64(mix64(tag) ^ np.uint64(1)) ^ np.uint64(i))[0]
        j = int(h) % (i + 1)
        perm[i], perm[j] = perm[j], perm[i]
    w = [(r + 1.0) ** -alpha for r in range(experts)]  # C pow, summed in order as the C++
    z = 0.0
    for v in w:
        z += v
    bias = np.zeros(experts, dtype=np.float32)
    for r in range(experts):
        bias[perm[r]] = np.float32(math.log(experts * w[r] / z))
    return bias


def route(logits: np.ndarray, bias: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """router_topk (kernels/moe/moe_cpu.cpp) without selection bias: softmax of logits + bias in
    double (glibc's exp, sequential sums, as the C++), the k highest (ties: lower expert), gates
    renormalised over them as float32."""
    z = logits.astype(np.float64) + bias.astype(np.float64)[None, :]
    z = z - z.max(axis=1, keepdims=True)
    p = np.array([math.exp(v) for v in z.ravel()]).reshape(z.shape)
    p = p / np.cumsum(p, axis=1)[:, -1:]
    order = np.lexsort((np.broadcast_to(np.arange(z.shape[1]), z.shape), -p), axis=1)[:, :k]
    chosen_p = np.take_along_axis(p, order, axis=1)
    chosen_sum = np.zeros(len(p))
    for s in range(k):
        chosen_sum = chosen_sum + chosen_p[:, s]
    return order, (chosen_p / chosen_sum[:, None]).astype(np.float32)


def scenario_modeled_memory(env: Env) -> None:
    """Modeled MoE holds no tensor values: on 16 ranks of a 2-node fat tree, a layer (forward and
    forward + backward, dropless and capacity-limited, zipf-skewed) whose tensors the allocator
    counts at gigabytes runs in a small fraction of that (peak PSS sampled by simulate.py), while
    its routing, drawn from the seeded counter RNG instead of computed from x, is exact: the
    expert loads, the drops and every rank's dispatch and combine bytes equal a numpy replay of
    the same draws, and every rank sends exactly the bytes its routing implies."""
    ranks, T, h, ff, E, k, alpha, cf = 16, 1024, 4096, 1024, 64, 4, 1.2, 1.25
    out = env.workdir / "moe_mem.h5"
    with run_ok(env, "moe", out, "--platform", "fattree", "--nodes", "2", "--ranks", str(ranks),
                "--sim-flops", "5e14",
                flags=["--tokens", str(T), "--hidden", str(h), "--ffn-hidden", str(ff), "--experts", str(E),
                       "--top-k", str(k), "--skew", "zipf", "--alpha", str(alpha), "--capacity-factor",
                       f"0,{cf}", "--dtype", "bf16", "--pass", "fwd,fwd_bwd", "--iters", "1",
                       "--warmup", "1"]) as f:
        check_sim_attrs(f, "fattree", "modeled", ranks)
        expect(f.attrs["sim_tensor_data"].startswith("placeholders"), "tensor data not recorded")
        seed = int(f.attrs["seed"])
        # The numpy replay: every rank's tokens (global index = rank T + t), routed.
        chosen, gates = route(drawn_logits(seed, np.arange(ranks * T), E), zipf_bias(seed, E, alpha), k)
        chosen, gates = chosen.ravel(), gates.ravel()  # copies in global order (token, slot)
        owner, source = chosen // (E // ranks), np.repeat(np.arange(ranks), T * k)
        routed = np.bincount(chosen, minlength=E)
        row = h * 2  # bf16
        tensors, cases = 0, 0
        for name, g in f["moe"].items():
            a = g.attrs
            cases += 1
            expect(a["check_passed"] == -1 and "modeled" in a["check_note"], f"{name}: check not skipped")
            expect(str(a["router_logits"]).startswith("drawn"), f"{name}: router_logits {a['router_logits']!r}")
            sent, implied = g["moe_bytes_sent"][()], g["moe_bytes_implied"][()]
            expect(sent.min() > 0 and np.array_equal(sent, implied), f"{name}: bytes sent {sent} != implied {implied}")
            expect(a["bytes_match"] == 1, f"{name}: bytes_match")
            expect(np.array_equal(g["expert_load_routed"][()].ravel(), routed),
                   f"{name}: routed loads {g['expert_load_routed'][()].ravel()} != the replay's {routed}")
            capacity = int(a["capacity"])
            keep = np.ones(len(chosen), dtype=bool)
            if a["capacity_factor"] > 0:
                expect(capacity == math.ceil(cf * k * T * ranks / E), f"{name}: capacity {capacity}")
                expect("owner" in str(a["modeled_drops"]), f"{name}: modeled drops not described")
                # capacity_keep: per expert the highest gates first, ties by global copy index.
                order = np.lexsort((np.arange(len(chosen)), -gates, chosen))
                rank_in_expert = np.empty(len(chosen), dtype=np.int64)
                starts = np.searchsorted(chosen[order], np.arange(E))
                rank_in_expert[order] = np.arange(len(chosen)) - starts[chosen[order]]
                keep = rank_in_expert < capacity
                expect(a["dropped_copies"] == (~keep).sum() > 0, f"{name}: dropped {a['dropped_copies']}, "
                       f"the replay drops {(~keep).sum()}")
            else:
                expect(capacity == -1 and a["dropped_copies"] == 0, f"{name}: dropless dropped copies")
            expect(np.array_equal(g["expert_load"][()].ravel(), np.bincount(chosen[keep], minlength=E)),
                   f"{name}: kept loads differ from the replay's")
            remote = keep & (owner != source)
            dispatch = np.bincount(source[remote], minlength=ranks) * row
            combine = np.bincount(owner[remote], minlength=ranks) * row
            expect(np.array_equal(g["dispatch_bytes"][()].ravel(), dispatch),
                   f"{name}: dispatch bytes {g['dispatch_bytes'][()].ravel()} != the replay's {dispatch}")
            expect(np.array_equal(g["combine_bytes"][()].ravel(), combine), f"{name}: combine bytes")
            expect(a["expert_load_routed_max_over_mean"] > 1.5 and a["aux_loss"] > a["pred_aux_loss"],
                   f"{name}: zipf skew does not show: {a['expert_load_routed_max_over_mean']}, {a['aux_loss']}")
            # The busiest rank's expert phase lasts its FLOPs at F, but for SimGrid's surf/precision
            # (1e-9 s): an action ending that close after another event ends with it.
            want, got = a["expert_flops_per_rank_max"] / 5e14, a["phase_expert_median_s"]
            expect(abs(got - want) <= 2 * (E // ranks) * 1e-9, f"{name}: expert phase {got} s, its FLOPs at F {want} s")
            expect(a["phase_dispatch_median_s"] > 0 and a["phase_combine_median_s"] > 0, f"{name}: no a2a time")
            tensors = max(tensors, int(g["allocated_peak_bytes"][()].sum()))
        expect(cases == 4, f"{cases} cases, expected 4")
    summary = sampled_memory(out)
    pss, rss = summary["peak_pss_bytes"], summary["peak_rss_bytes"]
    print(f"  tensors {tensors / 2**30:.2f} GiB on {ranks} ranks; the run's peak PSS {pss / 2**30:.2f} GiB, "
          f"RSS {rss / 2**30:.2f} GiB ({summary['memory_samples']} samples), {summary['wall_s']:.1f} s")
    expect(tensors > 2**31, f"the case is too small to show anything: {tensors} B")
    expect(0 < pss < 0.1 * tensors, f"peak PSS {pss} B for {tensors} B of tensors")


def scenario_hierarchical(env: Env) -> None:
    """Flat against hierarchical dispatch on 16 simulated ranks (2 nodes of 8, nvlink-ib: 50 GB/s
    a NIC, 450 GB/s NVLink), modeled compute, forward and backward: bytes equal the routing's
    per level, a token crosses nodes once in hierarchical dispatch, and the simulated dispatch
    times follow the links: flat about its bytes across over 50 GB/s, hierarchical its bytes
    across over 50 GB/s plus its fan-out over 450 GB/s (the two stages run one after the
    other), so hierarchical is the faster (modeled time: the same on any host)."""
    ranks, T, h, E, k = 16, 1024, 4096, 64, 4
    out = env.workdir / "moe_hier.h5"
    with run_ok(env, "moe", out, "--platform", "fattree", "--nodes", "2", "--ranks", str(ranks),
                "--sim-flops", "5e14",
                flags=["--tokens", str(T), "--hidden", str(h), "--ffn-hidden", "1024", "--experts", str(E),
                       "--top-k", str(k), "--dtype", "bf16", "--dispatch", "flat,hierarchical", "--ranks-per-node",
                       "8", "--pass", "fwd,fwd_bwd", "--iters", "1", "--warmup", "0"]) as f:
        check_sim_attrs(f, "fattree", "modeled", ranks)
        cases = {(g.attrs["dispatch"], str(g.attrs.get("pass", "fwd"))): g for g in f["moe"].values()}
        expect(len(cases) == 4, f"cases {list(cases)}")
        for g in cases.values():
            expect(g.attrs["bytes_match"] == 1, f"{g.name}: bytes differ from the routing's")
        flat, hier = cases[("flat", "fwd")], cases[("hierarchical", "fwd")]
        expect(hier.attrs["hier_inter_node_rows_per_token"] <= 1, "a token crossed to the other node twice")
        across_f = flat.attrs["dispatch_inter_node_bytes_per_rank"]
        across_h = hier.attrs["dispatch_inter_node_bytes_per_rank"]
        inside_h = hier.attrs["dispatch_intra_node_bytes_per_rank"]
        t_f, t_h = flat.attrs["phase_dispatch_median_s"], hier.attrs["phase_dispatch_median_s"]
        model_f, model_h = across_f / 50e9, across_h / 50e9 + inside_h / 450e9
        expect(0.9 < t_f / model_f < 1.15, f"flat dispatch {t_f:.3g} s against {model_f:.3g} s")
        expect(0.9 < t_h / model_h < 1.15, f"hierarchical dispatch {t_h:.3g} s against {model_h:.3g} s")
        expect(t_h < t_f, f"hierarchical dispatch {t_h:.3g} s is not below flat's {t_f:.3g} s")
        print(f"  flat {t_f * 1e3:.2f} ms ({across_f / 1e6:.1f} MB across), hierarchical {t_h * 1e3:.2f} ms "
              f"({across_h / 1e6:.1f} MB across, {inside_h / 1e6:.1f} MB inside)")


def scenario_mesh_two_batch(env: Env) -> None:
    """mesh --moe-overlap none,two-batch on 4 simulated ranks (flat links of 2 GB/s, modeled
    compute), with CP 1 and with CP 2 (the ring; each micro-batch's attention over the CP group):
    with the block's all-to-all A comparable to its compute X, the two-batch step is shorter than
    the step without it (the same run's `none` case and the case's own), and within 10% of the
    critical path of its schedule on the pieces it timed alone."""
    for cp in ("1", "2"):
        out = env.workdir / f"mesh_tbo_cp{cp}.h5"
        with run_ok(env, "mesh", out, "--platform", "flat", "--ranks", "4", "--bw", "2e9", "--lat", "1e-6",
                    "--sim-flops", "5e13",
                    flags=["--seq", "1024", "--batch", "2", "--hidden", "1024", "--heads", "8", "--ffn-hidden",
                           "2048", "--experts", "8", "--cp", cp, "--pass", "fwd_bwd", "--dtype", "bf16",
                           "--moe-overlap", "none,two-batch", "--iters", "1", "--warmup", "0"]) as f:
            cases = {str(g.attrs["moe_overlap"]): g.attrs for g in f["mesh"].values()}
            none, tbo = cases["none"], cases["two-batch"]
            a, x, step, pred = (tbo[k] for k in ("overlap_a2a_s", "overlap_compute_s", "time_median_s",
                                                 "pred_step_s"))
            expect(int(tbo["cp"]) == int(cp) and (tbo["cp_bytes_per_rank"] > 0) == (cp != "1"), f"CP {cp}")
            expect(0.3 <= a / x <= 3, f"CP {cp}: A {a:.4g} s is not comparable to X {x:.4g} s")
            expect(step < none["time_median_s"] and step < tbo["step_no_overlap_s"],
                   f"CP {cp}: two-batch step {step:.4g} s, without {none['time_median_s']:.4g} s "
                   f"(its own {tbo['step_no_overlap_s']:.4g} s)")
            expect(abs(step - pred) <= 0.1 * pred, f"CP {cp}: step {step:.4g} s, critical path {pred:.4g} s")
            print(f"  ok, CP {cp}: A {a * 1e3:.3f} ms, X {x * 1e3:.3f} ms; step {step * 1e3:.3f} ms against "
                  f"{none['time_median_s'] * 1e3:.3f} ms without, critical path {pred * 1e3:.3f} ms")


SCENARIOS = {
    "sim_moe_modeled_memory": scenario_modeled_memory,
    "sim_moe_hierarchical": scenario_hierarchical,
    "sim_mesh_two_batch": scenario_mesh_two_batch,
}


if __name__ == "__main__":
    sys.exit(run_cli(SCENARIOS, __doc__))
