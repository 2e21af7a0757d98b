#!/usr/bin/env python3
"""Print a short text table of one or more results files: per case the median step time,
each measured figure beside its METHODS.md prediction, and the check verdict."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import suite_results  # noqa: E402


def verdict(case: suite_results.Case) -> str:
    return {1: "ok", 0: "FAIL", -1: "off"}.get(case.check_passed, "?")


# Figures worth a glance where a case has them (ring attention's F, W and overlap bound; which
# attention kernel ran; a kernel's rate and its fraction of the peak), printed before the
# measured/predicted pairs.
KEY_FIGURES = (
    ("attn_kernel", "kernel={}"),
    ("measured_F_flops", "F={:.3g}FLOP/s"),
    ("measured_W_Bps", "W={:.3g}B/s"),
    ("c_star_tokens", "c*={:.0f}"),
    ("overlapped_over_compute_only", "overlapped/compute={:.2f}"),
    ("bwd_measured_F_flops", "F_b={:.3g}FLOP/s"),  # a training step's backward (fwd_bwd)
    ("bwd_c_star_tokens", "c*_bwd={:.0f}"),
    ("bwd_overlapped_over_compute_only", "bwd overlapped/compute={:.2f}"),
    # why the ring reaches its efficiency against the ideal: the three factors multiply to it
    ("efficiency_vs_ideal_fwd", "eff_ideal={:.2f}"),
    ("eff_balance", "= balance {:.2f}"),
    ("eff_pair_rate", "x pair rate {:.2f}"),
    ("eff_exchange", "x exchange {:.2f}"),
    ("efficiency_vs_ideal_bwd", "bwd eff_ideal={:.2f}"),
    ("bwd_eff_balance", "= balance {:.2f}"),
    ("bwd_eff_pair_rate", "x pair rate {:.2f}"),
    ("bwd_eff_exchange", "x exchange {:.2f}"),
    ("flops_per_s", "{:.3g}FLOP/s"),  # kernel_bench
    ("frac_of_peak", "{:.0%} of peak"),
)


def format_key_figures(case: suite_results.Case) -> str:
    parts = []
    for name, fmt in KEY_FIGURES:
        if name in case.attrs:
            value = case.attrs[name]
            parts.append(fmt.format(value if isinstance(value, str) else float(value)))
    return (" " + " ".join(parts)) if parts else ""


def format_pairs(case: suite_results.Case, limit: int) -> str:
    """`x=measured/predicted` for the first `limit` predicted figures; a training step's
    backward figures first, since its forward figures are also in the forward's case."""
    pairs = list(case.predictions().items())
    if case.attrs.get("pass") == "fwd_bwd":
        pairs.sort(key=lambda item: "bwd" not in item[0])  # stable: keeps each group's order
    parts = []
    for name, (measured, predicted) in pairs[:limit]:
        parts.append(f"{name}={float(measured):.4g}/{float(predicted):.4g}")
    return " ".join(parts)


def summarize(path: Path, limit: int) -> bool:
    res = suite_results.read_results(path, load_datasets=False)
    print(f"\n{path}: {res.describe()} | {res.attrs.get('device_names', '?')} | dtype {res.attrs.get('dtype', '?')}")
    print("  software: " + "; ".join(f"{k} {v}" for k, v in suite_results.software_versions(res).items()))
    ok = True
    for bench in res.benches():
        for case in res.cases_of(bench):
            median = case.median_s
            busbw = case.attrs.get("busbw_GBps")
            extra = f" busbw={float(busbw):.2f}GB/s" if busbw is not None else ""
            print(f"  {case.name:<58} {median * 1e6 if median else float('nan'):>12.1f} us  {verdict(case):>4}"
                  f"{extra}{format_key_figures(case)}  {format_pairs(case, limit)}")
            ok &= case.check_passed != 0
    return ok


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("files", nargs="+", type=Path, help="results files (.h5 or .h5.partial)")
    p.add_argument("--pairs", type=int, default=3, help="measured/predicted pairs shown per case (default 3)")
    args = p.parse_args()
    suite_results.cli_warnings()
    all_ok = all([summarize(f, args.pairs) for f in args.files])
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
