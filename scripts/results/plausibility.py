"""Physical limits of a results file's figures: a FLOP rate above its device's peak, a bus
bandwidth above its link's rate, memory above its device's: such a figure is `invalid` (a
timing or counting bug, a method silently off), never an improvement.

Limits, from what the file records:
- FLOP/s: the case's own `peak_flops` (the C++ writer's device table, or kernel_bench's
  --peak-gflops), else DEVICE_PEAKS (common/device/device_peak.hpp's table, mirrored here and
  tested against it) for the file's device and the case's dtype; a `<rate>_impossible` = 1 the
  writer set counts too.
- bus bandwidth: a simulated run's fastest modeled link (`sim_platform_detail`: SimGrid
  reduces nowhere in the network, so this is exact); a measured run's link preset as
  sim_platform.LINKS models it, on the devices that model describes (those of DEVICE_PEAKS),
  times IN_NETWORK_HEADROOM for reductions in the switch (NVLS, SHARP); a recorded
  `link_probe_Bps` (the link probe's rate) where a run has one.
- memory: the device's memory, from its name (`... 80GB ...`) or DEVICE_MEMORY.
A figure without a known limit is not judged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from scripts.results.suite_results import Case, Results

# (alternatives of required substrings of the device name, bf16 FLOP/s, fp32 FLOP/s), first
# match wins; 0 = unknown. The same rules, in the same order, as gpu_peak_flops().
DEVICE_PEAKS: tuple[tuple[tuple[tuple[str, ...], ...], float, float], ...] = (
    ((("H100 PCIe",),), 756e12, 51e12),
    ((("H100", "NVL"),), 0.0, 0.0),
    ((("H100",), ("H200",)), 989e12, 67e12),
    ((("A100",),), 312e12, 19.5e12),
)
# Device memory where the name does not carry it, in bytes (first substring found).
DEVICE_MEMORY = (("H200", 141 * 2**30), ("H100", 80 * 2**30), ("A100", 80 * 2**30))
# A reduction inside the switch (NVLS, SHARP) lets an all-reduce's bus bandwidth pass the
# link's rate; twice it stays impossible.
IN_NETWORK_HEADROOM = 2.0
BUSBW_SUFFIX = "busbw_GBps"
MEMORY_ATTR = re.compile(r"^(memory_\w+_bytes|\w*peak_bytes)$")


@dataclass(frozen=True)
class Finding:
    """One figure past its limit."""

    case: str
    figure: str
    value: float
    limit: float
    source: str  # where the limit comes from

    def text(self) -> str:
        return (f"{self.case} {self.figure} {self.value:.4g} > {self.limit:.4g} "
                f"({self.source})")

    def record(self) -> dict[str, Any]:
        return {"case": self.case, "figure": self.figure, "value": self.value,
                "limit": self.limit, "source": self.source}


def device_peak_flops(device: str, dtype: str) -> float:
    """The device table's peak for `dtype` (bf16, fp32), 0 when unknown."""
    for alternatives, bf16, fp32 in DEVICE_PEAKS:
        if any(all(part in device for part in parts) for parts in alternatives):
            return {"bf16": bf16, "fp32": fp32}.get(dtype, 0.0)
    return 0.0


def device_memory_bytes(device: str) -> float:
    """The device's memory: `80GB` in its name, else DEVICE_MEMORY; 0 when unknown."""
    m = re.search(r"(\d+)\s*GB", device)
    if m:
        return float(m.group(1)) * 2**30  # read as GiB: the larger reading, never too strict
    return next((size for name, size in DEVICE_MEMORY if name in device), 0.0)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and value == value else None


def sim_link_limit(detail: str) -> float | None:
    """The fastest modeled link of a simulated platform (B/s) from `sim_platform_detail`."""
    rates = [float(x) for x in re.findall(r"([0-9.e+-]+) B/s", detail)]
    return max(rates) if rates else None


def link_limit(res: Results) -> tuple[float, str] | None:
    """(bytes/s, source) no bus bandwidth of the run can pass, or None when unknown."""
    a = res.attrs
    if _number(a.get("link_probe_Bps")):
        return float(a["link_probe_Bps"]), "link probe's rate"
    if a.get("simulated") == 1:
        rate = sim_link_limit(str(a.get("sim_platform_detail", "")))
        return (rate, "simulated platform's fastest link") if rate else None
    from scripts.envs.sim_platform import LINKS

    link, device = str(a.get("link", "")), str(a.get("device_names", ""))
    known = any(device_peak_flops(device, t) > 0 for t in ("bf16", "fp32"))
    if link not in LINKS or not known:
        return None
    rate = max(LINKS[link].intra_bw, LINKS[link].net_bw)
    return (rate * IN_NETWORK_HEADROOM,
            f"link preset {link}: {rate / 1e9:g} GB/s x{IN_NETWORK_HEADROOM:g} in-network headroom")


def _case_dtype(res: Results, case: Case) -> str:
    return str(case.params.get("dtype") or case.attrs.get("dtype") or res.attrs.get("dtype", ""))


def flops_findings(res: Results, case: Case) -> list[Finding]:
    device = str(res.attrs.get("device_names", ""))
    recorded = _number(case.attrs.get("peak_flops"))
    peak = recorded or device_peak_flops(device, _case_dtype(res, case))
    source = ("peak_flops recorded with the case" if recorded
              else f"device table: {device} {_case_dtype(res, case)}")
    found = []
    for name, value in case.attrs.items():
        rate = _number(value)
        if name.startswith("pred_") or rate is None:
            continue
        flagged = _number(case.attrs.get(f"{name}_impossible")) == 1
        is_rate = name.endswith("flops_per_s") or name == "measured_F_flops"
        if is_rate and peak and (rate > peak or flagged):
            found.append(Finding(case.key, name, rate, peak, source))
    return found


def case_findings(res: Results, case: Case, link: tuple[float, str] | None) -> list[Finding]:
    """Every figure of one case past its limit."""
    found = flops_findings(res, case)
    memory = device_memory_bytes(str(res.attrs.get("device_names", "")))
    for name, value in case.attrs.items():
        figure = _number(value)
        if figure is None or name.startswith("pred_"):
            continue
        if link and name.endswith(BUSBW_SUFFIX) and figure * 1e9 > link[0]:
            found.append(Finding(case.key, name, figure * 1e9, link[0], link[1]))
        if memory and res.attrs.get("backend") != "cpu" and MEMORY_ATTR.match(name) \
                and figure > memory:
            found.append(Finding(case.key, name, figure, memory,
                                 f"device memory of {res.attrs.get('device_names')}"))
    return found


def check_limits(res: Results) -> list[Finding]:
    """Every figure of the file past its physical limit, case by case."""
    link = link_limit(res)
    return [f for case in res.cases.values() for f in case_findings(res, case, link)]
