"""An index of results files (SQLite, Python's own sqlite3): each file's attributes and its
cases' attributes, as `read_results(..., load_datasets=False)` gives them, kept per file with the
file's size and modification time. history, run-verdict (the baseline lookup), report-page
and summary read through it, so a history of thousands of files opens only the files that are
new or changed since the last read.

The index is a cache, never a source: it lives outside the results tree (default
`$XDG_CACHE_HOME/parallelism-bench/results_index.sqlite`, `~/.cache/...` without it; the
environment variable SUITE_RESULTS_INDEX names another file), it is rebuilt entry by entry
when a file's size or mtime changed, and whole when it was written by another schema (one
line says so). Reading through it changes nothing under results/. Files are keyed by their
absolute path, so the runs of many Slurm jobs writing to one shared results tree share
one index and one history (keyed by system: baselines.system_key).
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from scripts.results.suite_results import Case, Results, read_results, warn_schema

INDEX_SCHEMA = 2
INDEX_ENV = "SUITE_RESULTS_INDEX"
# Entries written per transaction while indexing many new files.
COMMIT_EVERY = 500


def default_index_path() -> Path:
    """SUITE_RESULTS_INDEX, else the user's cache folder (outside every results tree)."""
    if os.environ.get(INDEX_ENV):
        return Path(os.environ[INDEX_ENV])
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "parallelism-bench" / "results_index.sqlite"


def _plain(value: Any) -> Any:
    """numpy values in a Results as JSON-ready Python values."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


CaseFilter = Callable[[str], Any]


def _case_rows(key: str, res: Results) -> list[tuple[str, str, str]]:
    return [(key, c.key, json.dumps([c.bench, c.name, c.params, c.attrs], default=_plain))
            for c in res.cases.values()]


def _without_cases(res: Results, keep: CaseFilter | None) -> Results:
    if keep is None:
        return res
    cases = {k: c for k, c in res.cases.items() if keep(k)}
    return Results(path=res.path, attrs=res.attrs, ranks=res.ranks, cases=cases)


class ResultsIndex:
    """The index at `path` (default_index_path()); `read` and `read_many` return a file's
    Results (attributes only) from it, reading the HDF5 file only when it is new or changed
    (`hdf5_reads` counts those reads)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = Path(path) if path else default_index_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, timeout=120)
        self.hdf5_reads = 0
        self._prepare()

    def _prepare(self) -> None:
        with self.db:
            self.db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            row = self.db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            if row is not None and row[0] != str(INDEX_SCHEMA):
                print(f"results index {self.path}: written by schema {row[0]}, this tool uses "
                      f"{INDEX_SCHEMA}; rebuilt from the results files", file=sys.stderr)
                self.db.execute("DROP TABLE IF EXISTS files")
                self.db.execute("DROP TABLE IF EXISTS cases")
            self.db.execute("CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, "
                            "mtime_ns INTEGER, size INTEGER, error TEXT, attrs TEXT)")
            # one row per case, so a query for some cases parses only theirs
            self.db.execute("CREATE TABLE IF NOT EXISTS cases (path TEXT, key TEXT, case_json TEXT)")
            self.db.execute("CREATE INDEX IF NOT EXISTS cases_of_file ON cases (path)")
            self.db.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (str(INDEX_SCHEMA),))

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> "ResultsIndex":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _indexed(self, path: Path, key: str, row: tuple, keep: CaseFilter | None) -> Results:
        attrs, ranks = json.loads(row[3])
        cases = {}
        for case_key, case_json in self.db.execute(
                "SELECT key, case_json FROM cases WHERE path = ?", (key,)):
            if keep is None or keep(case_key):
                bench, name, params, case_attrs = json.loads(case_json)
                cases[case_key] = Case(bench=bench, name=name, params=params, attrs=case_attrs)
        return Results(path=path, attrs=attrs, ranks=ranks, cases=cases)

    def _entry(self, path: Path, keep: CaseFilter | None
               ) -> tuple[Results | None, OSError | None, bool]:
        """(results, error, fresh): fresh is False when the HDF5 file had to be read."""
        stat = path.stat()
        key = os.path.abspath(path)
        row = self.db.execute("SELECT mtime_ns, size, error, attrs FROM files WHERE path = ?",
                              (key,)).fetchone()
        if row is not None and (row[0], row[1]) == (stat.st_mtime_ns, stat.st_size):
            if row[2] is not None:
                return None, OSError(row[2]), True
            return self._indexed(path, key, row, keep), None, True
        self.hdf5_reads += 1
        self.db.execute("DELETE FROM cases WHERE path = ?", (key,))
        try:
            res = read_results(path, load_datasets=False, warn=False)
        except OSError as err:
            self.db.execute("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, NULL)",
                            (key, stat.st_mtime_ns, stat.st_size, str(err)))
            return None, err, False
        self.db.execute("INSERT OR REPLACE INTO files VALUES (?, ?, ?, NULL, ?)",
                        (key, stat.st_mtime_ns, stat.st_size,
                         json.dumps([res.attrs, res.ranks], default=_plain)))
        self.db.executemany("INSERT INTO cases VALUES (?, ?, ?)", _case_rows(key, res))
        return _without_cases(res, keep), None, False

    def read_many(self, paths: Iterable[Path], warn: bool = True,
                  keep: CaseFilter | None = None) -> Iterator[tuple[Path, Results | OSError]]:
        """(path, Results or the OSError that reading it raised) per file, in order; with
        `warn`, read_results' warnings (schema version, a run not complete); with `keep`,
        only the cases whose `<bench>/<case>` key it accepts."""
        pending = 0
        try:
            for path in map(Path, paths):
                res, err, fresh = self._entry(path, keep)
                pending += not fresh
                if pending >= COMMIT_EVERY:
                    self.db.commit()
                    pending = 0
                if res is not None and warn:
                    warn_schema(res)
                yield path, res if res is not None else err
        finally:
            self.db.commit()

    def read(self, path: Path, warn: bool = True) -> Results:
        """One file's Results; raises its OSError when it is not readable as HDF5."""
        (_, found), = self.read_many([path], warn)
        if isinstance(found, OSError):
            raise found
        return found


_shared: dict[Path, ResultsIndex] = {}


def shared_index() -> ResultsIndex:
    """The process's index at default_index_path() (opened once per path)."""
    path = default_index_path()
    if path not in _shared:
        _shared[path] = ResultsIndex(path)
    return _shared[path]


def read_indexed(path: Path, warn: bool = True) -> Results:
    """`read_results(path, load_datasets=False)` through the shared index."""
    return shared_index().read(Path(path), warn)
