"""One page for one run: `<folder>/index.html`, what `make run` ends with, for any results folder.

    suite report-page results/<stamp>/ [--registry DIR]

The page shows the system the run measured (devices, host CPU, MPI, BLAS, CUDA, NCCL, commit,
date), the verdict against the baselines with the regressed cases first, and for every results
file (whatever benchmarks wrote them, in sub-folders too) its summary table, each measured
figure beside its prediction and the check, then its plots. The verdicts are the compare step's
files beside the results (`<name>.compare.json`, run_verdict.py writes them); a file without one
is judged here against the registry, and nothing is written but the page. Self-contained: no
script, nothing from the network; images and links are the run's own files, relative to the
page.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scripts.results.baselines import DEFAULT_REGISTRY
from scripts.results.index import read_indexed
from scripts.results.page_render import render
from scripts.results.run_verdict import flagged, judge, result_files, summary_line, verdict_paths
from scripts.results.suite_results import (Results, cli_warnings, file_stem, load_text,
                                           other_load)
from scripts.results.summary import case_record

# (label, file attributes shown together); a value that differs between files is shown with
# the files that hold it.
SYSTEM_ROWS = (
    ("devices", ("device_names",)), ("host CPU", ("cpu_model",)), ("hosts", ("hostnames",)),
    ("ranks", ("world_size",)), ("backend / transport", ("backend", "transport_detail")),
    ("link", ("link",)), ("dtype", ("dtype",)), ("MPI", ("mpi_version",)),
    ("GEMM / BLAS", ("gemm_library",)), ("CUDA", ("cuda_version",)),
    ("NCCL", ("nccl_version",)), ("git commit", ("git_commit",)),
    ("created (UTC)", ("created_utc",)), ("suite", ("suite_version",)),
)
# Measured/predicted pairs shown per case (the summary CSV and JSON hold them all).
PAIRS_SHOWN = 6


@dataclass
class Section:
    """One results file on the page."""

    rel: str  # path relative to the run folder
    anchor: str
    describe: str
    rows: list[dict[str, Any]]
    plots: list[str]
    record: dict | None  # the verdict (run_verdict.judge's record)
    line: str
    links: list[tuple[str, str]] = field(default_factory=list)

    @property
    def flagged(self) -> bool:
        return self.record is not None and flagged(self.record)


def system_rows(runs: list[tuple[str, Results]]) -> list[tuple[str, list[tuple[str, str]]]]:
    """(label, [(value, which files hold it)]) for each of SYSTEM_ROWS: one value when every
    file agrees; else the most common first, `N files`, then the others with their files. The
    dates are the run's first and last."""
    rows = []
    for label, keys in SYSTEM_ROWS:
        values: dict[str, list[str]] = {}
        for rel, res in runs:
            parts = [str(res.attrs[k]) for k in keys if res.attrs.get(k) not in (None, "")]
            if parts:
                values.setdefault(" / ".join(parts), []).append(rel)
        if not values:
            continue
        if keys == ("created_utc",):
            rows.append((label, [(f"{min(values)} to {max(values)}" if len(values) > 1
                                  else next(iter(values)), "")]))
            continue
        ordered = sorted(values.items(), key=lambda kv: -len(kv[1]))
        if len(ordered) == 1 and len(ordered[0][1]) == len(runs):
            rows.append((label, [(ordered[0][0], "")]))
            continue
        first, *others = ordered
        silent = len(runs) - sum(len(files) for files in values.values())
        rows.append((label, [(first[0], f"{len(first[1])} files"
                              + (f"; {silent} other(s) do not record it" if silent else ""))]
                     + [(value, ", ".join(files)) for value, files in others]))
    return rows


def plot_files(folder: Path, path: Path) -> list[str]:
    """The PNGs of one results file, relative to the run folder: `plots/<name>/` (make run's)
    and `<name>_plots/` beside the file (plot.py's default)."""
    stem = file_stem(path)
    found = []
    for where in (folder / "plots" / stem, path.parent / f"{stem}_plots"):
        if where.is_dir():
            found += sorted(p.relative_to(folder).as_posix() for p in where.rglob("*.png"))
    return found


def case_rows(res: Results, record: dict | None) -> list[dict[str, Any]]:
    """Per case: the summary record (summary.case_record), its verdict against the baseline
    (status and ratio, when compared) and the pairs shown; regressed cases first."""
    verdicts = {c["case"]: c for c in (record or {}).get("cases", [])}
    new = set((record or {}).get("only_in_candidate", []))
    rows = []
    for bench in res.benches():
        for case in res.cases_of(bench):
            row = case_record(case)
            judged = verdicts.get(case.key)
            row["status"] = (judged["status"] if judged
                             else "not in the baseline" if case.key in new else "")
            row["ratio"] = judged["ratio"] if judged else None
            row["pairs"] = list(row["predictions"].items())[:PAIRS_SHOWN]
            row["more_pairs"] = max(0, len(row["predictions"]) - PAIRS_SHOWN)
            row["anchor"] = f"{file_stem(res.path)}-{case.name}"
            rows.append(row)
    return sorted(rows, key=lambda r: r["status"] != "REGRESSION")


def verdict_of(path: Path, registry: Path) -> dict | None:
    """The compare step's verdict left beside the file, else a verdict made now."""
    _, js = verdict_paths(path)
    try:
        return json.loads(js.read_text())
    except (OSError, ValueError):
        pass
    try:
        return judge(path, registry)[0]
    except OSError:
        return None


def sections(folder: Path, registry: Path) -> tuple[list[Section], list[tuple[str, Results]]]:
    out, runs = [], []
    for path in result_files(folder):
        rel = path.relative_to(folder).as_posix()
        try:
            res = read_indexed(path, warn=False)
        except OSError as err:
            out.append(Section(rel, file_stem(path), f"not readable: {err}", [], [], None, ""))
            continue
        runs.append((rel, res))
        record = verdict_of(path, registry)
        line = summary_line(record) if record else "no verdict"
        txt, js = verdict_paths(path)
        links = [("results file", rel)] + [
            (label, p.relative_to(folder).as_posix()) for label, p in
            (("compare report", txt), ("verdict (JSON)", js)) if p.exists()]
        describe = res.describe() + (f" | other processes took {load_text(res)}"
                                     if other_load(res) else "")
        out.append(Section(rel, rel.replace("/", "-").removesuffix(".h5"), describe,
                           case_rows(res, record), plot_files(folder, path), record, line,
                           links))
    return out, runs


def regressed_cases(secs: list[Section]) -> list[dict[str, Any]]:
    """Every regressed case of the run, the largest ratio first."""
    found = []
    for sec in secs:
        for c in (sec.record or {}).get("cases", []):
            if c["status"] == "REGRESSION":
                found.append({**c, "file": sec.rel, "anchor": sec.anchor})
    return sorted(found, key=lambda c: -(c["ratio"] or 0))


def other_files(folder: Path, secs: list[Section]) -> tuple[list[str], list[str]]:
    """The run's files no section shows (text, CSV, JSON, other plots), and the images among
    them, relative to the folder."""
    shown = {p for s in secs for p in s.plots} | {rel for s in secs for _, rel in s.links}
    rest = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")
                  if p.is_file() and p.name != "index.html")
    rest = [p for p in rest if p not in shown]
    return [p for p in rest if not p.endswith(".png")], [p for p in rest if p.endswith(".png")]


def write_page(folder: Path, registry: Path = DEFAULT_REGISTRY) -> Path:
    """Writes `<folder>/index.html`; returns its path."""
    secs, runs = sections(folder, registry)
    files, images = other_files(folder, secs)
    page = render("run_page.html.j2", title=f"Run {folder.resolve().name}",
                  folder=str(folder), system=system_rows(runs),
                  sections=secs, verdicts=sorted(secs, key=lambda s: not s.flagged),
                  regressed=regressed_cases(secs), registry=str(registry),
                  other_files=files, other_images=images)
    out = folder / "index.html"
    out.write_text(page)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, help="a run's folder, e.g. results/<stamp>")
    parser.add_argument("--registry", type=Path, default=DEFAULT_REGISTRY,
                        help="baselines for the files without a verdict beside them "
                             "(default results/baselines)")
    args = parser.parse_args(argv)
    cli_warnings()
    if not args.folder.is_dir():
        print(f"error: {args.folder} is not a folder", file=sys.stderr)
        return 2
    if not result_files(args.folder):
        print(f"error: no results file (*.h5) under {args.folder}", file=sys.stderr)
        return 2
    print(write_page(args.folder, args.registry))
    return 0


if __name__ == "__main__":
    sys.exit(main())
