"""The results index (scripts/results/index.py): history, the baseline lookup and summary read
through it; a second read opens no HDF5 file; a changed file is read again; an index of an
older schema is rebuilt with one line; bad files give one line each and the rest is read;
nothing under the results tree changes."""

from __future__ import annotations

import hashlib
import re
import sqlite3
from pathlib import Path

import h5py
import numpy as np
import pytest

from scripts.results import history, index
from scripts.results.history_scale import make_copies
from synthetic_results import REPO, write_results

REGISTRY = REPO / "results" / "baselines"


def tree_checksums(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def nights(tmp_path: Path) -> Path:
    """Three nights of copies of the registry's real results files."""
    root = tmp_path / "results"
    make_copies(REGISTRY, root, 3 * len(list(REGISTRY.rglob("*.h5"))))
    return root


def count_hdf5_opens(monkeypatch) -> list[str]:
    opened: list[str] = []
    real = h5py.File

    def counting(name, *args, **kwargs):
        opened.append(str(name))
        return real(name, *args, **kwargs)
    monkeypatch.setattr(h5py, "File", counting)
    return opened


def test_second_history_opens_no_hdf5_file(nights, monkeypatch, capsys):
    opened = count_hdf5_opens(monkeypatch)
    assert history.main([str(nights), "--case", "allreduce"]) == 0
    first = capsys.readouterr().out
    assert len(opened) == len(list(nights.rglob("*.h5")))
    opened.clear()
    assert history.main([str(nights), "--case", "allreduce"]) == 0
    assert opened == []
    assert capsys.readouterr().out == first
    # the three nights of one system land in one history, keyed by system
    block = first.split("sp_tp/allreduce_fp32_act_s1024_b1_h1024\n")[1].split("\n\n")[0]
    assert re.findall(r"system (\S+)", block) == [
        "Intel-Xeon-Processor-2-cores_x4_loopback_mpi_cpu_fp32"]
    assert len(re.findall(r"^  \[\d+\]", block, flags=re.M)) == 3


def test_a_changed_file_is_read_again(nights, monkeypatch):
    files = sorted(nights.rglob("*.h5"))
    list(index.shared_index().read_many(files))
    with h5py.File(files[0], "r+") as f:
        f.attrs["git_commit"] = "changed00000"
    opened = count_hdf5_opens(monkeypatch)
    runs = {str(p): r for p, r in index.shared_index().read_many(files)}
    assert opened == [str(files[0])]
    assert runs[str(files[0])].attrs["git_commit"] == "changed00000"


def test_an_older_schema_is_rebuilt_with_one_line(tmp_path, nights, capsys):
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
        db.execute("INSERT INTO meta VALUES ('schema', '0')")
        db.execute("CREATE TABLE files (path TEXT PRIMARY KEY, stale TEXT)")
    with index.ResultsIndex(path) as idx:
        lines = [ln for ln in capsys.readouterr().err.splitlines() if ln]
        assert len(lines) == 1 and str(path) in lines[0] and "rebuilt" in lines[0]
        runs = list(idx.read_many(sorted(nights.rglob("*.h5"))))
        assert all(not isinstance(r, OSError) for _, r in runs)
    with index.ResultsIndex(path) as idx:
        assert capsys.readouterr().err == ""
        list(idx.read_many(sorted(nights.rglob("*.h5"))))
        assert idx.hdf5_reads == 0


def test_bad_files_give_one_line_each_and_the_rest_is_read(nights, tmp_path, capsys):
    good = sorted(nights.rglob("*.h5"))
    truncated = nights / "truncated.h5"
    truncated.write_bytes(good[0].read_bytes()[:3000])
    foreign_file = nights / "foreign.h5"
    with h5py.File(foreign_file, "w") as f:
        f.create_dataset("image", data=np.zeros((4, 4)))
    bare = write_results(nights / "bare.h5", "sp_tp", [{
        "name": "allreduce_fp32_n1024", "params": {"op": "allreduce", "n_bytes": 1024},
        "time_s": np.full((3, 4), 1e-3)}])
    with h5py.File(bare, "r+") as f:
        for attr in ("device_names", "hostnames", "git_commit"):
            del f.attrs[attr]
    before = tree_checksums(nights)
    for _ in range(2):  # read, then read again from the index: the same lines
        assert history.main([str(nights), "--case", "allreduce"]) == 0
        out, err = capsys.readouterr()
        warnings = [ln for ln in err.splitlines() if ln.startswith("warning: ")
                    and "configurations" not in ln]
        assert len(warnings) == 3, err
        assert any(str(truncated) in ln and "not readable as HDF5" in ln for ln in warnings)
        assert any(str(foreign_file) in ln and "no results file of the suite" in ln
                   for ln in warnings)
        assert any(str(bare) in ln and "device_names, hostnames, git_commit" in ln
                   for ln in warnings)
        assert len(re.findall(r"^  \[\d+\] ", out, flags=re.M)) >= len(good)
    assert tree_checksums(nights) == before


def test_a_baseline_of_another_system_gives_one_line(tmp_path, capsys):
    from scripts.results.baselines import entries

    registry = tmp_path / "registry"
    wrong = registry / "some-other-system_x8_nvlink_nccl_cuda_bf16"
    wrong.mkdir(parents=True)
    source = REGISTRY / "Intel-Xeon-Processor-2-cores_x4_loopback_mpi_cpu_fp32" / "ulysses.h5"
    (wrong / "ulysses.h5").write_bytes(source.read_bytes())
    before = tree_checksums(registry)
    from scripts.results.suite_results import cli_warnings
    cli_warnings()
    found = entries(registry)
    assert len(found) == 1
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln]
    assert len(err) == 1 and "ulysses.h5" in err[0] and \
        "Intel-Xeon-Processor-2-cores_x4_loopback_mpi_cpu_fp32" in err[0]
    assert tree_checksums(registry) == before


def test_the_index_lives_outside_the_results_tree(nights, results_index):
    list(index.shared_index().read_many(sorted(nights.rglob("*.h5"))))
    assert results_index.is_file()
    assert nights not in results_index.parents
