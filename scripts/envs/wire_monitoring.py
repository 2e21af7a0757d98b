"""Open MPI's own count of the bytes a run sent (the pml `monitoring` component).

With `OMPI_MCA_pml_monitoring_enable=2` (filtered: collectives' internal messages apart from the
user's point-to-point ones), `..._enable_output=3` and `..._filename=F`, every rank writes at
`MPI_Finalize` the file `F.<world rank>.prof`: per peer, the bytes and messages it sent, in lines

    I<TAB>src<TAB>dst<TAB><n> bytes<TAB><m> msgs sent<TAB><histogram>   (internal: collectives)
    E<TAB>src<TAB>dst<TAB><n> bytes<TAB><m> msgs sent<TAB><histogram>   (external: point to point)

(`C`, `D`, `O2A`... lines: the collectives' logical volumes, not what crossed the wire). This is
the library's count of the messages its algorithms really sent, e.g. recursive halving for an
all-reduce, not the payload the caller handed over. Its MPI_T counters are not readable in
Debian's Open MPI 4.1.4, hence the files.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

ENABLE_VALUE = "2"


def monitoring_env(prefix: Path) -> dict[str, str]:
    """Environment that makes an Open MPI job write its per-rank `.prof` files at `prefix`."""
    return {
        "OMPI_MCA_pml_monitoring_enable": ENABLE_VALUE,
        "OMPI_MCA_pml_monitoring_enable_output": "3",
        "OMPI_MCA_pml_monitoring_filename": str(prefix),
    }


def read_prof(path: Path, ranks: int) -> dict[str, np.ndarray]:
    """One rank's file: {'internal': bytes to each peer, 'external': ...} as int64 [ranks]."""
    out = {"internal": np.zeros(ranks, np.int64), "external": np.zeros(ranks, np.int64)}
    for line in path.read_text().splitlines():
        fields = line.split("\t")
        if len(fields) < 4 or fields[0] not in ("I", "E") or not fields[3].endswith(" bytes"):
            continue
        kind = "internal" if fields[0] == "I" else "external"
        out[kind][int(fields[2])] += int(fields[3].split()[0])
    return out


def read_run(prefix: Path, ranks: int) -> np.ndarray:
    """Bytes each rank sent to each peer over the whole run, [ranks (from), ranks (to)]."""
    sent = np.zeros((ranks, ranks), np.int64)
    for r in range(ranks):
        path = Path(f"{prefix}.{r}.prof")
        if not path.exists():
            raise FileNotFoundError(f"{path}: no monitoring output (is this Open MPI with the "
                                    "pml monitoring component?)")
        counts = read_prof(path, ranks)
        sent[r] = counts["internal"] + counts["external"]
    return sent


def is_open_mpi(mpirun: str) -> bool:
    """Whether `mpirun --version` names Open MPI (the only MPI whose counters this reads)."""
    import subprocess

    try:
        text = subprocess.run([mpirun, "--version"], capture_output=True, text=True, timeout=30,
                              env=dict(os.environ)).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return "Open MPI" in text or "OpenRTE" in text
