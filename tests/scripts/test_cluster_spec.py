"""calibrate --from-spec: the shipped cluster specs give calibrations whose rates are the
specs' figures (a value, or the peak times its named efficiency, worked out here), and a spec
without a source or a rate is refused with one line naming the field, exit 2, no file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scripts.planner import calibrate
from scripts.planner.cluster_spec import SpecError, calibration_from_spec
from synthetic_results import REPO

SPECS = REPO / "scripts" / "planner" / "specs"


def test_a100_rates_by_hand():
    doc, memory = calibration_from_spec(SPECS / "dgx_a100_hdr.json")
    assert memory == 80
    assert doc["ranks_per_node"] == 8 and doc["dtype"] == "bf16"
    assert doc["compute"]["gemm_flops"] == pytest.approx(0.8 * 312e12)
    assert doc["compute"]["attention_flops"] == pytest.approx(0.73 * 312e12)
    assert doc["compute"]["attention_bwd_flops"] == pytest.approx(0.5 * 312e12)
    assert doc["levels"]["intra"]["all_reduce"] == {"bw": 208e9, "lat": 1e-6}
    assert doc["levels"]["inter"]["p2p"]["bw"] == 24e9


def test_every_shipped_figure_names_a_source():
    for path in SPECS.glob("*.json"):
        spec = json.loads(path.read_text())

        def walk(node, where):
            if isinstance(node, dict):
                if "value" in node or "efficiency" in node:
                    assert node.get("source"), f"{path.name}: {where} has no source"
                for key, child in node.items():
                    walk(child, f"{where}.{key}")

        walk(spec, path.stem)
        calibration_from_spec(path)


def test_missing_source_is_refused(tmp_path: Path, capsys):
    spec = json.loads((SPECS / "dgx_a100_hdr.json").read_text())
    del spec["gemm"]["source"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(spec))
    with pytest.raises(SpecError, match="gemm has no source"):
        calibration_from_spec(bad)
    out = tmp_path / "calib.json"
    assert calibrate.main(["--from-spec", str(bad), "--out", str(out)]) == 2
    assert "--from-spec" in capsys.readouterr().err and not out.exists()
