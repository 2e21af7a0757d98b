"""Print a short text table of one or more results files: per case the median step time,
each measured figure beside its METHODS.md prediction, and the check verdict.

    summary.py results/<stamp>/*.h5                  text table
    summary.py results/<stamp>/*.h5 --csv OUT.csv    one row per case (OUT `-`: stdout)
    summary.py results/<stamp>/*.h5 --json OUT.json  every file's attributes and every case's,
                                                     its step times and its measured/predicted

The CSV and JSON are for readers without h5py (a spreadsheet, a notebook elsewhere): the CSV
has the file, bench, case, parameters, check, step-time median / p10 / p90 and, for every
predicted figure of any case, a `<x>` and a `pred_<x>` column (empty where a case has none).
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from pathlib import Path
from typing import Any, TextIO

from scripts.results import suite_results
from scripts.results.index import read_indexed


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
    res = read_indexed(path)
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


def plain(value: Any) -> Any:
    """A value JSON can hold: NaN and infinities as None (JSON has no such numbers)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def case_record(case: suite_results.Case) -> dict[str, Any]:
    """One case as plain values: name, parameters, check, step-time statistics, every
    measured figure beside its prediction, and every attribute."""
    return {"bench": case.bench, "case": case.name, "params": case.params,
            "check": verdict(case), "median_s": case.median_s,
            "p10_s": case.attrs.get("time_p10_s"), "p90_s": case.attrs.get("time_p90_s"),
            "iterations": case.attrs.get("iterations"),
            "predictions": {name: {"measured": m, "predicted": p}
                            for name, (m, p) in case.predictions().items()},
            "attrs": case.attrs}


def file_record(path: Path) -> dict[str, Any]:
    """A results file as plain values: its attributes, its software and its cases (with the
    per-iteration step times, the max over ranks)."""
    res = suite_results.read_results(path)
    cases = []
    for bench in res.benches():
        for case in res.cases_of(bench):
            record = case_record(case)
            if "time_s" in case.datasets:
                record["step_times_s"] = case.step_times().tolist()
            cases.append(record)
    return {"file": str(path), "describe": res.describe(), "attrs": res.attrs,
            "software": suite_results.software_versions(res), "cases": cases}


CSV_FIELDS = ("file", "bench", "case", "params", "check", "median_s", "p10_s", "p90_s",
              "iterations")


def write_csv(records: list[dict[str, Any]], out: TextIO) -> None:
    """One row per case (CSV_FIELDS), then `<x>` and `pred_<x>` for every predicted figure."""
    figures = list(dict.fromkeys(name for r in records for c in r["cases"]
                                 for name in c["predictions"]))
    columns = [*CSV_FIELDS, *(f for name in figures for f in (name, f"pred_{name}"))]
    writer = csv.DictWriter(out, fieldnames=columns, restval="", lineterminator="\n")
    writer.writeheader()
    for record in records:
        for c in record["cases"]:
            row = {k: c.get(k) for k in CSV_FIELDS[2:]}
            row.update(file=record["file"], bench=c["bench"], case=c["case"],
                       params=";".join(f"{k}={v}" for k, v in c["params"].items()))
            for name, pair in c["predictions"].items():
                row[name], row[f"pred_{name}"] = pair["measured"], pair["predicted"]
            writer.writerow({k: "" if v is None else v for k, v in row.items()})


def write_out(target: str, write: Any) -> None:
    """Calls write(stream) on stdout (`-`) or on the file `target`."""
    if target == "-":
        write(sys.stdout)
        return
    Path(target).parent.mkdir(parents=True, exist_ok=True)
    with open(target, "w", newline="") as out:
        write(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+", type=Path, help="results files (.h5 or .h5.partial)")
    p.add_argument("--pairs", type=int, default=3, help="measured/predicted pairs shown per case (default 3)")
    p.add_argument("--csv", metavar="OUT.csv", help="write one row per case instead (- for stdout)")
    p.add_argument("--json", metavar="OUT.json", help="write files and cases as JSON instead (- for stdout)")
    args = p.parse_args(argv)
    suite_results.cli_warnings()
    if args.csv or args.json:
        records = [file_record(f) for f in args.files]
        if args.csv:
            write_out(args.csv, lambda out: write_csv(records, out))
        if args.json:
            write_out(args.json, lambda out: json.dump(plain({"files": records}), out, indent=1))
        return 0 if all(c["check"] != "FAIL" for r in records for c in r["cases"]) else 1
    all_ok = all([summarize(f, args.pairs) for f in args.files])
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
