#!/usr/bin/env python3
"""One vocabulary across the suite's executables: a flag name means one thing everywhere.

Runs every executable's --help, reads each option's names, type, allowed values, default and
help text, and fails (exit 1) where one flag name is declared two ways across executables:
another type or check, or another help text. A differing default alone (the same names, type,
check and help) is allowed: each benchmark sizes its own run (--heads 16 in sp_tp's layer, 8 in
ring_attention's attention) through the one function that declares the flag. A flag declared
once (in its method's flag section) and added by several executables passes by construction;
one written again by hand drifts, and this test names the executables and both declarations.

  flag_vocabulary.py --bin-dir build/bin
  flag_vocabulary.py --bin-dir build/bin --list     # every flag and the executables that add it
"""
import argparse
import os
import re
import subprocess
import sys

EXECUTABLES = ["sp_tp", "ring_attention", "ulysses", "moe", "mesh", "pipeline", "model", "harness_overhead",
               "kernel_bench"]

# "  --iters INT:INT in [1 - 1000000]=20   help" or "  -s,--seq FLOAT=4096" (help on the next
# line when the head is long). The head ends at two spaces or at the end of the line.
OPTION = re.compile(r"^  (-[^\s,]+(?:,-[^\s,]+)*)(?: ([^ ].*?))?(?:\s{2,}(\S.*))?$")
CONTINUATION = re.compile(r"^\s{4,}(\S.*)$")


# "TEXT:{a,b}=a Excludes: --x" -> "TEXT:{a,b} Excludes: --x": the head without its default.
DEFAULT = re.compile(r"=\S*")

# Flags still declared more than one way, with why. model's are single numbers (it predicts one
# configuration, in FLOAT for its formulas, with short names: -s, -b, -a, -t, -u, -E, -k, -T)
# where the benchmarks take whole numbers or sweep lists; making them one would change how users
# call model: --batch, --capacity-factor, --cp, --dp, --ep, --experts, --heads, --hidden,
# --kv-heads, --seq, --tokens, --top-k, --tp, --ulysses-degree; --causal is a bare switch there
# and a 1/0 list in the benchmarks; --dtype and --grad-dtype have no "auto" there (no backend
# picks the type). Among the benchmarks: --cp, --seq, --tp and --ep are one group's size or
# degree in the single-method benchmarks and swept lists in ulysses (--cp, --seq) and mesh (--tp,
# --cp, --ep); --mode names each benchmark's own modes. This list may only shrink: the test fails
# on a flag that diverges and is not here, and on one here that no longer diverges.
KNOWN_DIVERGENT = {
    "--batch", "--capacity-factor", "--causal", "--cp", "--dp", "--dtype", "--ep", "--experts",
    "--grad-dtype", "--heads", "--hidden", "--kv-heads", "--mode", "--seq", "--tokens", "--top-k",
    "--tp", "--ulysses-degree",
}


def read_help(text):
    """{long name: (head, help)} of the Options section of one CLI11 --help."""
    options, current = {}, None
    in_options = False
    for line in text.splitlines():
        if line.startswith("Options:"):
            in_options = True
            continue
        if not in_options:
            continue
        if not line.strip():
            if current is not None:  # the options end at the first blank line after them
                break
            continue
        match = OPTION.match(line)
        if match:
            names, head, help_text = match.group(1), match.group(2) or "", match.group(3) or ""
            long_names = [n for n in names.split(",") if n.startswith("--")]
            current = long_names[0] if long_names else names.split(",")[0]
            options[current] = {"names": names, "head": head.strip(), "help": help_text}
            continue
        cont = CONTINUATION.match(line)
        if cont and current is not None:
            sep = " " if options[current]["help"] else ""
            options[current]["help"] += sep + cont.group(1)
    return options


def declarations(bin_dir):
    """{flag: {declaration: [executables]}}; a declaration is (names, head without its default,
    help)."""
    seen = {}
    for exe in EXECUTABLES:
        path = os.path.join(bin_dir, exe)
        if not os.path.exists(path):
            sys.exit(f"error: {path} is not built")
        run = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=60)
        if run.returncode != 0:
            sys.exit(f"error: {exe} --help exited {run.returncode}: {run.stderr.strip()}")
        for flag, o in read_help(run.stdout).items():
            if flag in ("--help",):
                continue
            key = (o["names"], DEFAULT.sub("", o["head"], count=1), o["help"])
            seen.setdefault(flag, {}).setdefault(key, []).append(exe)
    return seen


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--mpiexec", help="unused: accepted like the scenarios' runner")
    ap.add_argument("--list", action="store_true", help="print every flag and who adds it")
    args = ap.parse_args()
    seen = declarations(args.bin_dir)
    if args.list:
        for flag in sorted(seen):
            exes = sorted({e for group in seen[flag].values() for e in group})
            print(f"{flag}: {', '.join(exes)}")
    divergent = {flag: decls for flag, decls in seen.items() if len(decls) > 1}
    bad = {flag: decls for flag, decls in divergent.items() if flag not in KNOWN_DIVERGENT}
    settled = sorted(KNOWN_DIVERGENT - set(divergent))
    for flag in settled:
        print(f"{flag} is now declared one way: take it off KNOWN_DIVERGENT")
    for flag in sorted(bad):
        print(f"{flag} is declared {len(bad[flag])} ways:")
        for (names, head, help_text), exes in bad[flag].items():
            print(f"  {', '.join(exes)}: {names} {head}")
            print(f"      {help_text}")
    if bad or settled:
        print(f"FAIL: {len(bad)} flag names mean different things across executables")
        return 1
    shared = sum(1 for decls in seen.values() if len(next(iter(decls.values()))) > 1)
    print(f"ok: {len(seen)} flag names, {shared} of them shared, each declared one way "
          f"(known divergent: {len(KNOWN_DIVERGENT)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
