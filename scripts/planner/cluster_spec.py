"""A cluster spec (JSON, scripts/planner/specs/) -> the calibration `model --section plan` reads.

A spec names a cluster the user has not been given by its published figures: the GPU's dense
peak, the achieved GEMM and attention rates, each link level's bus bandwidth and latency per
kind of transfer, the GPUs per node and the memory per GPU. Every figure carries its `source`
(a title and URL) or, where none was found, says so and gives the peak and the `efficiency`
applied to it. The calibration keeps the spec's name and file so a reader can trace each rate.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

SPEC_FORMAT = "parallelism-bench cluster spec"
KINDS = ("rs_ag", "all_reduce", "a2a", "p2p")


class SpecError(ValueError):
    """A spec that cannot give a calibration: one line naming the file and the field."""


def rate(entry: dict, where: str, peak: float | None = None) -> float:
    """A figure's value: given, or the peak times its named efficiency; a source either way."""
    if not isinstance(entry, dict) or not entry.get("source"):
        raise SpecError(f"{where} has no source")
    if "value" in entry:
        value = float(entry["value"])
    elif "efficiency" in entry and peak is not None:
        value = float(entry["efficiency"]) * peak
    else:
        raise SpecError(f"{where} has neither a value nor an efficiency of the peak")
    if not value > 0:
        raise SpecError(f"{where} is not a rate ({value})")
    return value


def link(entry: dict, where: str) -> dict:
    bw = rate(entry.get("bw", {}), f"{where}.bw")
    lat = entry.get("lat", {})
    if not isinstance(lat, dict) or not lat.get("source") or float(lat.get("value", -1)) < 0:
        raise SpecError(f"{where}.lat has no value >= 0 with a source")
    return {"bw": bw, "lat": float(lat["value"])}


def calibration_from_spec(path: Path) -> tuple[dict, float]:
    """The calibration document of a spec file and the spec's memory per GPU (GB)."""
    try:
        spec = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise SpecError(f"{path}: cannot be read as JSON ({e})") from e
    if not isinstance(spec, dict) or spec.get("format") != SPEC_FORMAT:
        raise SpecError(f'{path}: not a cluster spec (no format "{SPEC_FORMAT}")')
    try:
        peak = rate(spec["peak_flops"], "peak_flops")
        compute = {"gemm_flops": rate(spec["gemm"], "gemm", peak),
                   "attention_flops": rate(spec["attention_forward"], "attention_forward", peak),
                   "attention_bwd_flops": rate(spec["attention_backward"], "attention_backward", peak),
                   "source": f"spec {path.name}"}
        # Optional published figures: GEMM rates by size (FLOPs of one GEMM) and HBM's rate.
        points = spec.get("gemm_by_size", [])
        if points:
            compute["gemm_by_size"] = [{"flops": 2 * p["m"] * p["n"] * p["k"],
                                        "rate": rate(p, f"gemm_by_size[{i}]")}
                                       for i, p in enumerate(points)]
        if "hbm_bw" in spec:
            compute["hbm_bw"] = rate(spec["hbm_bw"], "hbm_bw")
        levels = {}
        for name in ("intra", "inter"):
            levels[name] = {k: link(spec["levels"][name][k], f"levels.{name}.{k}") for k in KINDS}
            levels[name]["ranks"] = int(spec["gpus_per_node"]) if name == "intra" else 2
        memory_gb = rate(spec["memory_gb"], "memory_gb")
        per_node = int(spec["gpus_per_node"])
    except KeyError as e:
        raise SpecError(f"{path}: no {e.args[0]}") from e
    except SpecError as e:
        raise SpecError(f"{path}: {e}") from e
    doc = {"format": "parallelism-bench calibration", "version": 1,
           "created_utc": datetime.now(timezone.utc).isoformat(),
           "where": {"kind": "spec", "spec": str(path), "name": spec.get("name", path.stem),
                     "gpus_per_node": per_node, "memory_gb": memory_gb},
           "dtype": spec.get("dtype", "bf16"), "ranks_per_node": per_node, "compute": compute,
           "levels": levels}
    return doc, memory_gb
