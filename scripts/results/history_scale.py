"""How long `history` takes over a year of nightly runs: copies of one run's results files
(a `make run` folder, or the baseline registry) with new stamps, then `history --case REGEX`
timed twice, the first time indexing every file (index.py), the second read from the index.

    suite history-scale [--files 5000] [--source results/baselines] [--case allreduce]
                        [--keep DIR]

The copies go into a temporary folder (or --keep DIR) with their own index; nothing under
the source is written. docs/REGRESSIONS.md quotes its figures.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import h5py

from scripts import ROOT
from scripts.results.suite_results import find_result_files

FIRST_NIGHT = datetime(2026, 1, 1, 2, 0, tzinfo=timezone.utc)


def make_copies(source: Path, dest: Path, files: int) -> list[Path]:
    """`files` copies of the results files under `source`, one folder per night
    (night_<n>/), each with `created_utc` that night and its own `git_commit`."""
    originals = [p for p in find_result_files([source]) if p.suffix == ".h5"]
    if not originals:
        raise FileNotFoundError(f"no results file (*.h5) under {source}")
    made = []
    for n in range(files):
        night, original = divmod(n, len(originals))
        folder = dest / f"night_{night:04d}"
        folder.mkdir(parents=True, exist_ok=True)
        copy = folder / originals[original].name
        shutil.copyfile(originals[original], copy)
        with h5py.File(copy, "r+") as f:
            stamp = FIRST_NIGHT + timedelta(days=night)
            f.attrs["created_utc"] = stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
            f.attrs["git_commit"] = f"{night:012x}"
        made.append(copy)
    return made


def timed_history(folder: Path, case: str) -> float:
    """Seconds one `history FOLDER --case CASE` takes (its output discarded)."""
    from scripts.results import history

    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        code = history.main([str(folder), "--case", case])
    if code != 0:
        raise RuntimeError(f"history exited {code}")
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=5000, help="results files to make")
    parser.add_argument("--source", type=Path, default=ROOT / "results" / "baselines",
                        help="folder whose results files are copied (default the registry)")
    parser.add_argument("--case", default="allreduce", help="history's --case (default allreduce)")
    parser.add_argument("--keep", type=Path, default=None,
                        help="make the copies here and keep them (default: a temporary folder)")
    args = parser.parse_args(argv)
    if args.files < 1:
        print(f"error: --files {args.files}: at least 1", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        dest = args.keep or Path(tmp) / "results"
        os.environ["SUITE_RESULTS_INDEX"] = str(Path(tmp) / "index.sqlite")
        start = time.perf_counter()
        make_copies(args.source, dest, args.files)
        print(f"{args.files} files made in {time.perf_counter() - start:.1f} s under {dest}")
        print(f"history --case {args.case}, indexing: {timed_history(dest, args.case):.1f} s")
        print(f"history --case {args.case}, indexed:  {timed_history(dest, args.case):.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
