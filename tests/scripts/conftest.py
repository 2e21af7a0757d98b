"""pytest setup for the scripts/ tests: the results-file fixture and the sp_tp
figures plot.py makes of one."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, Callable

import pytest

from synthetic_results import SCRIPTS, CaseSpec, write_results


def pytest_configure(config: pytest.Config) -> None:
    # matplotlib 3.9 calls pyparsing APIs that pyparsing >= 3.3 deprecates; not our concern.
    for module in ("matplotlib.*", "pyparsing.*"):
        config.addinivalue_line("filterwarnings", f"ignore::DeprecationWarning:{module}")


@pytest.fixture(autouse=True)
def results_index(tmp_path: Path, monkeypatch) -> Path:
    """Each test's results index in its own folder, never the user's cache (scripts/results/
    index.py); subprocesses inherit it."""
    from scripts.results.index import INDEX_ENV
    path = tmp_path / "index-cache" / "results_index.sqlite"
    monkeypatch.setenv(INDEX_ENV, str(path))
    return path


@pytest.fixture
def results_writer(tmp_path: Path) -> Callable[..., Path]:
    """`results_writer(filename, bench, cases, **kw)` writes a results file under tmp_path."""
    def write(filename: str, bench: str, cases: list[CaseSpec], **kw: Any) -> Path:
        return write_results(tmp_path / filename, bench, cases, **kw)
    return write


@pytest.fixture
def plot_module():
    """A fresh copy of scripts/plots/plot.py, whose functions a test may patch."""
    spec = importlib.util.spec_from_file_location("suite_plot", SCRIPTS / "plots" / "plot.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def sp_tp_figures(results_writer, tmp_path: Path, plot_module, monkeypatch) -> Callable[..., tuple]:
    """`sp_tp_figures(filename, cases)` writes a synthetic sp_tp results file and returns it as
    read and plot.py's sp_tp figures of it ({file name: figure}; nothing saved)."""
    def plot(filename: str, cases: list[CaseSpec]) -> tuple:
        from scripts.results import suite_results as sr
        captured = {}
        monkeypatch.setattr(plot_module, "_save",
                            lambda fig, path, written: captured.setdefault(path.name, fig))
        res = sr.read_results(results_writer(filename, "sp_tp", cases))
        assert plot_module.plot_sp_tp(res, "sp_tp", tmp_path, [])
        return res, captured
    return plot
