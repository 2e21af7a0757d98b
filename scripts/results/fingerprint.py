"""A run's environment fingerprint: the file attributes that say on what it ran (hardware,
drivers and libraries, nodes, link, the suite's commit), and the fields that differ between two
runs, which every verdict line names and the change-point list gives per step.

Attributes a file predates are absent and never count as a difference (nothing is known).
"""

from __future__ import annotations

from typing import Any

from scripts.results.suite_results import Results

# (label, file attribute), in the order a verdict names them.
FINGERPRINT = (
    ("devices", "device_names"), ("CPU", "cpu_model"), ("CPU flags", "cpu_flags"),
    ("GPU driver", "gpu_driver"), ("CUDA", "cuda_version"), ("cuDNN", "cudnn_version"),
    ("NCCL", "nccl_version"), ("MPI", "mpi_version"), ("BLAS", "gemm_library"),
    ("BLAS core", "blas_core"), ("backend", "backend"), ("ranks", "world_size"),
    ("nodes", "node_count"), ("hosts", "hostnames"), ("link", "link"), ("link env", "link_env"),
    ("commit", "git_commit"),
)
# Without these a file says nothing of where it ran (older or foreign files).
CORE_FIELDS = ("device_names", "hostnames", "link", "git_commit")
# Fields whose values are long lists: a difference is summarised, not printed whole.
LONG_FIELDS = ("cpu_flags", "hostnames")


def node_count(res: Results) -> int | None:
    """`node_count`, or the number of distinct names in `hostnames` (older files)."""
    if res.attrs.get("node_count") is not None:
        return int(res.attrs["node_count"])
    hosts = {h.strip() for h in str(res.attrs.get("hostnames", "")).split(",") if h.strip()}
    return len(hosts) or None


def fingerprint(res: Results) -> dict[str, Any]:
    """{file attribute: value} of the fingerprint fields the file records (node_count derived
    from hostnames where the file predates it)."""
    found = {attr: res.attrs[attr] for _, attr in FINGERPRINT if res.attrs.get(attr) is not None}
    nodes = node_count(res)
    if nodes is not None:
        found["node_count"] = nodes
    return found


def missing_core(res: Results) -> list[str]:
    """The CORE_FIELDS the file lacks."""
    return [attr for attr in CORE_FIELDS if res.attrs.get(attr) in (None, "")]


def foreign(res: Results) -> bool:
    """True for an HDF5 file that is no results file of the suite: no schema version, no
    bench, no case."""
    return not res.cases and res.attrs.get("schema_version") is None and not res.attrs.get("bench")


def _shown(attr: str, before: Any, after: Any) -> str:
    if attr in LONG_FIELDS:
        old = {s.strip() for s in str(before).replace(",", " ").split() if s.strip()}
        new = {s.strip() for s in str(after).replace(",", " ").split() if s.strip()}
        gained, lost = sorted(new - old), sorted(old - new)
        parts = ([f"+{' +'.join(gained[:4])}"] if gained else []) + (
            [f"-{' -'.join(lost[:4])}"] if lost else [])
        more = len(gained) + len(lost) - min(len(gained), 4) - min(len(lost), 4)
        return " ".join(parts) + (f" (+{more} more)" if more > 0 else "")
    return f"{before} -> {after}"


def fingerprint_diff(before: Results, after: Results,
                     skip: tuple[str, ...] = ()) -> list[str]:
    """`label: old -> new` for each fingerprint field both runs record with other values,
    leaving out the attributes in `skip`."""
    a, b = fingerprint(before), fingerprint(after)
    return [f"{label}: {_shown(attr, a[attr], b[attr])}" for label, attr in FINGERPRINT
            if attr not in skip and attr in a and attr in b and str(a[attr]) != str(b[attr])]
