"""Synthetic results files written the way the C++ writer does (docs/RESULTS_SCHEMA.md).

`write_results` writes file attributes, `/ranks/hostname` and `/ranks/device`, and one group
per case `/<bench>/<case>` with typed parameters, the step-time statistics (computed from
`time_s` as the max over ranks), checks and predictions.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from scripts.cli import command_line

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts"

CaseSpec = dict[str, Any]


def _attr(value: Any, fixed_strings: bool) -> Any:
    """Python values as the C API would store them (ints as int32/int64, floats as double)."""
    if isinstance(value, str):
        return np.bytes_(value.encode()) if fixed_strings else value
    if isinstance(value, bool):
        return np.int32(value)
    if isinstance(value, int):
        return np.int64(value) if abs(value) > 2**31 - 1 else np.int32(value)
    if isinstance(value, float):
        return np.float64(value)
    return value


def step_stats(time_s: np.ndarray) -> dict[str, float]:
    """The statistics the writer stores, of the step time (max over ranks)."""
    step = time_s.max(axis=1)
    return {"time_median_s": float(np.median(step)),
            "time_p10_s": float(np.percentile(step, 10)),
            "time_p90_s": float(np.percentile(step, 90)),
            "time_min_s": float(step.min()), "time_max_s": float(step.max()),
            "time_mean_s": float(step.mean())}


def write_results(path: Path, bench: str, cases: list[CaseSpec], *, world_size: int = 4,
                  partial: bool = False, created_utc: str = "2025-01-15T10:00:00Z",
                  git_commit: str = "abc123def456", fixed_strings: bool = False,
                  file_attrs: dict[str, Any] | None = None) -> Path:
    """Write a results file; `partial` gives `FILE.h5.partial` with `complete = 0`.

    Each case spec: name, params (dict, typed), attrs (extra attributes), time_s
    [iterations, world_size] and optional datasets.
    """
    if partial:
        path = path.with_name(path.name + ".partial")
    attrs: dict[str, Any] = {
        "schema_version": 1, "suite_version": "0.1.0", "git_commit": git_commit,
        "created_utc": created_utc, "command_line": f"{bench} --out {path.name}",
        "bench": bench, "world_size": world_size, "hostnames": "node01",
        "backend": "cpu", "transport": "mpi", "transport_detail": "host buffers",
        "link": "loopback", "mpi_version": "Open MPI v4.1.4", "nccl_version": "none",
        "cuda_version": "none", "device_names": "cpu", "slurm_job_id": "",
        "complete": 0 if partial else 1,
    }
    attrs.update(file_attrs or {})
    with h5py.File(path, "w") as f:
        for key, value in attrs.items():
            f.attrs[key] = _attr(value, fixed_strings)
        hosts = [f"node0{1 + r // 2}" for r in range(world_size)]
        dt = h5py.string_dtype() if not fixed_strings else "S16"
        f.create_dataset("ranks/hostname", data=np.array(hosts, dtype=dt))
        f.create_dataset("ranks/device", data=np.array(["cpu"] * world_size, dtype=dt))
        for spec in cases:
            grp = f.create_group(f"{bench}/{spec['name']}")
            time_s = np.asarray(spec["time_s"], dtype=np.float64)
            assert time_s.shape[1] == world_size
            case_attrs = {"params": ",".join(spec["params"]), **spec["params"],
                          "iterations": time_s.shape[0], "warmup": 2,
                          **step_stats(time_s), "check_passed": 1, "check_max_abs_err": 0.0,
                          **spec.get("attrs", {})}
            for key, value in case_attrs.items():
                grp.attrs[key] = _attr(value, fixed_strings)
            grp.create_dataset("time_s", data=time_s)
            for key, value in spec.get("datasets", {}).items():
                grp.create_dataset(key, data=value)
    return path


def rank_times(base: float, iterations: int = 20, world_size: int = 4, seed: int = 0,
               straggler: int | None = None, straggle: float = 1.0) -> np.ndarray:
    """[iterations, world_size] times around `base` with 5% noise; `straggler` rank is slower."""
    rng = np.random.default_rng(seed)
    times = base * (1 + 0.05 * rng.random((iterations, world_size)))
    if straggler is not None:
        times[:, straggler] *= straggle
    return times


SP_TP_SIZES = [2**10, 2**14, 2**18, 2**22]


def sp_tp_cases(scale: float = 1.0, world_size: int = 4, check: int = 1,
                straggler_case: str | None = None, mode: str | None = None) -> list[CaseSpec]:
    """all-reduce and reduce-scatter + all-gather over message sizes, like the sp_tp bench.

    `mode="collectives"` adds the `mode` parameter the current writer stores; None leaves it
    out, as older files do.
    """
    cases = []
    for op, factor in (("allreduce", 1.0), ("rs_ag", 1.1)):
        for i, n in enumerate(SP_TP_SIZES):
            name = f"{op}_fp32_n{n}"
            base = scale * factor * (5e-6 + n / 20e9)
            strag = dict(straggler=2, straggle=3.0) if name == straggler_case else {}
            time_s = rank_times(base, world_size=world_size, seed=i, **strag)
            median = step_stats(time_s)["time_median_s"]
            pred = 2 * (world_size - 1) / world_size * n
            cases.append({
                "name": name,
                "params": {**({"mode": mode} if mode else {}),
                           "op": op, "dtype": "fp32", "n_bytes": n},
                "attrs": {"algbw_GBps": n / median / 1e9,
                          "busbw_GBps": 2 * (world_size - 1) / world_size * n / median / 1e9,
                          "bytes_sent_per_rank": pred, "pred_bytes_sent_per_rank": pred,
                          "check_passed": check},
                "time_s": time_s,
                "datasets": {"bytes_sent": np.full(world_size, int(pred), dtype=np.int64),
                             "bytes_recv": np.full(world_size, int(pred), dtype=np.int64)},
            })
    return cases


def layer_ledger(variant: str, fused: bool, s: int, b: int, h: int, heads: int, d_ff: int,
                 t: int, elem: int = 4) -> list[tuple[str, str, int]]:
    """(name, shape, bytes) of each tensor the sp_tp layer saves for backward, as
    bench/sp_tp/transformer_layer.cpp allocates them (TP+SP keeps token-wise ones 1/t)."""
    rows = s * b
    local = rows // t if variant == "tp_sp" else rows
    hl, al, fl = h // t, heads // t, d_ff // t
    tensors = [("ln1_input", (local, h), elem), ("ln1_output", (local, h), elem),
               ("qkv", (rows, 3 * hl), elem), ("attn_output", (rows, hl), elem)]
    if fused:
        tensors.append(("attn_lse", (b, al, s), 4))
    else:
        tensors += [("attn_softmax", (b, al, s, s), elem), ("attn_dropout_mask", (b, al, s, s), 1),
                    ("attn_dropout_output", (b, al, s, s), elem)]
    tensors += [("dropout1_mask", (local, h), 1), ("ln2_input", (local, h), elem),
                ("ln2_output", (local, h), elem), ("fc1_output", (rows, fl), elem),
                ("gelu_output", (rows, fl), elem), ("dropout2_mask", (local, h), 1)]
    return [(name, "x".join(map(str, shape)), int(np.prod(shape)) * size)
            for name, shape, size in tensors]


LAYER_CONFIG = {"s": 128, "b": 2, "h": 256, "heads": 8, "d_ff": 1024}


def layer_cases(world_size: int = 4, ledger: bool = True, phases: bool = True,
                rel_err: float = 0.01) -> list[CaseSpec]:
    """sp_tp `mode="layer"`: tp and tp_sp, fused and unfused attention, written like
    bench/sp_tp/layer_cases.cpp (typed params, figures, phase and ledger datasets).

    `ledger=False` leaves out the three ledger datasets, `phases=False` the phase figures.
    The prediction is `rel_err` above the measured bytes.
    """
    cfg, t = LAYER_CONFIG, world_size
    cases = []
    for i, (fused, variant) in enumerate([(f, v) for f in (True, False)
                                          for v in ("tp", "tp_sp")]):
        rng = np.random.default_rng(100 + i)
        compute = (2e-3 if fused else 3e-3) * (1 + 0.05 * rng.random((20, world_size)))
        comm = (4e-4 if variant == "tp" else 5e-4) * (1 + 0.1 * rng.random((20, world_size)))
        time_s = compute + comm + 1e-5
        tensors = layer_ledger(variant, fused, t=t, **cfg)
        measured = float(sum(nbytes for _, _, nbytes in tensors))
        n = cfg["s"] * cfg["b"] * cfg["h"] * 4
        comm_bytes = 4 * (t - 1) / t * n  # two all-reduces, or two RS + two AG
        attrs: dict[str, Any] = {
            "activation_bytes": measured, "pred_activation_bytes": measured * (1 + rel_err),
            "activation_rel_err": rel_err / (1 + rel_err),
            "layer_comm_bytes_per_rank": comm_bytes,
            "pred_layer_comm_bytes_per_rank": comm_bytes,
            "check_passed": 1, "check_bit_exact": 0, "check_tolerance": 1e-4}
        datasets: dict[str, Any] = {}
        if phases:
            attrs["phase_compute_median_s"] = float(np.median(compute.max(axis=1)))
            attrs["phase_comm_median_s"] = float(np.median(comm.max(axis=1)))
            datasets.update(phase_compute_s=compute, phase_comm_s=comm)
        if ledger:
            vlen = h5py.string_dtype()
            datasets["ledger_name"] = np.array([n for n, _, _ in tensors], dtype=vlen)
            datasets["ledger_shape"] = np.array([sh for _, sh, _ in tensors], dtype=vlen)
            datasets["ledger_bytes"] = np.array([nb for _, _, nb in tensors], dtype=np.int64)
        cases.append({
            "name": (f"layer_{variant}_fp32_s{cfg['s']}_b{cfg['b']}_h{cfg['h']}"
                     f"_a{cfg['heads']}_ff{cfg['d_ff']}" + ("_flash" if fused else "_unfused")),
            "params": {"mode": "layer", "variant": variant,
                       "attention": "fused" if fused else "unfused", "dtype": "fp32", **cfg,
                       "t": t, "dropout": 0.1, "causal": 0},
            "attrs": attrs, "time_s": time_s, "datasets": datasets})
    return cases


def layer_step_cases(world_size: int = 4, phases: bool = True) -> list[CaseSpec]:
    """sp_tp `mode="layer"`, `pass="fwd_bwd"`: training steps as bench/sp_tp writes them (tp;
    tp_sp with its backward overlapped and not), fused and unfused attention, with the phases
    fwd/bwd x compute/comm, the collectives per pass and the backward's peak memory."""
    t = world_size
    steps = []
    for case in layer_cases(world_size, phases=False):
        variant = case["params"]["variant"]
        for overlap in ((1, 0) if variant == "tp_sp" else (None,)):
            rng = np.random.default_rng(len(steps) + 7)
            parts = {name: base * (1 + 0.05 * rng.random((20, t))) for name, base in
                     (("fwd_compute", 2e-3), ("fwd_comm", 4e-4), ("bwd_compute", 4.5e-3),
                      ("bwd_comm", 2e-4 if overlap else 6e-4))}
            time_s = sum(parts.values()) + 1e-5
            attrs = dict(case["attrs"])
            n = LAYER_CONFIG["s"] * LAYER_CONFIG["b"] * LAYER_CONFIG["h"] * 4
            both = (8 if variant == "tp" else 10) * (t - 1) / t * n
            attrs.update(fwd_bwd_comm_bytes_per_rank=both, pred_fwd_bwd_comm_bytes_per_rank=both,
                         bwd_peak_bytes=2.5 * attrs["activation_bytes"], check_grad_bit_exact=0,
                         check_fd_rel_err=float("nan"))
            datasets = dict(case["datasets"])
            params = dict(case["params"], **{"pass": "fwd_bwd"})
            name = case["name"] + "_fwd_bwd"
            if overlap is not None:
                params["bwd_overlap"] = overlap
                name += "" if overlap else "_nooverlap"
            if phases:
                for key, values in parts.items():
                    attrs[f"phase_{key}_median_s"] = float(np.median(values.max(axis=1)))
                    datasets[f"phase_{key}_s"] = values
            steps.append({"name": name, "params": params, "attrs": attrs, "time_s": time_s,
                          "datasets": datasets})
    return steps


def harness_cases() -> list[CaseSpec]:
    """harness_overhead: suite time / plain MPI time per message size."""
    cases = []
    for i, n in enumerate(SP_TP_SIZES):
        time_s = rank_times(1e-5 + n / 20e9, seed=i)
        cases.append({"name": f"allreduce_n{n}", "params": {"n_bytes": n},
                      "attrs": {"ratio": 1.0 + 0.02 * i, "plain_time_median_s": 1e-5},
                      "time_s": time_s})
    return cases


def generic_cases() -> list[CaseSpec]:
    """A bench the plotter does not know, with two pred_<x> / <x> pairs."""
    cases = []
    for i, (layout, c) in enumerate([("contiguous", 1024), ("zigzag", 1024), ("zigzag", 4096)]):
        cases.append({"name": f"{layout}_c{c}", "params": {"layout": layout, "c": c},
                      "attrs": {"bytes_sent_per_rank": 4 * c * 64 * 3,
                                "pred_bytes_sent_per_rank": 4 * c * 64 * 3,
                                "max_work_pairs": c * c, "pred_max_work_pairs": c * c // 2},
                      "time_s": rank_times(1e-4 * (i + 1), seed=i),
                      "datasets": {"work_per_rank_round": np.ones((4, 4), dtype=np.int64)}})
    return cases


def group_attrs(group_size: int, world_size: int) -> dict[str, Any]:
    """The process-group file attributes of a run with groups of `group_size` consecutive
    ranks (`--tp`, `--cp`, `--ep`); files written before they existed have none."""
    return {"group_size": group_size, "group_count": world_size // group_size,
            "group_layout": "consecutive"}


def ring_cases(n_c: int, world_size: int = 2, scale: float = 1.0, check: int = 1,
               extra_params: dict[str, Any] | None = None) -> list[CaseSpec]:
    """ring_attention cases named as bench/ring_attention/ring_config.cpp names them: the name
    leaves out the context-parallel group size n_c (`--cp`), which only the params record."""
    cases = []
    for i, c in enumerate((1024, 4096)):
        cases.append({
            "name": f"ring_contiguous_causal_fp32_c{c}_a8_d64",
            "params": {"variant": "ring", "layout": "contiguous", "causal": 1, "dtype": "fp32",
                       "c": c, "s": c * n_c, "n_c": n_c, "cp_groups": world_size // n_c,
                       "heads": 8, "kv_heads": 8, "head_dim": 64, "batch": 1,
                       **(extra_params or {})},
            "attrs": {"check_passed": check},
            "time_s": rank_times(scale * 1e-3 * (i + 1), world_size=world_size, seed=i)})
    return cases


def run_script(name: str, *args: Any, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """Run `suite <name> args...` (name: the tool's file name, `compare.py`) from the repo root,
    as a user would."""
    return subprocess.run([*command_line(name), *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


SLOWED_CASE = "sp_tp/allreduce_fp32_n4194304"
NEW_CASE = "sp_tp/allreduce_fp32_n16777216"


def write_run(folder: Path, *, slowed: float = 1.0, created_utc: str = "2025-01-15T10:00:00Z",
              file_attrs: dict[str, Any] | None = None) -> Path:
    """A run's folder as `make run` leaves it, small: `sp_tp.h5` (collectives) and two files of
    one bench, `ring_attention.h5` and `ring_docs.h5` (other cases). `slowed` multiplies the
    step times of SLOWED_CASE, and a run with slowed != 1 also holds NEW_CASE, a case its
    baseline lacks."""
    folder.mkdir(parents=True, exist_ok=True)
    sp_tp = sp_tp_cases(mode="collectives")
    for spec in sp_tp:
        if f"sp_tp/{spec['name']}" == SLOWED_CASE:
            spec["time_s"] = spec["time_s"] * slowed
    if slowed != 1.0:
        new = dict(sp_tp[3], name=NEW_CASE.split("/")[1],
                   params=dict(sp_tp[3]["params"], n_bytes=2**24))
        sp_tp.append(new)
    kw = {"created_utc": created_utc, "file_attrs": file_attrs}
    write_results(folder / "sp_tp.h5", "sp_tp", sp_tp, **kw)
    write_results(folder / "ring_attention.h5", "ring_attention", ring_cases(4, world_size=4), **kw)
    write_results(folder / "ring_docs.h5", "ring_attention", generic_cases(), **kw)
    return folder


def scale_times(path: Path, factor: float, attrs: dict[str, Any] | None = None) -> Path:
    """Every case's step-time statistics (`time_*_s`) of a results file times `factor`, and
    file attributes set from `attrs`: a run as slower (or faster) hardware would give it."""
    with h5py.File(path, "r+") as f:
        for name, value in (attrs or {}).items():
            f.attrs[name] = value
        bench = f[f.attrs["bench"]]
        for group in bench.values():
            for name in [n for n in group.attrs if n.startswith("time_") and n.endswith("_s")]:
                group.attrs[name] = group.attrs[name] * factor
    return path


# A real run's file (the registry's) copied night after night, 2% slower from one night on.
NIGHTLY_SOURCE = (REPO / "results" / "baselines" /
                  "Intel-Xeon-Processor-2-cores_x4_loopback_mpi_cpu_fp32" / "sp_tp_collectives.h5")
NIGHTS, STEP_AT = 24, 16


def nightly_history(root: Path, slowdown: float) -> Path:
    """NIGHTS copies of NIGHTLY_SOURCE under root/results (night_<n>/), each its own commit,
    times unchanged as SMPI's deterministic runs give them; from night STEP_AT on every case's
    time is `slowdown` x longer and NCCL is another version. Returns root/results."""
    from scripts.results.history_scale import make_copies

    source = root / "source"
    source.mkdir(parents=True)
    (source / NIGHTLY_SOURCE.name).write_bytes(NIGHTLY_SOURCE.read_bytes())
    for copy in make_copies(source, root / "results", NIGHTS):
        if int(copy.parent.name.split("_")[1]) >= STEP_AT:
            scale_times(copy, slowdown, {"nccl_version": "2.21.5"})
    return root / "results"
