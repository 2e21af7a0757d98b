"""test_counts.py: ran vs skipped, from a JUnit report that ctest itself writes for a small
project whose tests pass, fail and skip the ways the suite's do."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from synthetic_results import run_script

GTEST_SKIP = ("printf 'Note: Google Test filter = A.b\\n[ RUN      ] A.b\\n"
              "t.cpp:9: Skipped\\nno GPU expected (no /dev/nvidia<N> device, no "
              "/proc/driver/nvidia/gpus entry): cudaGetDeviceCount: no device\\n"
              "[  SKIPPED ] A.b (0 ms)\\n'")
PROJECT = f"""cmake_minimum_required(VERSION 3.21)
project(counts NONE)
enable_testing()
add_test(NAME passes COMMAND sh -c "echo fine")
add_test(NAME fails COMMAND sh -c "echo 'FAIL: x is 3, expected 4'; seq 1 12; exit 1")
add_test(NAME slurm_like COMMAND sh -c "echo 'SKIP: a local Slurm cannot run here: no munge'; exit 77")
set_tests_properties(slurm_like PROPERTIES SKIP_RETURN_CODE 77)
foreach(n 1 2)
  add_test(NAME cuda_like_${{n}} COMMAND sh -c "{GTEST_SKIP}")
  set_tests_properties(cuda_like_${{n}} PROPERTIES SKIP_REGULAR_EXPRESSION "\\\\[  SKIPPED \\\\]")
endforeach()
add_test(NAME pytest_like COMMAND sh -c "echo '======= 90 passed, 4 skipped in 3.21s ======='")
"""


@pytest.fixture
def junit(tmp_path):
    if shutil.which("ctest") is None or shutil.which("cmake") is None:
        pytest.skip("cmake and ctest are not on PATH")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "CMakeLists.txt").write_text(PROJECT)
    subprocess.run(["cmake", "-S", tmp_path / "src", "-B", tmp_path / "b"], check=True,
                   capture_output=True)
    proc = subprocess.run(["ctest", "--test-dir", tmp_path / "b", "--output-junit", "j.xml"],
                          capture_output=True, text=True)
    assert proc.returncode != 0  # one test fails: ctest says so, the counts do not decide
    assert "83% tests passed, 1 tests failed out of 6" in proc.stdout  # skips count as passed
    return tmp_path / "b" / "j.xml"


def test_ran_and_skipped_with_their_reasons(junit):
    proc = run_script("test_counts.py", junit)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "test counts: 6 tests: 3 ran (2 passed, 1 failed), 3 skipped",
        "skipped, by reason:",
        "      2  no GPU expected (no /dev/nvidia<N> device, no /proc/driver/nvidia/gpus entry): "
        "cudaGetDeviceCount: no device",
        "      1  a local Slurm cannot run here: no munge",
        "skipped inside tests that ran:",
        "         pytest_like: pytest 90 passed, 4 skipped",
        # last, so that a log's tail says why: the verdict line, then the last 8 lines
        "failed: fails; it printed, last:",
        "    FAIL: x is 3, expected 4",
        *(f"    {n}" for n in range(5, 13))]


def test_markdown_and_unreadable_report(junit, tmp_path):
    proc = run_script("test_counts.py", junit, "--markdown")
    assert proc.stdout.startswith("### Tests\n\n```\n6 tests: 3 ran (2 passed, 1 failed), 3 skipped\n")
    bad = tmp_path / "bad.xml"
    bad.write_text("<testsuite")
    proc = run_script("test_counts.py", bad)
    assert proc.returncode == 1 and "cannot read" in proc.stderr
