"""The transformer layer in numpy (dropout 0), forward and backward: an outside reference for
the sp_tp layer and for the mesh's composed block, recomputed from their saved input, weights
and output gradient.

Rows are token-major (row = position * batch + sequence). The QKV weight holds the query heads'
columns, then the K heads', then the V heads' (GQA: query head j uses K/V head j // (a / n_kv)).
"""
from __future__ import annotations

import numpy as np

K0, K1 = np.sqrt(2 / np.pi), 0.044715


def layernorm(x, g, b, eps=1e-5):
    mu = x.mean(axis=1, keepdims=True)
    rstd = 1 / np.sqrt(((x - mu) ** 2).mean(axis=1, keepdims=True) + eps)
    return (x - mu) * rstd * g + b


def layernorm_backward(x, g, dy, eps=1e-5):
    mu = x.mean(axis=1, keepdims=True)
    rstd = 1 / np.sqrt(((x - mu) ** 2).mean(axis=1, keepdims=True) + eps)
    xhat = (x - mu) * rstd
    dg_ = dy * g
    dx = rstd * (dg_ - dg_.mean(axis=1, keepdims=True) - xhat * (dg_ * xhat).mean(axis=1, keepdims=True))
    return dx, (dy * xhat).sum(axis=0), dy.sum(axis=0)


def gelu(x):
    return 0.5 * x * (1 + np.tanh(K0 * (x + K1 * x ** 3)))


def gelu_grad(x):
    th = np.tanh(K0 * (x + K1 * x ** 3))
    return 0.5 * (1 + th) + 0.5 * x * (1 - th ** 2) * K0 * (1 + 3 * K1 * x ** 2)


def shapes(h: int, ff: int, a: int, kv: int | None = None) -> dict[str, tuple[int, ...]]:
    """The weights' global shapes, by the names the benchmarks save them under."""
    kv = kv or a
    d = h // a
    return {"ln1_gamma": (h,), "ln1_beta": (h,), "ln2_gamma": (h,), "ln2_beta": (h,),
            "w_qkv": (h, (a + 2 * kv) * d), "w_out": (h, h), "w_fc1": (h, ff), "w_fc2": (ff, h)}


def reference(x, w, dy, s: int, b: int, a: int, kv: int | None = None, causal: bool = True):
    """Output and gradients of sum(dy * layer(x)) for s positions of b sequences, a query heads
    and kv K/V heads (default a): (y, {"input": dx, <weight name>: its gradient})."""
    kv = kv or a
    h = x.shape[1]
    d, g_size = h // a, a // kv
    scale = 1 / np.sqrt(d)
    mask = np.tril(np.ones((s, s), dtype=bool)) if causal else np.ones((s, s), dtype=bool)
    q_cols = [slice(j * d, (j + 1) * d) for j in range(a)]
    k_cols = [slice(a * d + j * d, a * d + (j + 1) * d) for j in range(kv)]
    v_cols = [slice((a + kv) * d + j * d, (a + kv) * d + (j + 1) * d) for j in range(kv)]
    ln1 = layernorm(x, w["ln1_gamma"], w["ln1_beta"])
    qkv = ln1 @ w["w_qkv"]
    ctx = np.zeros((s * b, h))
    probs = {}
    for bi in range(b):
        for j in range(a):
            q = qkv[bi::b, q_cols[j]]
            k, v = qkv[bi::b, k_cols[j // g_size]], qkv[bi::b, v_cols[j // g_size]]
            z = np.where(mask, q @ k.T * scale, -np.inf)
            p = np.exp(z - z.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
            probs[bi, j] = p
            ctx[bi::b, j * d:(j + 1) * d] = p @ v
    h1 = x + ctx @ w["w_out"]
    ln2 = layernorm(h1, w["ln2_gamma"], w["ln2_beta"])
    f = ln2 @ w["w_fc1"]
    gl = gelu(f)
    y = h1 + gl @ w["w_fc2"]
    g = {"w_fc2": gl.T @ dy}
    df = (dy @ w["w_fc2"].T) * gelu_grad(f)
    g["w_fc1"] = ln2.T @ df
    dh1, g["ln2_gamma"], g["ln2_beta"] = layernorm_backward(h1, w["ln2_gamma"], df @ w["w_fc1"].T)
    dh1 = dh1 + dy
    g["w_out"] = ctx.T @ dh1
    dctx = dh1 @ w["w_out"].T
    dqkv = np.zeros_like(qkv)
    for bi in range(b):
        for j in range(a):
            kc, vc = k_cols[j // g_size], v_cols[j // g_size]
            q, k, v = qkv[bi::b, q_cols[j]], qkv[bi::b, kc], qkv[bi::b, vc]
            p, do = probs[bi, j], dctx[bi::b, j * d:(j + 1) * d]
            dp = do @ v.T
            ds = p * (dp - (dp * p).sum(axis=1, keepdims=True))
            dqkv[bi::b, q_cols[j]] = scale * ds @ k
            dqkv[bi::b, kc] += scale * ds.T @ q
            dqkv[bi::b, vc] += p.T @ do
    g["w_qkv"] = ln1.T @ dqkv
    dx, g["ln1_gamma"], g["ln1_beta"] = layernorm_backward(x, w["ln1_gamma"], dqkv @ w["w_qkv"].T)
    g["input"] = dx + dh1
    return y, g
