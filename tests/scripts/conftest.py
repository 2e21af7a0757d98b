"""pytest setup for the scripts/ tests: import path and the results-file fixture."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from synthetic_results import CaseSpec, write_results  # noqa: E402


def pytest_configure(config: pytest.Config) -> None:
    # matplotlib 3.9 calls pyparsing APIs that pyparsing >= 3.3 deprecates; not our concern.
    for module in ("matplotlib.*", "pyparsing.*"):
        config.addinivalue_line("filterwarnings", f"ignore::DeprecationWarning:{module}")


@pytest.fixture
def results_writer(tmp_path: Path) -> Callable[..., Path]:
    """`results_writer(filename, bench, cases, **kw)` writes a results file under tmp_path."""
    def write(filename: str, bench: str, cases: list[CaseSpec], **kw: Any) -> Path:
        return write_results(tmp_path / filename, bench, cases, **kw)
    return write
