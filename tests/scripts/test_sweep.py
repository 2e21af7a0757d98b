"""sweep.py: the matrix it plans, the model's predictions in the dry-run, preset errors, and what
it hands to sbatch (a stand-in sbatch records its arguments)."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from scripts.envs import sweep
from synthetic_results import run_script

FAKE_MODEL = """#!/bin/sh
echo "model $*" >> "{log}"
echo "prediction: section=x step_s=0.25 bytes_per_rank=1.5e+09 memory_bytes=2e+06"
"""
FAKE_SBATCH = """#!/bin/sh
echo "$*" >> "{log}"
echo "$$"
"""


def _exe(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


GPU_BUILD = "cuda=ON\ncuda_archs=90\nnccl=ON\ncudnn=ON\ntransports=mpi,nccl\n"
NO_NCCL = "no NCCL here (stand-in line): use mpi"
NO_CUDA = "no CUDA here (stand-in line): use --cpu"


def _build(tmp_path: Path, features: str) -> Path:
    """A build's bin folder whose suite_features.txt says `features` (cmake/build_summary.cmake
    writes the real one)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "suite_features.txt").write_text("# what this build has\n" + features)
    return bin_dir


@pytest.fixture
def gpu_build(tmp_path):
    return _build(tmp_path, GPU_BUILD)


@pytest.fixture
def fakes(tmp_path):
    model_log, sbatch_log = tmp_path / "model.log", tmp_path / "sbatch.log"
    model = _exe(tmp_path / "model", FAKE_MODEL.format(log=model_log))
    sbatch_cmd = _exe(tmp_path / "sbatch", FAKE_SBATCH.format(log=sbatch_log))
    return model, model_log, sbatch_cmd, sbatch_log


def test_values_syntax():
    assert sweep.parse_values("4K:16K:x2") == [4096, 8192, 16384]
    assert sweep.parse_values("1,3:7:+2") == [1, 3, 5, 7]
    for bad in ("", "8K:1K:x2", "1:4:x1", "abc", "1:2"):
        with pytest.raises(sweep.SweepError):
            sweep.parse_values(bad)


def test_dry_run_prints_every_cell_with_its_prediction(fakes, gpu_build):
    model, model_log, sbatch_cmd, sbatch_log = fakes
    proc = run_script("sweep.py", "ring_attention", "--values", "4K,8K", "--link", "nvlink,net",
                      "--nodes", "1,2", "--model", model, "--sbatch", sbatch_cmd, "--layers", "4",
                      "--bin-dir", gpu_build,
                      "--link-bw", "net=2.5e10", "-F", "6e14", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    rows = re.findall(r"^(\d+)\s+(\d)\s+(\d+)\s+(\S+)\s+(\S+)\s+-\s+0\.25 s\s+1\.5e\+09 B", proc.stdout,
                      flags=re.M)
    assert len(rows) == 8  # 2 values x 2 presets x 2 node counts
    assert {(n, r) for _, n, r, _, _ in rows} == {("1", "8"), ("2", "16")}
    assert "8 sbatch command(s) (dry run: nothing submitted)" in proc.stdout
    assert proc.stdout.count("slurm/ring_attention_multinode.sbatch") == 4
    assert "--export=ALL,LINK=net,BLOCK=8192,TRANSPORT=nccl" in proc.stdout
    assert not sbatch_log.exists()
    calls = model_log.read_text().splitlines()
    assert len(calls) == 8
    # ring: s = c x N_c with N_c = all ranks; W per preset where given, else the model's
    assert any("--seq 65536 --cp 16" in c and "--bw 2.5e+10" in c for c in calls)
    assert any("--seq 32768 --cp 8" in c and "--bw" not in c for c in calls)
    assert all("--layers 4" in c and "--flops 6e+14" in c for c in calls)


def test_dry_run_with_the_real_model(gpu_build):
    model = Path(os.environ.get("SUITE_BIN_DIR", "build/bin")) / "model"
    if not model.exists():
        pytest.skip(f"{model} is not built")
    proc = run_script("sweep.py", "moe", "--values", "1K,4K", "--model", model, "--dry-run",
                      "--bin-dir", gpu_build)
    assert proc.returncode == 0, proc.stderr
    steps = [float(x) for x in re.findall(r"^\d+\s+1\s+8\s+nvlink\s+\S+\s+-\s+(\S+) s", proc.stdout,
                                          flags=re.M)]
    assert len(steps) == 2 and 0 < steps[0] < steps[1]  # 4x the tokens, more time


def test_unknown_preset_and_missing_script_are_errors(fakes, gpu_build):
    model, _, sbatch_cmd, sbatch_log = fakes
    proc = run_script("sweep.py", "moe", "--values", "1K", "--link", "nvlink,warp", "--model",
                      model, "--sbatch", sbatch_cmd, "--bin-dir", gpu_build)
    assert proc.returncode == 2 and "unknown link preset 'warp'" in proc.stderr
    proc = run_script("sweep.py", "ulysses", "--values", "4K", "--nodes", "2", "--model", model,
                      "--sbatch", sbatch_cmd, "--bin-dir", gpu_build)
    assert proc.returncode == 2 and "runs inside one node" in proc.stderr
    assert run_script("sweep.py", "nope", "--values", "1").returncode == 2
    assert not sbatch_log.exists()


def test_submits_one_job_per_cell(fakes):
    model, _, sbatch_cmd, sbatch_log = fakes
    proc = run_script("sweep.py", "sp_tp", "--values", "1K,2K", "--link", "tcp", "--cpu",
                      "--tasks-per-node", "4", "--model", model, "--sbatch", sbatch_cmd)
    assert proc.returncode == 0, proc.stderr
    calls = sbatch_log.read_text().splitlines()
    assert len(calls) == 2 and all(c.startswith("--parsable --nodes=1 --ntasks-per-node=4 "
                                                 "--gpus-per-node=0") for c in calls)
    assert "--export=ALL,LINK=tcp,SEQ=2048,SUITE_MODE=cpu" in calls[1]
    assert proc.stdout.count("submitted: ") == 2


def test_array_writes_one_cells_line_per_task(fakes, gpu_build, tmp_path):
    model, _, sbatch_cmd, sbatch_log = fakes
    proc = run_script("sweep.py", "moe", "--values", "1K,2K", "--link", "nvlink,pcie-host",
                      "--nodes", "1,2", "--array", "--model", model, "--sbatch", sbatch_cmd,
                      "--sweep-dir", tmp_path / "sw", "--bin-dir", gpu_build)
    assert proc.returncode == 0, proc.stderr
    calls = sbatch_log.read_text().splitlines()
    assert len(calls) == 2  # one array per script / node count
    assert "--array=0-3" in calls[0] and calls[0].endswith("slurm/moe.sbatch")
    assert calls[1].endswith("slurm/moe_multinode.sbatch") and "--nodes=2" in calls[1]
    lines = (tmp_path / "sw" / "moe_n1.cells").read_text().splitlines()
    assert lines == ["LINK=nvlink TOKENS=1024 TRANSPORT=nccl", "LINK=nvlink TOKENS=2048 TRANSPORT=nccl",
                     "LINK=pcie-host TOKENS=1024 TRANSPORT=nccl",
                     "LINK=pcie-host TOKENS=2048 TRANSPORT=nccl"]


def test_extra_axis_multiplies_the_cells(fakes, gpu_build):
    model, model_log, sbatch_cmd, sbatch_log = fakes
    proc = run_script("sweep.py", "moe", "--values", "1K,2K", "--axis", "SKEW=none,zipf,hot",
                      "--model", model, "--sbatch", sbatch_cmd, "--bin-dir", gpu_build)
    assert proc.returncode == 0, proc.stderr
    calls = sbatch_log.read_text().splitlines()
    assert len(calls) == 6 and len(model_log.read_text().splitlines()) == 6
    assert any("--job-name=moe-tokens2K-skewzipf-nvlink-n1" in c and "SKEW=zipf" in c
               for c in calls)
    assert "--export=ALL,LINK=nvlink,TOKENS=1024,SKEW=hot,TRANSPORT=nccl" in proc.stdout
    bad = run_script("sweep.py", "moe", "--values", "1K", "--axis", "LINK=net", "--model", model,
                     "--sbatch", sbatch_cmd, "--bin-dir", gpu_build)
    assert bad.returncode == 2 and "set by the sweep itself" in bad.stderr


def test_a_build_without_nccl_submits_mpi_jobs_and_says_why(fakes, tmp_path):
    model, _, sbatch_cmd, sbatch_log = fakes
    bin_dir = _build(tmp_path, f"cuda=ON\nnccl=OFF\nnccl_off={NO_NCCL}\n")
    proc = run_script("sweep.py", "moe", "--values", "1K", "--model", model, "--sbatch", sbatch_cmd,
                      "--bin-dir", bin_dir)
    assert proc.returncode == 0, proc.stderr
    assert f"note: {NO_NCCL}" in proc.stdout
    assert "TRANSPORT=mpi" in sbatch_log.read_text() and "nccl" not in sbatch_log.read_text()


@pytest.mark.parametrize("features, args, needle", [
    (f"cuda=ON\nnccl=OFF\nnccl_off={NO_NCCL}\n", ["--transport", "nccl"], f"--transport nccl, but {NO_NCCL}"),
    (f"cuda=OFF\nnccl=OFF\ncuda_off={NO_CUDA}\n", [], NO_CUDA),
    (f"cuda=OFF\nnccl=OFF\ncuda_off={NO_CUDA}\n", ["--transport", "mpi"], NO_CUDA),
])
def test_a_sweep_the_build_cannot_run_stops_before_submitting(fakes, tmp_path, features, args, needle):
    model, _, sbatch_cmd, sbatch_log = fakes
    bin_dir = _build(tmp_path, features)
    for dry in ([], ["--dry-run"]):
        proc = run_script("sweep.py", "moe", "--values", "1K", "--model", model, "--sbatch",
                          sbatch_cmd, "--bin-dir", bin_dir, *args, *dry)
        assert proc.returncode == 2 and proc.stderr.count("error:") == 1, proc.stderr
        assert needle in proc.stderr and str(bin_dir / "suite_features.txt") in proc.stderr
    assert not sbatch_log.exists()
    # The CPU mode runs whatever the build has.
    proc = run_script("sweep.py", "moe", "--values", "1K", "--cpu", "--model", model, "--sbatch",
                      sbatch_cmd, "--bin-dir", bin_dir)
    assert proc.returncode == 0, proc.stderr


def test_a_build_without_a_record_keeps_nccl(fakes, tmp_path):
    model, _, sbatch_cmd, sbatch_log = fakes
    proc = run_script("sweep.py", "moe", "--values", "1K", "--model", model, "--sbatch", sbatch_cmd,
                      "--bin-dir", tmp_path / "nothing-here", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "TRANSPORT=nccl" in proc.stdout and "note:" not in proc.stdout


def test_shaped_link_cells_run_here_through_shaped_link(fakes, tmp_path):
    """A shaped link (scripts/envs/shaped_link.py) is this machine's loopback: its cells run here under
    shaped_link.py and mpirun with the job script's flags, labelled with the canonical name, and
    the model's W is the rate shared by the ranks."""
    model, model_log, sbatch_cmd, sbatch_log = fakes
    proc = run_script("sweep.py", "ring_attention", "--values", "64,128", "--link",
                      "shaped-1g,shaped:500mbit", "--cpu", "--tasks-per-node", "2", "--model",
                      model, "--sbatch", sbatch_cmd, "--sweep-dir", tmp_path / "sw", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "4 run(s) on this machine (a shaped loopback or an emulated cluster) (dry run: nothing runs)" \
        in proc.stdout
    runs = [line.split() for line in proc.stdout.splitlines() if "scripts.envs.shaped_link" in line]
    assert len(runs) == 4
    first = runs[0]
    assert first[first.index("--") - 1] == "shaped-1g"
    cut = first.index("--")
    assert first[cut + 1:cut + 5] == ["mpirun", "-np", "2", "--oversubscribe"]
    # run_bench.sh's cpu flags, then the cell's label and results file
    assert first[first.index("--block") + 1] == "64" and "--heads" in first
    assert first[first.index("--link") + 1] == "shaped-1g"
    out = tmp_path / "sw" / "ring_attention-block64-shaped-1g-n1.h5"
    assert first[first.index("--out") + 1] == str(out)
    assert runs[2][runs[2].index("--link") + 1] == "shaped-500mbit"  # shaped:500mbit's label
    calls = model_log.read_text().splitlines()
    assert sum("--bw 6.25e+07" in c for c in calls) == 2  # 125 MB/s shared by 2 ranks
    assert sum("--bw 3.125e+07" in c for c in calls) == 2
    assert not sbatch_log.exists() and not (tmp_path / "sw").exists()


def test_emulated_cluster_cells_run_here_through_emulated_cluster(fakes, tmp_path):
    """An emulated cluster (scripts/envs/emulated_cluster.py) runs its cells here, on the nodes and
    ranks its label names (mpirun is the script's own), and the model's W is the NIC's rate over
    the ranks of a node."""
    model, model_log, sbatch_cmd, sbatch_log = fakes
    proc = run_script("sweep.py", "ring_attention", "--values", "64", "--link", "emulated-2x2-1g",
                      "--cpu", "--model", model, "--sbatch", sbatch_cmd, "--sweep-dir", tmp_path / "sw",
                      "--dry-run")
    assert proc.returncode == 0, proc.stderr
    runs = [line.split() for line in proc.stdout.splitlines() if "scripts.envs.emulated_cluster" in line]
    assert len(runs) == 1
    ours, bench = runs[0][:runs[0].index("--")], runs[0][runs[0].index("--") + 1:]
    assert ours[ours.index("--link") + 1] == "emulated-2x2-1g" and "mpirun" not in bench[0]
    assert bench[bench.index("--block") + 1] == "64"
    assert bench[bench.index("--link") + 1] == "emulated-2x2-1g"
    assert bench[bench.index("--out") + 1] == str(tmp_path / "sw" / "ring_attention-block64-emulated-2x2-1g-n2.h5")
    assert sum("--bw 6.25e+07" in c for c in model_log.read_text().splitlines()) == 1  # 125 MB/s, 2 a node
    assert not sbatch_log.exists() and not (tmp_path / "sw").exists()


@pytest.mark.parametrize("args, needle", [
    (["--link", "shaped-1g,nvlink"], "sweep them separately"),
    (["--link", "emulated-2x2-1g,nvlink"], "sweep them separately"),
    (["--link", "emulated-2x2-1g", "--nodes", "2"], "--nodes 1"),
    (["--link", "emulated-2by2-1g"], "emulated-<nodes>x"),
    (["--link", "shaped-1g", "--nodes", "2"], "--nodes 1"),
    (["--link", "shaped-1g", "--array"], "no --simulate, --array"),
    (["--link", "shaped-1g", "--simulate"], "no --simulate, --array"),
    (["--link", "shaped:0gbit"], "must be positive"),
    (["--link", "shaped:2furlong"], "tc's units"),
])
def test_shaped_link_refusals(fakes, tmp_path, args, needle):
    model, _, sbatch_cmd, sbatch_log = fakes
    proc = run_script("sweep.py", "ring_attention", "--values", "64", "--cpu", *args, "--model",
                      model, "--sbatch", sbatch_cmd, "--sweep-dir", tmp_path / "sw")
    assert proc.returncode == 2 and proc.stderr.count("error:") == 1, proc.stderr
    assert needle in proc.stderr
    assert not sbatch_log.exists() and not (tmp_path / "sw").exists()


def test_shaped_link_without_root_is_refused_before_any_cell(fakes, tmp_path, monkeypatch, capsys):
    model, _, sbatch_cmd, _ = fakes
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    ran = []
    monkeypatch.setattr(sweep.subprocess, "run", lambda cmd, **kw: ran.append(cmd) or
                        __import__("subprocess").CompletedProcess(cmd, 0, "", ""))
    rc = sweep.main(["ring_attention", "--values", "64", "--link", "shaped-1g", "--cpu",
                     "--tasks-per-node", "2", "--model", str(model),
                     "--sweep-dir", str(tmp_path / "sw")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("error:") == 1 and "needs root" in err
    assert not any("shaped_link.py" in " ".join(map(str, c)) for c in ran)
    assert not (tmp_path / "sw").exists()
