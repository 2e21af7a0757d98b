#!/usr/bin/env python3
"""The run's page and the history page in headless Chromium.

Two small runs as `make run` leaves them (synthetic results files, their plots by plot.py): the
first filed as the baseline (`baselines.py add <folder>`), the second with one case made twice
as slow and a case the baseline lacks. run_verdict.py judges the second (its terminal lines and
its verdict file must name the slowed case), report_page.py writes both runs' pages and
history.py --html the history page. Chromium then opens the pages: no image may fail to load, no
table may be empty, no link inside the run may be broken, nothing may come from the network and
the console must stay free of errors; the slowed case must lead the regressed cases and be
marked in the history. A nightly history with a 2% step must show its change point at the
right run, a flat one none. The same checks must find what a broken copy of the run breaks (a plot
deleted, a report gone, an empty table, a script error), so a check that cannot fail does not
pass. Screenshots of both pages stay in the build folder (--shots).

Exit 0 pass, 1 fail, 77 skip (Chromium not installed and not installable here).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

from scripts.cli import command_line
from page_check import Unavailable, ensure_chromium, problems, screenshot, start_driver
from tests.scripts.synthetic_results import (NEW_CASE, SLOWED_CASE, STEP_AT, nightly_history,
                                             write_run)

SKIP = 77


class Failure(AssertionError):
    pass


def script(python: Path, name: str, *args: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([*command_line(name, str(python)), *map(str, args)],
                          capture_output=True, text=True, timeout=120)
    if proc.returncode not in (0, 1):
        raise Failure(f"{name} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def expect(condition: bool, what: str) -> None:
    if not condition:
        raise Failure(what)


def make_runs(python: Path, root: Path) -> tuple[Path, Path, str]:
    """Baseline and candidate folders with plots, verdicts and pages; the verdict lines."""
    registry = root / "baselines"
    base = write_run(root / "base")
    cand = write_run(root / "cand", slowed=2.0, created_utc="2025-01-16T10:00:00Z")
    for run in (base, cand):
        for results in sorted(run.glob("*.h5")):
            script(python, "plot.py", results, "--out", run / "plots" / results.stem)
    script(python, "baselines.py", "add", base, "--registry", registry)
    for run in (base, cand):
        verdict = script(python, "run_verdict.py", run, "--registry", registry)
        script(python, "report_page.py", run, "--registry", registry)
    return base, cand, verdict.stdout


def check_verdict(cand: Path, lines: str) -> None:
    """The terminal's lines and the verdict file name the slowed case."""
    line = next((l for l in lines.splitlines() if l.strip().startswith("sp_tp.h5")), "")
    expect(f"1 regression (worst {SLOWED_CASE} x2.00)" in line, f"terminal: {lines}")
    expect(NEW_CASE in line and "not judged" in line, f"new case not listed: {line}")
    expect("ring_docs.h5" in lines and "no regression" in lines, f"terminal: {lines}")
    record = json.loads((cand / "sp_tp.compare.json").read_text())
    expect(record["regressions"] == [SLOWED_CASE], f"verdict file: {record['regressions']}")


def check_pages(driver, base: Path, cand: Path, history: Path, shots: Path) -> None:
    for page in (base / "index.html", cand / "index.html", history):
        found = problems(driver, page)
        expect(not found, f"{page}: " + "; ".join(found))
    driver.get((cand / "index.html").as_uri())
    first_regressed = driver.execute_script(
        "const t = document.evaluate(\"//h3[contains(., 'Regressed cases')]/following-sibling"
        "::table[1]//tbody/tr[1]\", document, null, 9, null).singleNodeValue;"
        "return t ? t.innerText : ''")
    expect(SLOWED_CASE in first_regressed and "x2.00" in first_regressed,
           f"run page's first regressed case: {first_regressed!r}")
    images = driver.execute_script("return document.images.length")
    expect(images >= 3, f"run page shows {images} plots")
    driver.get(history.as_uri())
    marked = driver.execute_script(
        "return Array.from(document.querySelectorAll('tr')).filter(r => "
        f"r.innerText.startsWith('{SLOWED_CASE}') && r.querySelector('circle.flag')).length")
    expect(marked == 1, f"history page: the slowed case marked in {marked} row(s)")
    for name, page in (("run_page", cand / "index.html"), ("history_page", history)):
        print(f"screenshot: {screenshot(driver, page, shots / f'{name}.png')}")


def check_change_points(driver, python: Path, root: Path, shots: Path) -> None:
    """A nightly history with a 2% step from night STEP_AT: its page marks the step in the
    case's trend (one dashed line) and lists it at that run; a flat history's page marks none."""
    for slowdown, expected in ((1.02, 1), (1.0, 0)):
        folder = root / f"nightly_{slowdown}"
        page = folder / "history.html"
        script(python, "history.py", nightly_history(folder, slowdown), "--case",
               "allreduce_fp32_act_s1024_b1_h1024$", "--html", page)
        found = problems(driver, page)
        expect(not found, f"{page}: " + "; ".join(found))
        driver.get(page.as_uri())
        lines = driver.execute_script("return document.querySelectorAll('svg.spark line.step')"
                                      ".length")
        listed = driver.execute_script(
            "return Array.from(document.querySelectorAll('.step-point')).map(e => e.innerText)")
        expect(lines == expected and len(listed) == expected,
               f"{page}: {lines} dashed line(s), listed {listed}, expected {expected}")
        expect(all(t.startswith(f"run {STEP_AT}:") and "+2.00%" in t for t in listed),
               f"{page}: change point listed as {listed}")
    shot = screenshot(driver, root / "nightly_1.02" / "history.html", shots / "change_points.png")
    print(f"screenshot: {shot}")


def check_the_checks(driver, cand: Path, root: Path) -> None:
    """A broken copy: each breakage must be found, or the checks above prove nothing."""
    broken = root / "broken"
    shutil.copytree(cand, broken)
    plot = next((broken / "plots" / "sp_tp").glob("*.png"))
    plot.unlink()
    (broken / "sp_tp.compare.txt").unlink()
    found = " | ".join(problems(driver, broken / "index.html"))
    expect(f"image did not load: plots/sp_tp/{plot.name}" in found, f"missing plot: {found}")
    expect("link to a missing file: sp_tp.compare.txt" in found, f"missing report: {found}")
    page = broken / "errors.html"
    page.write_text("<!DOCTYPE html><html><body><table><tbody></tbody></table>"
                    "<a href='#nowhere'>x</a><script>console.error('boom')</script></body></html>")
    found = " | ".join(problems(driver, page))
    for what in ("table(s) without a row", "anchor not on the page: #nowhere", "boom"):
        expect(what in found, f"{what!r} not found in: {found}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--python", type=Path, default=Path(sys.executable),
                        help="interpreter with scripts/requirements.txt")
    parser.add_argument("--shots", type=Path, required=True,
                        help="folder for the pages' screenshots (kept)")
    args = parser.parse_args()
    start = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="suite_pages_"))
    os.environ["SUITE_RESULTS_INDEX"] = str(root / "results_index.sqlite")  # not the user's
    driver = None
    try:
        ensure_chromium(root / "apt.log")
        installed = time.monotonic()
        base, cand, lines = make_runs(args.python, root / "runs")
        check_verdict(cand, lines)
        history = root / "runs" / "history.html"
        script(args.python, "history.py", base, cand, "--html", history)
        driver = start_driver()
        check_pages(driver, base, cand, history, args.shots)
        check_change_points(driver, args.python, root, args.shots)
        check_the_checks(driver, cand, root)
        print(f"PASS browser_pages in {time.monotonic() - start:.0f} s "
              f"({installed - start:.0f} s to install Chromium)")
        return 0
    except Unavailable as err:
        print(f"SKIP: no headless Chromium here: {err}")
        return SKIP
    except Failure as err:
        print(f"FAIL: {err}")
        return 1
    finally:
        if driver is not None:
            driver.quit()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
