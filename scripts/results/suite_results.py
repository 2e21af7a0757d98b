"""Read the suite's HDF5 results files (docs/RESULTS_SCHEMA.md) into plain Python objects.

The only module in scripts/ that touches h5py; plot.py, compare.py and history.py build on it.

    from scripts.results.suite_results import read_results
    res = read_results("results/sp_tp_20250101T000000Z.h5")
    for case in res.cases_of("sp_tp"):
        print(case.key, case.params, case.median_s, case.step_times().max())
"""

from __future__ import annotations

import re
import sys
import warnings
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, NamedTuple

import h5py
import numpy as np

SCHEMA_VERSION = 1
PARTIAL_SUFFIX = ".partial"
RANKS_GROUP = "ranks"
# File attributes that must agree for two runs to be comparable. The process group
# (`group_size`, `group_count`) is among them: case names need not encode it (ring_attention's
# omit `--cp`, sp_tp's collectives omit `--tp`).
CONFIG_KEYS = ("bench", "backend", "transport", "world_size", "group_size", "group_count", "link")
# Shown for a parameter that one case records and the other does not (an older file).
ABSENT = "(absent)"
# Software a run's times depend on that is not part of its system (baselines.py keys a system
# by hardware, ranks, links and dtype): compare.py prints it beside every verdict and names a
# change next to a regression, history.py marks where it changed. (label, file attribute).
SOFTWARE_ATTRS = (("MPI", "mpi_version"), ("NCCL", "nccl_version"), ("CUDA", "cuda_version"),
                  ("GEMM/BLAS", "gemm_library"))
# Per case, where a case records the library it ran on (kernel_bench, the attention engines).
CASE_SOFTWARE_ATTRS = (("GEMM/BLAS", "gemm_library"), ("attention", "attn_library"))
NOT_RECORDED = "(not recorded)"


class SuiteWarning(UserWarning):
    """Base of the warnings that the scripts print as `warning: ...` lines."""


class IncompleteResultsWarning(SuiteWarning):
    """The file is a `.partial` one or has `complete != 1`: it may lack cases."""


class SchemaWarning(SuiteWarning):
    """The file departs from the schema this module knows (version, missing attributes)."""


def _to_py(value: Any) -> Any:
    """Convert an h5py attribute / dataset value to plain Python (str, int, float, list)."""
    if isinstance(value, (bytes, np.bytes_)):
        return bytes(value).decode("utf-8", errors="replace").rstrip("\x00")
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            return _to_py(value[()])
        if value.dtype.kind in ("S", "O", "U"):
            return [_to_py(v) for v in value.tolist()]
        return value.tolist()
    return value


def _read_dataset(ds: h5py.Dataset) -> Any:
    """Numeric datasets as numpy arrays, string datasets as lists of str."""
    data = ds[()]
    if isinstance(data, np.ndarray) and data.dtype.kind in ("S", "O", "U"):
        return _to_py(data)
    if isinstance(data, np.ndarray):
        return data
    return _to_py(data)


def natural_key(text: str) -> list[Any]:
    """Sort key that orders `n128` before `n1024`."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def step_times(time_s: np.ndarray) -> np.ndarray:
    """Step time per iteration: the max over ranks (axis 1) of `time_s[iterations, ranks]`."""
    arr = np.asarray(time_s, dtype=float)
    if arr.ndim == 1:  # tolerate a single-rank file written without the rank axis
        return arr
    if arr.ndim != 2:
        raise ValueError(f"time_s must be [iterations, ranks], got shape {arr.shape}")
    return arr.max(axis=1)


@dataclass(eq=False)
class Case:
    """One `/<bench>/<case>` group: its parameters, all attributes and its datasets."""

    bench: str
    name: str
    params: dict[str, Any]
    attrs: dict[str, Any]
    datasets: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """`<bench>/<case>`, the name under which cases of two files are paired (they are
        comparable only when their params agree as well, see `params_differences`)."""
        return f"{self.bench}/{self.name}"

    @property
    def median_s(self) -> float | None:
        """`time_median_s`, or the median of the step times when the attribute is missing."""
        value = self.attrs.get("time_median_s")
        if value is not None:
            return float(value)
        if "time_s" in self.datasets:
            return float(np.median(self.step_times()))
        return None

    @property
    def check_passed(self) -> int | None:
        """1 passed, 0 failed, -1 not checked, None when the attribute is absent."""
        value = self.attrs.get("check_passed")
        return None if value is None else int(value)

    def step_times(self) -> np.ndarray:
        """Per-iteration step times (max over ranks) from the `time_s` dataset."""
        if "time_s" not in self.datasets:
            raise KeyError(f"{self.key}: no time_s dataset (file read without datasets?)")
        return step_times(self.datasets["time_s"])

    def predictions(self) -> dict[str, tuple[float, float]]:
        """Every `pred_<x>` with a measured `<x>` beside it: {x: (measured, predicted)}."""
        pairs = {}
        for name, pred in self.attrs.items():
            if name.startswith("pred_") and name[5:] in self.attrs:
                pairs[name[5:]] = (self.attrs[name[5:]], pred)
        return pairs


@dataclass
class Results:
    """One results file: file attributes, per-rank info and every case it holds."""

    path: Path
    attrs: dict[str, Any]
    ranks: dict[str, list[str]]
    cases: dict[str, Case]
    # What tools derive from the attributes once per run (its system key, its verdict file).
    memo: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def complete(self) -> bool:
        """True for a file that ended normally (`complete == 1`, not `.partial`)."""
        return self.attrs.get("complete") == 1 and not str(self.path).endswith(PARTIAL_SUFFIX)

    @property
    def created(self) -> datetime | None:
        """`created_utc` parsed (timezone-aware, UTC assumed when none is given)."""
        return parse_utc(self.attrs.get("created_utc"))

    def benches(self) -> list[str]:
        """Bench names in the file, in name order."""
        return sorted({case.bench for case in self.cases.values()})

    def cases_of(self, bench: str) -> list[Case]:
        """Cases of one bench in natural name order."""
        found = [c for c in self.cases.values() if c.bench == bench]
        return sorted(found, key=lambda c: natural_key(c.name))

    @property
    def bench(self) -> str | None:
        """The `bench` attribute, or (a file without it) the one bench its cases belong to."""
        value = self.attrs.get("bench")
        if value not in (None, ""):
            return str(value)
        benches = self.benches()
        return benches[0] if len(benches) == 1 else None

    def config_attr(self, key: str) -> Any:
        """File attribute `key`, None when absent, except for the process group, which files
        written before it was recorded lack: there it is what the schema says for a benchmark
        without a group, one group of `world_size` (group_size = world_size, group_count = 1)."""
        value = self.attrs.get(key)
        if value is None and key == "group_size":
            return self.attrs.get("world_size")
        if value is None and key == "group_count" and "group_size" not in self.attrs:
            return 1
        return value

    def config(self) -> dict[str, Any]:
        """The attributes that must agree between comparable runs (see CONFIG_KEYS)."""
        return {k: self.config_attr(k) for k in CONFIG_KEYS}

    def describe(self) -> str:
        """One line naming bench, backend, transport, link and world size, for titles."""
        a = self.attrs
        line = (f"{a.get('bench', '?')} | {a.get('backend', '?')} / {a.get('transport', '?')}"
                f" | link {a.get('link', '?')} | {a.get('world_size', '?')} ranks")
        if a.get("simulated") == 1:  # SimGrid SMPI: say so in every title
            line = (f"SIMULATED on {a.get('sim_platform', '?')} ({a.get('sim_compute_mode', '?')} "
                    f"compute) | {line}")
        if a.get("oversubscribed") == 1:  # waiting ranks compete with computing ones
            line += (f" | oversubscribed: {a.get('ranks_per_host_max', '?')} ranks on"
                     f" {a.get('cpu_threads_per_host_min', '?')} CPU threads")
        return line


def _cudnn_release(library: Any) -> str | None:
    """`cudnn 9.19.0` from an `attn_library` such as `cudnn 9.19.0 (<path>; built against ...)`."""
    text = str(library or "")
    return text.split(" (")[0] if text.startswith("cudnn") else None


def software_versions(res: Results) -> dict[str, str]:
    """{label: version} of the libraries a run used (SOFTWARE_ATTRS), and `cuDNN`: the cuDNN
    releases its cases ran attention on (`none` when none did). A file that predates an
    attribute gives NOT_RECORDED."""
    versions = {label: str(res.attrs.get(attr, NOT_RECORDED)) for label, attr in SOFTWARE_ATTRS}
    cudnn = sorted({r for c in res.cases.values()
                    if (r := _cudnn_release(c.attrs.get("attn_library"))) is not None})
    versions["cuDNN"] = ", ".join(cudnn) or "none"
    return versions


def case_software(case: Case) -> dict[str, str]:
    """{label: library} a case records itself (CASE_SOFTWARE_ATTRS), e.g. kernel_bench's
    `gemm_library` or an attention case's `attn_library`."""
    return {label: str(case.attrs[attr]) for label, attr in CASE_SOFTWARE_ATTRS
            if attr in case.attrs}


def software_changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """`label: old -> new` for each library recorded on both sides with another value (one
    side not recording it is not a change: nothing is known)."""
    return [f"{label}: {before[label]} -> {after[label]}" for label in before
            if label in after and NOT_RECORDED not in (before[label], after[label])
            and before[label] != after[label]]


# A run shared its machine when other processes took more than this fraction of its cores
# (scripts/results/host_load.py records how many they took; compare.py does not judge such a run's
# slowdowns).
BUSY_FRACTION = 0.1


def other_load(res: Results) -> tuple[float, int] | None:
    """(cores other processes used while the run measured, the machine's cores), from the
    file attributes host_load.py writes; None for a run that did not record them."""
    other, cores = res.attrs.get("host_other_cores"), res.attrs.get("host_cores")
    if other is None or not cores:
        return None
    return float(other), int(cores)


def busy(res: Results) -> bool:
    """True when other processes took more than BUSY_FRACTION of the run's machine."""
    load = other_load(res)
    return load is not None and load[0] > BUSY_FRACTION * load[1]


def load_text(res: Results) -> str:
    """`1.3 of 2 cores`: what other processes took while the run measured (`unknown` when
    the run did not record it)."""
    load = other_load(res)
    return "unknown" if load is None else f"{load[0]:.1f} of {load[1]} cores"


def utc_now_iso() -> str:
    """Now, as the results files write times: `YYYY-MM-DDTHH:MM:SSZ`."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_utc(text: Any) -> datetime | None:
    """Parse an ISO 8601 time (a trailing `Z` included); None if absent or unparsable."""
    if not isinstance(text, str) or not text:
        return None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def _read_case(bench: str, name: str, group: h5py.Group, load_datasets: bool) -> Case:
    attrs = {k: _to_py(v) for k, v in group.attrs.items()}
    names = [p.strip() for p in str(attrs.get("params", "")).split(",") if p.strip()]
    missing = [p for p in names if p not in attrs]
    if missing:
        warnings.warn(f"/{bench}/{name}: params lists {missing} but they are not attributes",
                      SchemaWarning, stacklevel=3)
    params = {p: attrs.get(p) for p in names}
    datasets: dict[str, Any] = {}
    if load_datasets:
        def visit(path: str, obj: Any) -> None:
            if isinstance(obj, h5py.Dataset):
                datasets[path] = _read_dataset(obj)
        group.visititems(visit)
    return Case(bench=bench, name=name, params=params, attrs=attrs, datasets=datasets)


def read_results(path: str | Path, *, load_datasets: bool = True, warn: bool = True) -> Results:
    """Read a results file, complete or `.partial`.

    Warns (IncompleteResultsWarning) when the file is not complete, and (SchemaWarning) on an
    unknown `schema_version`. `load_datasets=False` reads attributes only, which is much
    cheaper when scanning many runs.
    """
    path = Path(path)
    with h5py.File(path, "r") as f:
        attrs = {k: _to_py(v) for k, v in f.attrs.items()}
        ranks: dict[str, list[str]] = {}
        cases: dict[str, Case] = {}
        for top_name, top in f.items():
            if top_name == RANKS_GROUP and isinstance(top, h5py.Group):
                for ds_name, ds in top.items():
                    if isinstance(ds, h5py.Dataset):
                        value = _read_dataset(ds)
                        ranks[ds_name] = value if isinstance(value, list) else list(value)
                continue
            if not isinstance(top, h5py.Group):
                continue
            for case_name, grp in top.items():
                if isinstance(grp, h5py.Group):
                    case = _read_case(top_name, case_name, grp, load_datasets)
                    cases[case.key] = case
    res = Results(path=path, attrs=attrs, ranks=ranks, cases=cases)
    if warn:
        warn_schema(res)
    return res


def warn_schema(res: Results) -> None:
    """The warnings of `read_results`: an unknown `schema_version` (SchemaWarning), a run that
    did not finish (IncompleteResultsWarning)."""
    version = res.attrs.get("schema_version")
    if version != SCHEMA_VERSION:
        warnings.warn(f"{res.path}: schema_version {version!r}, this tool knows {SCHEMA_VERSION}",
                      SchemaWarning, stacklevel=3)
    if not res.complete:
        why = ("a .partial file" if str(res.path).endswith(PARTIAL_SUFFIX)
               else f"complete = {res.attrs.get('complete')!r}")
        warnings.warn(f"{res.path}: run not complete ({why}); it holds {len(res.cases)} finished"
                      " case(s), others may be missing", IncompleteResultsWarning, stacklevel=3)


def _same_value(a: Any, b: Any) -> bool:
    """Equality of two parameter values, NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    return bool(a == b)


def params_differences(a: Case, b: Case, ignore: Iterable[str] = ()) -> list[str]:
    """`name: a != b` for each parameter the two cases do not share with the same value (one
    recorded by one case only counts, shown as `(absent)`), leaving out the names in `ignore`."""
    def show(params: dict[str, Any], name: str) -> str:
        return repr(params[name]) if name in params else ABSENT

    skip = set(ignore)
    names = [*a.params, *(n for n in b.params if n not in a.params)]
    return [f"{n}: {show(a.params, n)} != {show(b.params, n)}"
            for n in names if n not in skip and not (
                n in a.params and n in b.params and _same_value(a.params[n], b.params[n]))]


class CaseMatch(NamedTuple):
    """Cases of two files paired by name, then by parameters (see `match_cases`)."""

    pairs: list[tuple[Case, Case]]  # same name, same params: comparable
    only_base: list[str]  # keys of the cases only the first file holds
    only_cand: list[str]  # keys of the cases only the second file holds
    differing: list[tuple[Case, Case, list[str]]]  # same name, other params: not comparable


def match_cases(base: Results, cand: Results, ignore_params: Iterable[str] = ()) -> CaseMatch:
    """Pair the cases of two files by `<bench>/<case>` name. A pair is comparable only when the
    params agree too: a name need not encode every parameter (ring_attention's omits `n_c`,
    sp_tp's collectives omit `t`), so same-named cases with other params go to `differing`,
    with their `params_differences`. Parameters named in `ignore_params` may differ."""
    ignore = tuple(ignore_params)
    order = sorted(set(base.cases) | set(cand.cases), key=natural_key)
    match = CaseMatch([], [k for k in order if k not in cand.cases],
                      [k for k in order if k not in base.cases], [])
    for key in order:
        if key in base.cases and key in cand.cases:
            b, c = base.cases[key], cand.cases[key]
            diffs = params_differences(b, c, ignore)
            if diffs:
                match.differing.append((b, c, diffs))
            else:
                match.pairs.append((b, c))
    return match


def config_differences(a: Results, b: Results, keys: Iterable[str] = CONFIG_KEYS) -> list[str]:
    """Human-readable `key: a != b` lines for the configuration attributes that differ (the
    process group of an older file read as one group of world_size, see `config_attr`)."""
    return [f"{k}: {a.config_attr(k)!r} != {b.config_attr(k)!r}"
            for k in keys if a.config_attr(k) != b.config_attr(k)]


def add_case_figures(path: str | Path, bench: str, case: str, attrs: dict[str, Any],
                     datasets: dict[str, np.ndarray]) -> None:
    """Adds (or replaces) figures measured after the run, such as the MPI library's own byte
    counts (scripts/envs/wire_bytes.py), to one case of a complete results file."""
    with h5py.File(path, "a") as f:
        group = f[bench][case]
        for name, value in attrs.items():
            group.attrs[name] = value
        for name, value in datasets.items():
            if name in group:
                del group[name]
            group.create_dataset(name, data=value)


def add_file_attrs(path: str | Path, attrs: dict[str, Any]) -> None:
    """Adds (or replaces) file attributes of a complete results file, such as how busy the
    machine was with other work while the run measured (scripts/results/host_load.py)."""
    with h5py.File(path, "a") as f:
        for name, value in attrs.items():
            f.attrs[name] = value


def find_result_files(inputs: Iterable[str | Path], include_partial: bool = False) -> list[Path]:
    """Expand files and directories (searched recursively for `*.h5`) into a list of files."""
    found: list[Path] = []
    for item in map(Path, inputs):
        if item.is_dir():
            found.extend(sorted(item.rglob("*.h5")))
            if include_partial:
                found.extend(sorted(item.rglob("*.h5" + PARTIAL_SUFFIX)))
        else:
            found.append(item)
    return found


def file_stem(path: Path) -> str:
    """`run.h5` and `run.h5.partial` both give `run`."""
    name = path.name
    if name.endswith(PARTIAL_SUFFIX):
        name = name[: -len(PARTIAL_SUFFIX)]
    return name[:-3] if name.endswith(".h5") else Path(name).stem


def warn(message: str) -> None:
    """Emit a SuiteWarning (the scripts' own warnings)."""
    warnings.warn(message, SuiteWarning, stacklevel=2)


def cli_warnings() -> None:
    """Print every SuiteWarning as one `warning: ...` line on stderr, each time it occurs.

    For the command-line scripts; other warnings keep Python's default filters and format.
    """
    default_show = warnings.showwarning

    def show(message: Any, category: type[Warning], filename: str, lineno: int,
             file: Any = None, line: str | None = None) -> None:
        if issubclass(category, SuiteWarning):
            print(f"warning: {message}", file=file or sys.stderr)
        else:
            default_show(message, category, filename, lineno, file, line)
    warnings.showwarning = show
    warnings.simplefilter("always", SuiteWarning)
