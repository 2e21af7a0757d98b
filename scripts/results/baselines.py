"""Baseline registry: reference results files under results/baselines/, keyed by system.

A system is what must agree for two runs' times to be comparable: the device names (a GPU's
name, or on the CPU backend the CPU model and its core count, e.g. `Intel(R) Xeon(R) Processor
(2 cores)`), the
world size, the benchmark's process group (`group_size` and `group_count`: `--tp`, `--cp`,
`--ep`), the link preset (`link`), the transport, the backend and the dtype. A file written
before the group was recorded counts as one group of its world size, as the schema says of a
benchmark without a group. A baseline is stored as
`results/baselines/<system key>/<name>.h5`, under the results file's own name, so every file of
a `make run` (ring_attention.h5 and ring_docs.h5 hold the same bench) has a baseline of its
own, and filing a later run of the same file replaces it (--force). The key names the group
(`g<size>x<count>`) only when it is not the whole world, so the keys of such runs are those of
older registries (which stored `<bench>[_<mode>].h5`: still found, see below). Lookup reads the attributes of every file in the registry (so a file under any folder name,
older keys included, is found by what it holds) and picks, among the files of the same system
and bench, the one sharing most comparable cases with the run (same name and parameters; newest
first on a tie, and a file of the run's own name before others). Software versions (MPI, NCCL, CUDA, cuDNN, BLAS) are not part of a system:
compare.py shows them beside every verdict and names a change next to a regression.

    baselines.py list [--registry DIR]            every baseline and its system key
    baselines.py add RUN.h5 [--registry DIR]      store a run as the baseline of its system
    baselines.py add RUN_DIR/ [--registry DIR]    every complete results file under RUN_DIR
                                                  (a whole `make run`: what `make baseline` does)
    baselines.py find RUN.h5 [--registry DIR]     print the baseline compare.py would pick
    baselines.py rekey --device-names NAME [--registry DIR] [--host HOST]
        re-file the CPU baselines written before the CPU model was recorded (device_names
        `cpu`) that ran on HOST (default: this machine) under NAME, which a fresh run on
        that machine records
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

from scripts import ROOT
from scripts.results.fingerprint import node_count
from scripts.results.index import shared_index
from scripts.results.suite_results import (Results, busy, cli_warnings, file_stem,
                                           find_result_files, load_text, match_cases, read_results,
                                           utc_now_iso, warn)

DEFAULT_REGISTRY = ROOT / "results" / "baselines"
SYSTEM_KEYS = ("device_names", "world_size", "group_size", "group_count", "link", "transport",
               "backend", "dtype")
# What the CPU backend called its device before it recorded the CPU model.
LEGACY_CPU_DEVICE = "cpu"


def legacy_cpu_device(res: Results) -> bool:
    """A CPU-backend file from before the CPU model was recorded: its system matches any CPU
    machine's."""
    return (str(res.attrs.get("backend")) == "cpu"
            and str(res.attrs.get("device_names")) == LEGACY_CPU_DEVICE)


def run_dtype(res: Results) -> str:
    """The file's `dtype`, or (older files) the dtype its cases agree on."""
    if res.attrs.get("dtype"):
        return str(res.attrs["dtype"])
    found = {str(c.params.get("dtype")) for c in res.cases.values() if c.params.get("dtype")}
    return found.pop() if len(found) == 1 else "mixed"


def system_of(res: Results) -> dict[str, str]:
    """The attributes that define a system (see SYSTEM_KEYS), as strings; an older file
    without the process-group attributes has one group of world_size (`Results.config_attr`)."""
    system = {}
    for key in SYSTEM_KEYS:
        value = run_dtype(res) if key == "dtype" else res.config_attr(key)
        system[key] = "?" if value is None else str(value)
    nodes = node_count(res)
    if nodes is not None and nodes > 1:  # one node is not named: the keys of earlier registries
        system["nodes"] = str(nodes)
    if res.attrs.get("simulated") == 1:  # a simulated system is never a measured one
        system["simulated"] = simulated_system(res)
    return system


def simulated_system(res: Results) -> str:
    """`sim-<platform>-<compute mode>-<hash>` of a simulated run (file attribute simulated = 1);
    the hash covers the platform's numbers and the modeled F, so a platform preset run with
    other links is another system."""
    a = res.attrs
    detail = f"{a.get('sim_platform_detail', '')}|{a.get('sim_flops', '')}"
    digest = hashlib.sha1(detail.encode()).hexdigest()[:8]
    return f"sim-{a.get('sim_platform', '?')}-{a.get('sim_compute_mode', '?')}-{digest}"


def system_key(res: Results) -> str:
    """A folder name for the system, e.g. `NVIDIA-H100-80GB-HBM3_x8_nvlink_nccl_cuda_bf16`, or
    `..._x16_g8x2_...` for groups of 8 ranks, 2 at once (`--tp 8` on 16 ranks). A group of the
    whole world is not named, which keeps the keys that registries used before groups were."""
    if "system_key" not in res.memo:
        res.memo["system_key"] = _system_key(res)
    return res.memo["system_key"]


def _system_key(res: Results) -> str:
    s = system_of(res)
    group = ([] if (s["group_size"], s["group_count"]) == (s["world_size"], "1")
             else [f"g{s['group_size']}x{s['group_count']}"])
    devices = re.sub(r"\((R|TM)\)", "", s["device_names"], flags=re.I)  # Intel(R), Core(TM)
    nodes = [f"n{s['nodes']}"] if "nodes" in s else []
    parts = [devices, f"x{s['world_size']}", *nodes, *group, s["link"], s["transport"], s["backend"],
             s["dtype"], *([s["simulated"]] if "simulated" in s else [])]
    return "_".join(re.sub(r"[^A-Za-z0-9.+-]+", "-", part).strip("-") for part in parts)


@dataclass
class Choice:
    path: Path
    results: Results
    shared_cases: int


def entries(registry: Path) -> list[Results]:
    """Every results file in the registry (attributes only, through the results index); one
    warning per file not readable, and per file filed under another system's folder (still
    used, as a baseline of the system it holds)."""
    found = []
    for path, res in shared_index().read_many(sorted(Path(registry).rglob("*.h5")), warn=False):
        if isinstance(res, OSError):
            warn(f"{path}: baseline not readable as HDF5 ({res}); skipped")
            continue
        if path.parent != Path(registry) and path.parent.name != system_key(res):
            warn(f"{path}: filed under {path.parent.name} but holds a run of system "
                 f"{system_key(res)}; used as a baseline of that system only")
        found.append(res)
    return found


def find_baseline(run: Results, registry: Path = DEFAULT_REGISTRY,
                  ignore_params: tuple[str, ...] = ()) -> Choice | None:
    """The baseline for `run`: same system and bench, most comparable cases in common (same
    name and params, but for `ignore_params`), then the file of the run's own name, then the
    newest."""
    system, bench = system_of(run), run.bench
    best: tuple[tuple[int, bool, str], Choice] | None = None
    for base in entries(registry):
        if base.bench != bench or system_of(base) != system:
            continue
        if base.path.resolve() == Path(run.path).resolve():
            continue
        shared = len(match_cases(base, run, ignore_params).pairs)
        if shared == 0:
            continue
        rank = (shared, base.path.name == Path(run.path).name,
                str(base.attrs.get("created_utc", "")))
        if best is None or rank > best[0]:
            best = (rank, Choice(base.path, base, shared))
    return best[1] if best else None


def add_baseline(run_path: Path, registry: Path = DEFAULT_REGISTRY, force: bool = False) -> Path:
    """Copies a complete run into `<registry>/<system key>/<its file name>`; returns the new
    path."""
    run = read_results(run_path, load_datasets=False, warn=False)
    if not run.complete:
        raise ValueError(f"{run_path}: not a complete run; only complete runs become baselines")
    dest = Path(registry) / system_key(run) / f"{file_stem(Path(run_path))}.h5"
    if dest.exists() and not force:
        raise FileExistsError(f"{dest} exists (--force replaces it)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(run_path, dest)
    return dest


def busy_warning(path: Path) -> str | None:
    """A warning for a baseline measured while other processes took part of its machine."""
    res = read_results(path, load_datasets=False, warn=False)
    if not busy(res):
        return None
    return (f"warning: {path.name}: other processes took {load_text(res)} while it ran, so its "
            "times are slower than this machine's; a run on a quiet machine makes a better "
            "baseline")


def add_run_folder(folder: Path, registry: Path = DEFAULT_REGISTRY,
                   force: bool = False) -> tuple[list[Path], list[str]]:
    """Files every complete results file under `folder` (add_baseline); returns the baselines
    written and one line per file left out (not complete, or its baseline exists)."""
    written, skipped = [], []
    for path in find_result_files([folder]):
        try:
            written.append(add_baseline(path, registry, force))
        except (ValueError, FileExistsError, OSError) as err:
            skipped.append(str(err))
    return written, skipped


def rekey_legacy_cpu(registry: Path, device_names: str, host: str) -> list[tuple[Path, Path]]:
    """Files of the registry with device_names `cpu` (CPU backend) that ran on `host` alone get
    `device_names` = `device_names` (and /ranks/device), a `device_names_rekeyed` note, and move
    to their new system's folder. Returns (old path, new path) pairs."""
    import h5py  # the only write to a results file outside the C++ writer

    moved = []
    for res in entries(registry):
        if not legacy_cpu_device(res) or str(res.attrs.get("hostnames")) != host:
            continue
        note = (f"was `{LEGACY_CPU_DEVICE}`: written before the CPU model was recorded; "
                f"re-keyed {utc_now_iso()} by baselines.py rekey as run on host {host}")
        with h5py.File(res.path, "r+") as f:
            f.attrs["device_names"] = device_names
            f.attrs["device_names_rekeyed"] = note
            if "ranks/device" in f:
                ds = f["ranks/device"]
                ds[...] = [device_names] * ds.shape[0]
        rekeyed = read_results(res.path, load_datasets=False, warn=False)
        dest = Path(registry) / system_key(rekeyed) / res.path.name
        if dest.exists():
            raise FileExistsError(f"{dest} exists; {res.path} re-keyed in place, not moved")
        dest.parent.mkdir(parents=True, exist_ok=True)
        res.path.rename(dest)
        if not any(res.path.parent.iterdir()):
            res.path.parent.rmdir()
        moved.append((res.path, dest))
    return moved


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("list", "add", "find", "rekey"))
    parser.add_argument("run", nargs="?", type=Path,
                        help="results file (add, find), or a run's folder (add)")
    parser.add_argument("--registry", type=Path, default=DEFAULT_REGISTRY,
                        help="registry folder (default results/baselines)")
    parser.add_argument("--force", action="store_true", help="add: replace an existing baseline")
    parser.add_argument("--device-names", default=None,
                        help="rekey: the CPU's device name as a run on that machine records it "
                             "(the file attribute device_names)")
    parser.add_argument("--host", default=socket.gethostname(),
                        help="rekey: only files whose hostnames attribute is this host "
                             "(default: this machine's)")
    args = parser.parse_args(argv)
    cli_warnings()
    if args.command == "rekey":
        if not args.device_names or args.device_names == LEGACY_CPU_DEVICE:
            print("error: rekey needs --device-names (a CPU model, not `cpu`)", file=sys.stderr)
            return 2
        try:
            moved = rekey_legacy_cpu(args.registry, args.device_names, args.host)
        except (OSError, FileExistsError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        for old, new in moved:
            print(f"{old} -> {new}")
        if not moved:
            print(f"no `{LEGACY_CPU_DEVICE}` baseline of host {args.host} in {args.registry}")
        return 0
    if args.command == "list":
        for res in entries(args.registry):
            print(f"{system_key(res):<50} {res.attrs.get('bench', '?'):<16} "
                  f"{len(res.cases):>4} cases  {res.attrs.get('created_utc', '?')}  {res.path}")
        return 0
    if args.run is None or not args.run.exists():
        print(f"error: {args.command} needs an existing results file", file=sys.stderr)
        return 2
    if args.command == "add" and args.run.is_dir():
        written, skipped = add_run_folder(args.run, args.registry, args.force)
        for path in written:
            print(path)
            if (note := busy_warning(path)) is not None:
                print(note, file=sys.stderr)
        for line in skipped:
            print(f"not filed: {line}", file=sys.stderr)
        if not written and not skipped:
            print(f"error: no results file (*.h5) under {args.run}", file=sys.stderr)
        return 0 if written and not skipped else 2
    try:
        if args.command == "add":
            path = add_baseline(args.run, args.registry, args.force)
            print(path)
            if (note := busy_warning(path)) is not None:
                print(note, file=sys.stderr)
            return 0
        choice = find_baseline(read_results(args.run, load_datasets=False, warn=False),
                               args.registry)
    except (ValueError, FileExistsError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if choice is None:
        print(f"no baseline in {args.registry} for this system", file=sys.stderr)
        return 1
    print(choice.path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
