"""The planner beside training runs others have published: each run's model, mesh, schedule and
batch given to `model --section plan --compare` at the rates of a shipped cluster spec
(scripts/planner/specs/: nothing measured, nothing fitted), its predicted throughput in the
run's own FLOP convention beside the published one, and the planner's own pick for the same
job with its predicted gain and the part that decides it.

    suite published-runs [--model build/bin/model]

Prints docs/PUBLISHED_RUNS.md's two tables (every row, then the median |error| of each
source); `suite docs-check --only published_runs` reruns them. Every published figure is the
other system's, measured on its cluster; the planner's is a model of the spec's cluster.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from scripts import ROOT
from scripts.planner.cluster_spec import calibration_from_spec

SPECS = ROOT / "scripts" / "planner" / "specs"
A100, H100 = "dgx_a100_hdr", "h100_sxm_ndr"
A100_PEAK = 312e12  # dense bf16, the A100 spec's peak_flops


@dataclass
class Gpt:
    """A dense GPT of Megatron-LM's papers: vocabulary 51,200, sequence 2048."""

    h: int
    heads: int
    layers: int
    vocab: int = 51200
    seq: int = 2048

    def flags(self) -> list[str]:
        return ["--hidden", str(self.h), "--heads", str(self.heads), "--kv-heads", str(self.heads),
                "--d-ff", str(4 * self.h), "--layers", str(self.layers), "--seq", str(self.seq),
                "--vocab", str(self.vocab)]

    def flops(self, batch: int, recomputed: bool) -> float:
        """Narayanan et al. 2021's count of a step's FLOPs: 96 B s l h^2 (1 + s / 6h + V / 16 l h)
        with full recomputation (a fourth forward), 72 without (model FLOPs)."""
        s, h, l, v = self.seq, self.h, self.layers, self.vocab
        return (96 if recomputed else 72) * batch * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h))


@dataclass
class Run:
    source: str  # the paper
    system: str  # whose figure: the system that ran it
    model: str
    gpus: int
    mesh: str  # as --compare takes it: the planner's name up to the schedule
    schedule: str  # as published
    batch: int  # sequences a step
    seq: int
    shape: list[str]  # model flags
    published: float
    unit: str
    throughput: Callable[[float], float]  # the published unit from the planner's step time
    higher_is_better: bool
    spec: str
    terms: list[str] = field(default_factory=list)  # --recompute, --dp-shard
    note: str = ""
    planned: bool = True  # False: a mesh the planner does not enumerate (a degree not a power of two)


def megatron_rows() -> list[Run]:
    """Narayanan et al. 2021, Table 1: weak scaling on Selene's A100s, TFLOP/s per GPU counted
    with full recomputation, vocabulary 51,200, sequence 2048, the interleaved schedule."""
    table = [  # params, heads, h, layers, t, p, GPUs, batch, TFLOP/s per GPU
        ("1.7B", 24, 2304, 24, 1, 1, 32, 512, 137), ("3.6B", 32, 3072, 30, 2, 1, 64, 512, 138),
        ("7.5B", 32, 4096, 36, 4, 1, 128, 512, 142), ("18.4B", 48, 6144, 40, 8, 1, 256, 1024, 135),
        ("39.1B", 64, 8192, 48, 8, 2, 512, 1536, 138), ("76.1B", 80, 10240, 60, 8, 4, 1024, 1792, 140),
        ("145.6B", 96, 12288, 80, 8, 8, 1536, 2304, 148), ("310.1B", 128, 16384, 96, 8, 16, 1920, 2160, 155),
        ("529.6B", 128, 20480, 105, 8, 35, 2520, 2520, 163), ("1008.0B", 160, 25600, 128, 8, 64, 3072, 3072, 163),
    ]
    runs = []
    for name, heads, h, layers, t, p, gpus, batch, tflops in table:
        gpt = Gpt(h, heads, layers)
        runs.append(Run(
            "Narayanan et al. 2021", "Megatron-LM", f"GPT {name}", gpus,
            f"tp{t}-cp1-pp{p}" + (":interleaved" if p > 1 else ""),
            "interleaved" if p > 1 else "none (PP 1)", batch, gpt.seq, gpt.flags(), tflops, "TFLOP/s a GPU",
            lambda step, g=gpt, b=batch, n=gpus: g.flops(b, True) / (step * n) / 1e12, True, A100,
            ["--recompute", "full", "--dp-shard", "none", "--attention", "unfused"], planned=p & (p - 1) == 0))
    return runs


def megascale_rows() -> list[Run]:
    """Jiang et al. 2024 (MegaScale), 175B on 12,288 GPUs: 55.2% MFU, 1.34x Megatron-LM's."""
    gpt = Gpt(12288, 96, 96)
    mfu = lambda step: 100 * gpt.flops(6144, False) / (step * 12288 * A100_PEAK)  # noqa: E731
    common = dict(model="GPT 175B", gpus=12288, mesh="tp8-cp1-pp8:interleaved", schedule="interleaved",
                  batch=6144, seq=gpt.seq, shape=gpt.flags(), unit="MFU %", throughput=mfu,
                  higher_is_better=True, spec=A100, terms=["--recompute", "selective"])
    return [Run("Jiang et al. 2024", "MegaScale", published=55.2, **common),
            Run("Jiang et al. 2024", "Megatron-LM", published=round(55.2 / 1.34, 1), **common)]


def deepseek_rows() -> list[Run]:
    """DeepSeek-AI 2024 (DeepSeek-V3): 2.664M H800 GPU hours for 14.8T tokens of pre-training,
    180K a trillion; 2048 GPUs, PP 16 (DualPipe), EP 64, ZeRO-1 DP, sequence 4096."""
    seq, batch, gpus = 4096, 15360, 2048
    shape = ["--hidden", "7168", "--heads", "56", "--kv-heads", "56", "--d-ff", "2048", "--experts", "256",
             "--top-k", "8", "--swiglu", "--layers", "61", "--seq", str(seq), "--vocab", "129280"]
    hours = lambda step: gpus * step / (batch * seq) * 1e12 / 3600 / 1e3  # noqa: E731
    return [Run("DeepSeek-AI 2024", "DeepSeek-V3", "DeepSeek-V3 (671B, 37B active)", gpus,
                "tp1-cp1-ep64-pp16:zb-v",
                "DualPipe (planner: ZB-V)", batch, seq, shape, 180, "K GPU-hours a trillion tokens", hours,
                False, H100, ["--recompute", "selective", "--ep-overlap"],
                "H800 timed as the H100 spec (the same SMs; NVLink 400 GB/s against 900)")]


RUNS = (*megatron_rows(), *megascale_rows(), *deepseek_rows())

EXPLANATION = re.compile(r"^explanation: section=plan mesh=(\S+ \S+) rank=(\d+) (.*)$", re.M)


def explain(model: Path, calibration: Path, memory_gb: float, run: Run) -> list[dict]:
    """The two explanation lines (the run's mesh, the planner's best) of its plan."""
    command = [str(model), "--section", "plan", "--calibration", str(calibration), "--gpus", str(run.gpus),
               "--memory-gb", f"{memory_gb:g}", "--global-tokens", str(run.batch * run.seq), "--dtype", "bf16",
               "--causal", "--max-pp", "64", "--top", "1", *run.shape, *run.terms, "--compare", run.mesh]
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: exit {proc.returncode}\n{proc.stderr}")
    found = []
    for name, rank, rest in EXPLANATION.findall(proc.stdout):
        fields = dict(kv.split("=", 1) for kv in rest.split())
        found.append({"mesh": name, "rank": int(rank), **fields})
    return found


def figure(x: float) -> str:
    return f"{x:.3g}" if x < 100 else f"{x:.0f}"


def row_cells(run: Run, found: list[dict]) -> tuple[list[str], float | None]:
    """The table's cells and the error (None where the planner has no such mesh)."""
    head = [run.source, run.system, run.model, str(run.gpus), f"`{run.mesh}`", run.schedule,
            f"{run.batch} x {run.seq}", f"{figure(run.published)} {run.unit}"]
    if len(found) < 2:
        return head + ["not among its meshes (PP a power of two)", "", "", "", ""], None
    mine, best = found
    step, best_step = float(mine["step_s"]), float(best["step_s"])
    predicted = run.throughput(step)
    error = (predicted / run.published if run.higher_is_better else run.published / predicted) - 1
    fits = "" if mine["fits"] == "1" else f" (does not fit: {float(mine['memory_bytes']) / 1e9:.0f} GB)"
    gain = step / best_step - 1
    return head + [f"{figure(predicted)}{fits}", f"{100 * error:+.0f}%",
                   f"`{best['mesh']}`" if mine["rank"] != 1 else "the same", f"{100 * gain:+.0f}%",
                   mine["deciding"]], error


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", type=Path, default=ROOT / "build" / "bin" / "model", help="the model executable")
    args = p.parse_args(argv)
    print("| source | system (its figure) | model | GPUs | mesh | schedule | sequences x s | published "
          "(the system's) | planner (spec) | error | planner's pick | its gain | deciding part |")
    print("| --- " * 13 + "|")
    errors: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="published_runs_") as tmp:
        calibrations = {}
        for spec in (A100, H100):
            doc, memory_gb = calibration_from_spec(SPECS / f"{spec}.json")
            path = Path(tmp) / f"{spec}.json"
            path.write_text(json.dumps(doc))
            calibrations[spec] = (path, memory_gb)
        for run in RUNS:
            found = explain(args.model, *calibrations[run.spec], run) if run.planned else []
            cells, error = row_cells(run, found)
            print("| " + " | ".join(cells) + " |")
            if error is not None:
                errors.setdefault(run.source, []).append(abs(error))
    print()
    print("| source | rows | median \\|error\\| | largest \\|error\\| |")
    print("| --- | --- | --- | --- |")
    everything = [e for v in errors.values() for e in v]
    for source, v in (*errors.items(), ("all", everything)):
        print(f"| {source} | {len(v)} | {100 * statistics.median(v):.0f}% | {100 * max(v):.0f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
