"""How many tests ran and how many skipped, and why: read from ctest's JUnit report.

ctest's "100% tests passed" counts a skipped test as passed; this says what ran. `make test`
and .ci/run print it after ctest:

    ctest --test-dir build --output-junit ctest-junit.xml
    suite test-counts build/ctest-junit.xml

It prints `N ran (P passed, F failed), M skipped`, the skips grouped by the reason the test
printed (a GoogleTest skip message, a `SKIP: ...` line, else ctest's own), and the skips inside
tests that ran (a pytest or GoogleTest run inside one ctest test that skipped some of its own
tests). Each failed test's verdict comes last, with the last lines it printed: a CI log that
keeps only its tail still says why. With --markdown the same as a Markdown block (a CI job
summary); exit status 0 (1 when the report cannot be read). Nothing here decides pass or fail:
ctest's exit status does.
"""

from __future__ import annotations

import argparse
import re
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

GTEST_SKIP = re.compile(r"^[^\n]*: Skipped\n(.+?)(?:\n\[  SKIPPED \]|\n\n|\Z)", re.M | re.S)
SKIP_LINE = re.compile(r"^SKIP: (.+)$", re.M)
PYTEST_SUMMARY = re.compile(r"^=*\s*(\d+ passed.*?) in [\d.]+s", re.M)
PYTEST_SKIPPED = re.compile(r"(\d+) skipped")
GTEST_INNER = re.compile(r"^\[  SKIPPED \] (\d+) tests?, listed below", re.M)
INNER_SKIP_LINE = re.compile(r"^\s+skip: (.+)$", re.M)
# A verdict line: a scenario's `FAIL: ...`, GoogleTest's `file:line: Failure`, pytest's `FAILED`,
# ctest's own timeout or crash note.
VERDICT = re.compile(r"^(FAIL\b.*|.*: Failure$|FAILED .*|.*Timeout.*|.*(Segmentation|Abort|Killed).*)$",
                     re.M)
TAIL_LINES, LINE_CHARS = 8, 240


@dataclass
class Counts:
    total: int = 0
    passed: int = 0
    failed: int = 0
    not_run: int = 0  # disabled, or ctest could not start it
    skipped: Counter = field(default_factory=Counter)  # reason -> tests
    inner: list[str] = field(default_factory=list)  # skips inside tests that ran
    failures: dict[str, str] = field(default_factory=dict)  # failed test -> its output

    @property
    def ran(self) -> int:
        return self.passed + self.failed


def skip_reason(output: str, fallback: str) -> str:
    """The reason a skipped test printed: GoogleTest's skip message, a `SKIP: ...` line, or
    ctest's message (e.g. the skip return code)."""
    found = GTEST_SKIP.search(output)
    if found:
        return " ".join(found.group(1).split())
    found = SKIP_LINE.search(output)
    if found:
        return found.group(1).strip()
    return fallback or "no reason printed"


def inner_skips(name: str, output: str) -> list[str]:
    """Skips inside a test that ran: pytest's `N skipped`, GoogleTest's skipped list, and
    `skip: ...` lines (the Slurm test's binaries that are not built)."""
    notes = []
    summary = PYTEST_SUMMARY.search(output)
    if summary and PYTEST_SKIPPED.search(summary.group(1)):
        notes.append(f"{name}: pytest {summary.group(1)}")
    for count in GTEST_INNER.findall(output):
        notes.append(f"{name}: {count} GoogleTest test(s) skipped inside it")
    notes += [f"{name}: {line.strip()}" for line in INNER_SKIP_LINE.findall(output)]
    return notes


def verdict(output: str) -> list[str]:
    """What a failed test said: its first verdict line (if any), then its last TAIL_LINES
    non-blank lines, each cut to LINE_CHARS characters."""
    lines = [l.rstrip() for l in output.splitlines() if l.strip()]
    found = VERDICT.search(output)
    picked = ([found.group(0).rstrip()] if found else []) + lines[-TAIL_LINES:]
    out: list[str] = []
    for line in picked:  # the verdict is often the last line too: once
        if line not in out:
            out.append(line if len(line) <= LINE_CHARS else line[:LINE_CHARS] + " ...")
    return out or ["(it printed nothing)"]


def read_junit(path: Path) -> Counts:
    counts = Counts()
    for case in ET.parse(path).getroot().iter("testcase"):
        counts.total += 1
        name = case.get("name", "?")
        status = case.get("status", "")
        output = "".join(e.text or "" for e in case.iter("system-out"))
        if status == "skipped" or case.find("skipped") is not None:
            element = case.find("skipped")
            fallback = element.get("message", "") if element is not None else ""
            counts.skipped[skip_reason(output, fallback)] += 1
        elif status in ("fail",) or case.find("failure") is not None:
            counts.failed += 1
            counts.failures[name] = output
        elif status in ("notrun", "disabled"):
            counts.not_run += 1
        else:
            counts.passed += 1
            counts.inner += inner_skips(name, output)
    return counts


def report(counts: Counts, markdown: bool = False) -> str:
    skipped = sum(counts.skipped.values())
    head = (f"{counts.total} tests: {counts.ran} ran ({counts.passed} passed, "
            f"{counts.failed} failed), {skipped} skipped")
    if counts.not_run:
        head += f", {counts.not_run} not run (disabled or could not start)"
    lines = [head]
    if counts.skipped:
        lines.append("skipped, by reason:")
        lines += [f"  {n:>5}  {reason}" for reason, n in counts.skipped.most_common()]
    if counts.inner:
        lines.append("skipped inside tests that ran:")
        lines += [f"         {note}" for note in counts.inner]
    for name, output in counts.failures.items():
        lines.append(f"failed: {name}; it printed, last:")
        lines += [f"    {line}" for line in verdict(output)]
    if markdown:
        return "### Tests\n\n```\n" + "\n".join(lines) + "\n```\n"
    return "\n".join(["test counts: " + lines[0], *lines[1:]])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("junit", type=Path, help="ctest's --output-junit file")
    parser.add_argument("--markdown", action="store_true", help="a Markdown block instead")
    args = parser.parse_args(argv)
    try:
        counts = read_junit(args.junit)
    except (OSError, ET.ParseError) as err:
        print(f"test counts: cannot read {args.junit}: {err}", file=sys.stderr)
        return 1
    print(report(counts, args.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
