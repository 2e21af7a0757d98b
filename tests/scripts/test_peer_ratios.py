"""scripts/peers/peer_ratios.py and scripts/peers/torch_peer.py without a GPU: ratios from synthetic
kernel_bench / peer JSON and an sp_tp layer file, and the peer's shapes and FLOP counts
matching kernel_bench's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from scripts.peers import peer_ratios
from scripts.peers import torch_peer
from synthetic_results import run_script


def kernel_bench_json(path: Path) -> Path:
    rows = [("gemm_cuda/bf16/n4096", 700e12, "gemm_library=cublasLt 13.0.0"),
            ("attention_cuda/bf16/suite-flash/s4096_a32_kv32_d128_causal", 200e12, "attn_kernel=suite-flash"),
            ("attention_cuda/bf16/cudnn/s4096_a32_kv32_d128_causal", 500e12, "attn_kernel=cudnn"),
            ("attention_cuda/bf16/cudnn/s4096_a32_kv32_d128_causal", 520e12, "attn_kernel=cudnn"),
            ("attention_bwd_cuda/bf16/suite-flash/s4096_a32_kv32_d128_causal", 30e12, "attn_kernel=suite-flash"),
            ("attention_bwd_cuda/bf16/cudnn/s4096_a32_kv32_d128_causal", 300e12, "attn_kernel=cudnn")]
    bench = [{"name": n + "/manual_time", "run_name": n + "/manual_time", "run_type": "iteration",
              "FLOP/s": r, "label": lab} for n, r, lab in rows]
    path.write_text(json.dumps({"context": {}, "benchmarks": bench}))
    return path


def peer_json(path: Path) -> Path:
    cases = [{"kind": "gemm", "name": "gemm_cuda/bf16/n4096", "flop_per_s": 700e12, "median_s": 1e-3},
             {"kind": "attention", "backend": "flash", "name": "s4096_a32_kv32_d128_causal",
              "flop_per_s": 250e12, "median_s": 1e-3},
             {"kind": "attention", "backend": "cudnn", "name": "s4096_a32_kv32_d128_causal",
              "flop_per_s": 510e12, "median_s": 1e-3},
             {"kind": "attention", "backend": "cudnn", "name": "s8192_a16_kv16_d64_causal", "error": "no"},
             {"kind": "attention_bwd", "backend": "flash", "name": "s4096_a32_kv32_d128_causal",
              "flop_per_s": 150e12, "median_s": 1e-3},
             {"kind": "attention_bwd", "backend": "cudnn", "name": "s4096_a32_kv32_d128_causal",
              "flop_per_s": 400e12, "median_s": 1e-3},
             {"kind": "attention_bwd", "backend": "flash", "name": "s4096_a32_kv8_d128_causal", "error": "no"},
             {"kind": "layer", "backend": "flash", "dtype": "fp32", "s": 64, "b": 2, "h": 256, "heads": 4,
              "causal": 0, "median_s": 1.2e-3},
             {"kind": "layer", "backend": "cudnn", "dtype": "fp32", "s": 64, "b": 2, "h": 256, "heads": 4,
              "causal": 0, "median_s": 1.0e-3},
             {"kind": "layer_step", "backend": "flash", "dtype": "fp32", "s": 64, "b": 2, "h": 256,
              "heads": 4, "causal": 0, "median_s": 3.0e-3},
             {"kind": "layer_step", "backend": "cudnn", "dtype": "fp32", "s": 64, "b": 2, "h": 256,
              "heads": 4, "causal": 0, "median_s": 2.4e-3}]
    path.write_text(json.dumps({"info": {"torch_version": "2.11"}, "cases": cases}))
    return path


def test_case_key_strips_benchmark_suffixes() -> None:
    assert peer_ratios.case_key("attention_cuda/bf16/cudnn/s1_a1_kv1_d64_full/manual_time") == \
        "attention_cuda/bf16/cudnn/s1_a1_kv1_d64_full"
    assert peer_ratios.case_key("gemm_cuda/bf16/n8/iterations:3/manual_time") == "gemm_cuda/bf16/n8"


def test_ratios_from_json(tmp_path: Path) -> None:
    suite, labels = peer_ratios.read_kernel_bench(kernel_bench_json(tmp_path / "kb.json"))
    assert suite["attention_cuda/bf16/cudnn/s4096_a32_kv32_d128_causal"] == 510e12  # median of two
    assert labels["gemm_cuda/bf16/n4096"].startswith("gemm_library=")
    proc = run_script("peer_ratios.py", tmp_path / "kb.json", peer_json(tmp_path / "peer.json"))
    assert proc.returncode == 0, proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("s4096_a32_kv32_d128_causal"))
    assert line.split()[-2:] == ["0.80", "1.00"]  # 200/250 and 510/510
    gemm = next(ln for ln in proc.stdout.splitlines() if ln.startswith("gemm_cuda/bf16/n4096"))
    assert gemm.split()[-1] == "1.00"
    # The backward table, after its own header: attention_bwd_cuda against SDPA's backward.
    bwd = proc.stdout.split("Attention backward", 1)[1].splitlines()
    line = next(ln for ln in bwd if ln.startswith("s4096_a32_kv32_d128_causal"))
    assert line.split()[1:5] == ["30.0", "300.0", "150.0", "400.0"]
    assert line.split()[-2:] == ["0.20", "0.75"]  # 30/150 and 300/400
    assert not any(ln.startswith("s4096_a32_kv8_d128_causal") for ln in bwd)  # errors only


def test_layer_ratio(tmp_path: Path, results_writer) -> None:
    case = {"name": "layer_tp_fp32_s64_b2_h256_a4_ff1024_flash",
            "params": {"mode": "layer", "variant": "tp", "attention": "fused", "dtype": "fp32", "s": 64,
                       "b": 2, "h": 256, "heads": 4, "d_ff": 1024, "t": 1, "dropout": 0.1, "causal": 0},
            "attrs": {"check_passed": 1, "attn_kernel": "cpu-tiled"},
            "time_s": np.full((5, 1), 2e-3)}
    h5 = results_writer("layer.h5", "sp_tp", [case], world_size=1)
    proc = run_script("peer_ratios.py", tmp_path / "none.json", peer_json(tmp_path / "peer.json"),
                      "--layer", h5)
    assert proc.returncode == 0, proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("layer_tp_fp32"))
    assert line.split()[1] == "cpu-tiled"
    assert line.split()[-2:] == ["0.60", "0.50"]  # torch 1.2 ms and 1.0 ms against 2.0 ms


def test_layer_step_against_the_peers_step(tmp_path: Path, results_writer) -> None:
    """A fwd_bwd case is compared with PyTorch's forward + backward, never with its forward,
    and a forward case never with the step."""
    params = {"mode": "layer", "variant": "tp", "attention": "fused", "dtype": "fp32", "s": 64, "b": 2,
              "h": 256, "heads": 4, "d_ff": 1024, "t": 1, "dropout": 0.1, "causal": 0}
    fwd = {"name": "layer_tp_fp32_s64_b2_h256_a4_ff1024_flash", "params": params,
           "attrs": {"check_passed": 1, "attn_kernel": "cpu-tiled"}, "time_s": np.full((5, 1), 2e-3)}
    step = {"name": fwd["name"] + "_fwd_bwd", "params": {**params, "pass": "fwd_bwd"},
            "attrs": {"check_passed": 1, "attn_kernel": "cpu-tiled"}, "time_s": np.full((5, 1), 6e-3)}
    h5 = results_writer("layer.h5", "sp_tp", [fwd, step], world_size=1)
    proc = run_script("peer_ratios.py", tmp_path / "none.json", peer_json(tmp_path / "peer.json"),
                      "--layer", h5)
    assert proc.returncode == 0, proc.stderr
    forward, training = proc.stdout.split("Layer training step", 1)
    rows = [ln.split() for ln in forward.splitlines() if ln.startswith("layer_tp_fp32")]
    assert [r[0] for r in rows] == [fwd["name"]]
    rows = [ln.split() for ln in training.splitlines() if ln.startswith("layer_tp_fp32")]
    assert [r[0] for r in rows] == [step["name"]]
    assert rows[0][-2:] == ["0.50", "0.40"]  # torch 3.0 ms and 2.4 ms against 6.0 ms


def test_missing_peer_file_is_not_an_error(tmp_path: Path) -> None:
    proc = run_script("peer_ratios.py", tmp_path / "kb.json", tmp_path / "absent.json")
    assert proc.returncode == 0 and "nothing to compare" in proc.stdout


def test_peer_shapes_match_kernel_bench() -> None:
    assert torch_peer.case_name(4096, 32, 8, 128, True) == "s4096_a32_kv8_d128_causal"
    assert torch_peer.attention_flops(4096, 32, 128, False) == 4.0 * 128 * 32 * 4096 ** 2
    assert torch_peer.attention_flops(8, 1, 64, True) == 4.0 * 64 * 36
    assert torch_peer.attention_bwd_flops(8, 1, 64, True) == 10.0 * 64 * 36  # 10 d per pair
    assert "attention_bwd" in torch_peer.PARTS
    # kernel_bench's sweep: s = 1K..32K, a = 32 at d = 64 and a = 16 at d = 128, causal.
    assert len(torch_peer.SWEEP) == 12
    assert all(c for *_, c in torch_peer.SWEEP)
    src = (Path(__file__).resolve().parents[2] / "bench/kernel_bench/kernel_bench_cuda.cpp").read_text()
    for s, a, kv, d, causal in torch_peer.ATTENTION_SHAPES:
        assert f"{{{s}, {a}, {kv}, {d}, {'true' if causal else 'false'}}}" in src
    # The backward cases run on those same shapes, counted with attention_bwd_flops.
    assert '"attention_bwd_cuda/"' in src and "attention_bwd_flops(c, a.hpos)" in src


def test_torch_peer_without_torch_skips(tmp_path: Path) -> None:
    try:
        import torch  # noqa: F401
    except ImportError:
        proc = run_script("torch_peer.py", "--out", tmp_path / "p.json")
        assert proc.returncode == 0 and "skipped" in proc.stdout
        assert not (tmp_path / "p.json").exists()
