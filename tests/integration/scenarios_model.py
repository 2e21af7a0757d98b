#!/usr/bin/env python3
"""Integration scenarios of the model executable: its backward and training-step figures."""
from __future__ import annotations

from run_scenario import Env, expect, model_lines, model_run, run_cli


def scenario_model_backward(env: Env) -> None:
    """`model` prints the backward and fwd+bwd figures of METHODS.md section 5 for sp, ring and
    Ulysses, recomputed here from the formulas, and refuses bad --grad-dtype / --flops-bwd."""
    s, b, h, a, kv, t, n_c, L = 4096, 2, 1024, 16, 4, 4, 4, 3
    e, e_grad, F, F_b, W = 2, 4, 1e12, 4e11, 1e10
    g, c = a / kv, s / n_c
    proc = model_run(env, "--seq", str(s), "--batch", str(b), "--hidden", str(h), "--heads", str(a),
                     "--kv-heads", str(kv), "--tp", str(t), "--cp", str(n_c), "--layers", str(L), "--causal",
                     "-F", f"{F:g}", "--flops-bwd", f"{F_b:g}", "-W", f"{W:g}", "--grad-dtype", "fp32")
    expect(proc.returncode == 0, "model failed", proc)
    got = model_lines(proc.stdout)

    def close(block: str, label: str, want: float) -> None:
        key = (block, label)
        expect(key in got, f"model printed no line '{label}' under {block}", proc)
        value = float(got[key])
        expect(abs(value - want) <= 1e-5 * abs(want), f"{label}: model {value}, expected {want}", proc)

    # TP/SP: n = s b h e bytes; TP 2 + 2 all-reduces, SP 2 + 2 RS and 2 + 4 AG (the LayerNorm
    # outputs re-gathered for the weight gradients); the LayerNorm gradients' all-reduce.
    n, f = s * b * h * e, (t - 1) / t
    for label, counts in (("TP all-reduces per layer: fwd, bwd, fwd+bwd", "2, 2, 4"),
                          ("SP reduce-scatters per layer: fwd, bwd, fwd+bwd", "2, 2, 4"),
                          ("SP all-gathers per layer: fwd, bwd, fwd+bwd", "2, 4, 6")):
        expect(got.get(("Megatron", label)) == counts, f"{label}: {got.get(('Megatron', label))}", proc)
    close("Megatron", "TP comm per layer bwd per rank (2 all-reduces)", 4 * f * n)
    close("Megatron", "TP comm per layer fwd+bwd per rank: 8(t-1)/t sbhe", 8 * f * n)
    close("Megatron", "SP comm per layer bwd per rank (2 RS + 4 AG)", 6 * f * n)
    close("Megatron", "SP comm per layer fwd+bwd per rank: 10(t-1)/t sbhe", 10 * f * n)
    close("Megatron", "SP LayerNorm grads all-reduce per layer (4h elems)", 2 * f * 4 * h * e)
    matmul, attention = 24 * s * b * h * h, 4 * s * s * b * h / 2  # forward, causal
    close("Megatron", "layer FLOPs per rank bwd (GEMMs 2x, attention 2.5x)", (2 * matmul + 2.5 * attention) / t)
    compute = (matmul + attention) / t / F
    compute_bwd = 2 * matmul / t / F + 2.5 * attention / t / F_b
    close("plan TP/SP", "compute per layer bwd per rank (GEMMs F, attn F_b)", compute_bwd)
    close("plan TP/SP", "model train step per rank, TP+SP, no overlap",
          L * (compute + compute_bwd + (10 * f * n + 2 * f * 4 * h * e) / W))
    close("plan TP/SP", "model comm per rank per step, fwd+bwd, TP", L * 8 * f * n)

    # Ring: K/V (N_c - 1 hops) and their fp32 dK/dV partial sums (N_c hops), per rank.
    kv_round, dkv_round = 2 * c * h * b * e / g, 2 * c * h * b * e_grad / g
    expect(f"F_b={F_b:g} FLOP/s, dK/dV partial sums in fp32" in proc.stdout, "no backward heading", proc)
    close("Ring", "backward FLOPs per round 10c^2hb", 10 * c * c * h * b)
    close("Ring", "backward bytes per round (K, V and dK, dV)", kv_round + dkv_round)
    close("Ring", "backward compute time per round at F_b", 10 * c * c * h * b / 2 / F_b)
    bwd_layer = (n_c - 1) * kv_round + n_c * dkv_round
    close("Ring", "bytes per layer bwd per rank (N_c-1) KV + N_c dKV", bwd_layer)
    close("Ring", "bytes per layer fwd+bwd per rank", (n_c - 1) * kv_round + bwd_layer)
    c_min = 2 * (e + e_grad) / (5 * g) * F_b / W  # causal balanced: x2
    close("Ring", "minimum block size for bwd overlap (e+e_g)F_b/(5gW)", c_min)
    expect(got.get(("Ring", "backward overlap holds at this c?")) == ("yes" if c >= c_min else "NO: transfer exposed"),
           "backward overlap verdict", proc)
    close("Ring", "backward memory per rank (Q,O,dO,dQ,2 K/V,3 dK/dV)",
          c * h * b * (3 * e + e_grad) + c * h * b / g * (4 * e + 6 * e_grad))
    close("Ring", "all-gather variant: bytes per layer bwd (RS dK, dV)", (n_c - 1) / n_c * 2 * s * h * b * e_grad / g)
    comp_b, xfer_b = 10 * c * c * h * b / 2 / F_b, (kv_round + dkv_round) / W
    ring_bwd = comp_b + (n_c - 1) * max(comp_b, xfer_b) + dkv_round / W
    close("plan ring", "attention per layer bwd (last dK/dV hop exposed)", ring_bwd)
    close("plan ring", "model ring bytes per rank, fwd+bwd", L * ((n_c - 1) * kv_round + bwd_layer))

    # Ulysses: dO in, dQ, dK, dV out: the forward's bytes.
    a2a = b * (n_c - 1) / n_c * s * h * e / n_c * (2 + 2 / g)
    close("DeepSpeed-Ulysses", "bytes per layer bwd per rank (dO in; dQ, dK, dV out)", a2a)
    close("DeepSpeed-Ulysses", "bytes per layer fwd+bwd per rank", 2 * a2a)
    close("plan Ulysses", "model all-to-all and ring bytes per rank, fwd+bwd", L * 2 * a2a)
    close("plan Ulysses", "attention bwd per layer per rank at F_b (with ring)", 10 * s * s * (h / n_c) * b / 2 / F_b)

    # A hybrid, u = 2: all-to-alls over s u/N_c tokens in groups of 2; a ring of 2 groups moving
    # K/V blocks of those tokens for half the K/V heads, with bf16 partial sums.
    proc = model_run(env, "--section", "ulysses", "--seq", str(s), "--batch", str(b), "--hidden", str(h),
                     "--heads", str(a), "--kv-heads", str(kv), "--cp", str(n_c), "--ulysses-degree", "2",
                     "--grad-dtype", "bf16")
    expect(proc.returncode == 0, "model (hybrid) failed", proc)
    got = model_lines(proc.stdout)
    tokens, hh = s * 2 / n_c, h / 2
    a2a = b * 0.5 * tokens * h * e / 2 * (2 + 2 / g)
    ring = 1 * 2 * tokens * hh * b * e / g + 2 * 2 * tokens * hh * b * 2 / g
    close("DeepSpeed-Ulysses", "all-to-all bytes per layer bwd per rank (group of u)", a2a)
    close("DeepSpeed-Ulysses", "ring bytes per layer bwd per rank (K/V and dK/dV)", ring)
    close("DeepSpeed-Ulysses", "bytes per layer bwd per rank, both parts", a2a + ring)

    # --flops-bwd omitted: F_b = F.
    proc = model_run(env, "--section", "ring", "-F", "2e12")
    expect(proc.returncode == 0 and "backward: F_b=2e+12 FLOP/s" in proc.stdout, "F_b does not default to F", proc)
    proc = model_run(env, "--help")
    expect(proc.returncode == 0, "--help failed", proc)
    for flag in ("--grad-dtype", "--flops-bwd", "--flops", "--bw", "--dtype", "--layers", "--causal"):
        expect(flag in proc.stdout, f"--help does not explain {flag}", proc)
    for what, args, needle in (("unknown grad dtype", ["--grad-dtype", "fp16"], "--grad-dtype fp16"),
                               ("zero backward rate", ["--flops-bwd", "0"], "--flops-bwd 0 must be > 0"),
                               ("negative backward rate", ["--section", "ring", "--flops-bwd", "-1e12"], "must be > 0"),
                               ("backward rate not a number", ["--flops-bwd", "fast"], "--flops-bwd")):
        proc = model_run(env, *args)
        expect(proc.returncode == 2, f"{what}: exit status {proc.returncode}, expected 2", proc)
        expect(proc.stdout == "", f"{what}: predictions printed", proc)
        expect(proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: model: "),
               f"{what}: expected one 'error: model:' line", proc)
        expect(needle in proc.stderr, f"{what}: message lacks '{needle}'", proc)
        print(f"  ok: {what}")


SCENARIOS = {"model_backward": scenario_model_backward}

if __name__ == "__main__":
    run_cli(SCENARIOS, __doc__)
