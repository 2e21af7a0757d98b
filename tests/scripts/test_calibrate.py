"""calibrate.py and plan_check.py where they need no run: the Slurm allocation read from the
job's variables, and the refusals (outside a job, modes together, a check whose ranks differ
from where the calibration was measured)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from pathlib import Path

import pytest

from scripts import module_command
from scripts.planner import calibrate
from synthetic_results import REPO


def _slurm(monkeypatch, **env):
    for key in ("SLURM_JOB_ID", "SLURM_JOB_NUM_NODES", "SLURM_NNODES", "SLURM_NTASKS_PER_NODE",
                "SLURM_TASKS_PER_NODE"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    args = argparse.Namespace(nodes=None, gpus_per_node=None)
    calibrate.slurm_allocation(args)
    return args.nodes, args.gpus_per_node


@pytest.mark.parametrize("env, want", [
    ({"SLURM_JOB_ID": "7", "SLURM_JOB_NUM_NODES": "2", "SLURM_TASKS_PER_NODE": "8(x2)"}, (2, 8)),
    ({"SLURM_JOB_ID": "7", "SLURM_NNODES": "3", "SLURM_NTASKS_PER_NODE": "4"}, (3, 4)),
    ({"SLURM_JOB_ID": "7", "SLURM_JOB_NUM_NODES": "2", "SLURM_TASKS_PER_NODE": "4,2"}, (2, 4)),
])
def test_the_allocation_gives_nodes_and_ranks_per_node(monkeypatch, env, want):
    assert _slurm(monkeypatch, **env) == want


def test_an_allocation_without_tasks_per_node_is_refused(monkeypatch):
    with pytest.raises(calibrate.CalibrationError, match="give --gpus-per-node"):
        _slurm(monkeypatch, SLURM_JOB_ID="7", SLURM_JOB_NUM_NODES="1")


def test_slurm_steps_place_the_levels():
    args = argparse.Namespace(srun="srun --mpi=pmix")
    assert calibrate.slurm_step(args, 1, 8) == ["srun", "--mpi=pmix", "--nodes=1", "--ntasks=8", "--ntasks-per-node=8"]
    assert calibrate.slurm_step(args, 4, 1) == ["srun", "--mpi=pmix", "--nodes=4", "--ntasks=4", "--ntasks-per-node=1"]


@pytest.mark.parametrize("args, needle", [
    (["--slurm"], "--slurm runs inside a Slurm job"),
    (["--slurm", "--simulate"], "one of --simulate, --emulated and --slurm"),
    (["--np", "1"], "--np must be >= 2"),
])
def test_calibrate_refuses_with_one_line_and_no_file(tmp_path, args, needle):
    out = tmp_path / "c.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    proc = subprocess.run([*module_command("planner.calibrate"), *args, "--out", str(out)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("error:") == 1 and needle in proc.stderr, proc.stderr
    assert not out.exists()


def _calibration(tmp_path: Path, where: dict) -> Path:
    path = tmp_path / "calib.json"
    path.write_text(json.dumps({"format": calibrate.FORMAT, "version": 1, "where": where, "dtype": "fp32"}))
    return path


@pytest.mark.parametrize("where, env, needle", [
    ({"kind": "mpirun", "ranks": 4}, {}, "on 4 ranks"),
    ({"kind": "slurm", "nodes": 2, "gpus_per_node": 4}, {"SLURM_JOB_ID": "9"}, "on 8 ranks"),
    ({"kind": "slurm", "nodes": 1, "gpus_per_node": 2}, {}, "run the check in a job of its nodes"),
    ({"kind": "elsewhere"}, {}, "no calibration of this suite's"),
])
def test_plan_check_runs_where_the_calibration_was_measured(tmp_path, where, env, needle):
    calib = _calibration(tmp_path, where)
    gpus = "2" if where.get("nodes") == 1 else "6"
    base = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    proc = subprocess.run([*module_command("planner.plan_check"), "--calibration", str(calib), "--gpus", gpus,
                           "--", "--seq", "1024"], cwd=REPO, env={**base, **env}, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and needle in proc.stderr, proc.stderr


def test_plan_check_splits_a_run_into_compute_and_each_axis():
    from scripts.planner import plan_check
    attrs = {"time_median_s": 1.0, "exposed_comm_s": 0.25, "tp_exposed_s": 0.1, "cp_exposed_s": 0.05,
             "ep_exposed_s": 0.0, "dp_exposed_s": 0.1}
    got = plan_check.block_times(attrs)
    assert got["compute_s"] == pytest.approx(0.75)  # the step less every exposed transfer
    assert (got["tp_s"], got["cp_s"], got["ep_s"], got["dp_s"]) == (0.1, 0.05, 0.0, 0.1)
