"""How small a slowdown the change-point command finds: simulated nightly histories (SMPI,
modeled compute: deterministic) of a few benchmarks, NIGHTS runs at the nominal rates and then
NIGHTS runs with the compute rate (--sim-flops) or the link bandwidth (--bw) divided by
1 + slowdown; per slowdown, how many cases get exactly one change point at the first slowed
run, and how many change points land elsewhere (false alarms; a slowdown of 0 must give none).

    suite sensitivity [--slowdowns 0,0.01,0.02] [--nights 8] [--build build-sim]

Needs the SMPI build (`make sim`). docs/REGRESSIONS.md holds its table. `suite sensitivity
--cpu` measures the verdict's sensitivity on this machine's real runs (cpu_sensitivity.py).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

import h5py

from scripts import ROOT, module_command
from scripts.results.change_points import detect
from scripts.results.suite_results import read_results

FLOPS = 1e11  # modeled compute rate, FLOP/s
BW = 1e9  # flat platform's links, B/s


class Bench(NamedTuple):
    name: str
    knob: str  # "flops" (--sim-flops) or "bw" (--bw) is slowed
    flags: tuple[str, ...]


BENCHES = (
    Bench("ring_attention", "flops", ("--block", "1024", "--layout", "contiguous", "--causal",
                                      "0", "--heads", "8", "--kv-heads", "1", "--iters", "3",
                                      "--warmup", "1")),
    Bench("ulysses", "flops", ("--seq", "4096", "--heads", "8", "--iters", "3", "--warmup", "1")),
    Bench("sp_tp", "bw", ("--mode", "collectives", "--sizes", "64K:4M:x4", "--iters", "3",
                          "--warmup", "1")),
)


def simulate(bench: Bench, slowdown: float, out: Path, build: Path) -> None:
    import subprocess

    rate = {"flops": FLOPS, "bw": BW}[bench.knob] / (1 + slowdown)
    cmd = [*module_command("envs.simulate"), bench.name, "--platform", "flat", "--ranks", "4",
           "--sim-flops", f"{rate if bench.knob == 'flops' else FLOPS:.9g}",
           "--bw", f"{rate if bench.knob == 'bw' else BW:.9g}", "--build", str(build),
           "--out", str(out), "--no-plot", "--", *bench.flags]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {proc.returncode}\n{proc.stderr[-2000:]}")


def history_found(bench: Bench, slowdown: float, nights: int, build: Path,
                  tmp: Path) -> tuple[int, int, int]:
    """(cases, cases whose only change point is the first slowed night, change points
    elsewhere) over `nights` nominal nights and `nights` slowed ones."""
    series: dict[str, list[float]] = {}
    for night in range(2 * nights):
        out = tmp / f"{bench.name}_{slowdown}_{night:03d}.h5"
        simulate(bench, slowdown if night >= nights else 0.0, out, build)
        with h5py.File(out, "r+") as f:
            f.attrs["git_commit"] = f"{night:012x}"
        for key, case in read_results(out, load_datasets=False, warn=False).cases.items():
            if case.median_s:
                series.setdefault(key, []).append(case.median_s)
    found = wrong = 0
    for values in series.values():
        points = [at for at, _, _ in detect(values)]
        found += slowdown > 0 and points == [nights]
        wrong += sum(at != nights or slowdown == 0 for at in points)
    return len(series), found, wrong


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--cpu" in argv:
        from scripts.results import cpu_sensitivity

        return cpu_sensitivity.main([a for a in argv if a != "--cpu"])
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--slowdowns", default="0,0.01,0.02",
                        help="relative slowdowns injected (default 0,0.01,0.02)")
    parser.add_argument("--nights", type=int, default=8, help="runs before and after (default 8)")
    parser.add_argument("--build", type=Path, default=ROOT / "build-sim",
                        help="the SMPI build (default build-sim)")
    parser.add_argument("--cpu", action="store_true",
                        help="real runs on this machine's CPU instead, with their own --runs, "
                             "--slowdowns, --bench, --build (suite sensitivity --cpu --help)")
    args = parser.parse_args(argv)
    try:
        slowdowns = [float(s) for s in args.slowdowns.split(",")]
    except ValueError:
        print(f"error: --slowdowns {args.slowdowns}: comma-separated numbers", file=sys.stderr)
        return 2
    if args.nights < 2 or min(slowdowns) < 0:
        print(f"error: --nights {args.nights} (at least 2), --slowdowns {args.slowdowns} "
              "(none negative)", file=sys.stderr)
        return 2
    print("| benchmark | slowed | slowdown | cases | found at the first slowed run | "
          "change points elsewhere |\n|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for bench in BENCHES:
            for slowdown in slowdowns:
                cases, found, wrong = history_found(bench, slowdown, args.nights, args.build,
                                                    Path(tmp))
                knob = "--sim-flops" if bench.knob == "flops" else "--bw"
                print(f"| {bench.name} | {knob} | {slowdown:.1%} | {cases} | "
                      f"{found if slowdown else '-'} | {wrong} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
