"""Run one of the suite's MPI benchmarks on a simulated cluster (SimGrid's SMPI).

    simulate.py BENCH --platform PRESET --ranks N [platform options] [--sim-flops F] -- FLAGS

writes the platform file and the hostfile, runs `smpirun` on the SMPI build of BENCH
(`make sim`: build-sim/bin), and leaves what a real run leaves: the results file (`--out`,
default results/sim/<bench>_<platform>_<UTC>.h5; its attributes say `simulated = 1`, the
platform, the compute mode and SMPI's version), the platform and hostfile beside it
(<stem>.platform.xml, <stem>.hosts), the run's wall time and peak memory (PSS and RSS, with
the number of samples, in <stem>.sim.json) and the
plots (<stem>_plots/). FLAGS are the benchmark's own (after `--`).

Compute, recorded in the results:
  executed (default)  kernels run on this host; SMPI injects each burst's CPU time scaled by
                      --host-speed / --speed (both default to the platform's speed: 1:1)
  modeled             --sim-flops F: attention and GEMM kernels skipped, their exact FLOPs
                      injected at F FLOP/s (e.g. a GPU's rate from kernel_bench); checks skipped;
                      tensors of 1 MiB and more are placeholders (SMPI shared memory: no values,
                      memory flat in the sizes, every byte still sent), so --dtype bf16 works

Platform presets and their links: suite sim-platform --list. Bad input (an unknown preset
or link, more ranks than hosts, a non-positive --sim-flops, a missing SMPI build) is one
`error:` line, exit 2, and no file; the benchmark's own refusals (a GPU-only flag) likewise.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from scripts import ROOT as REPO, module_command
from scripts.results.process_memory import PeakMemory
from scripts.envs.sim_platform import MAP_BY, PRESETS, PlatformError, make_platform, write

BENCHES = ("sp_tp", "ring_attention", "ulysses", "moe", "mesh", "pipeline", "harness_overhead")
SHARED_BLOCK_BYTES = 1 << 26
SUFFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}


class SimError(ValueError):
    """Bad input: one `error:` line, exit 2, nothing written."""


def number(text: str) -> float:
    """A positive rate: `5e7`, `50M`, `400T` (decimal powers, as link and FLOP rates are)."""
    m = re.fullmatch(r"\s*([0-9.]+(?:[eE][-+]?\d+)?)\s*([kKMGTP]?)\s*", text)
    try:
        value = float(m.group(1)) * SUFFIX[m.group(2)] if m else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    return value


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    ours, flags = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv \
        else (argv, [])
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bench", help=f"one of {', '.join(BENCHES)}")
    parser.add_argument("--platform", required=True, help=f"preset: {', '.join(PRESETS)}")
    parser.add_argument("--ranks", type=int, required=True, help="simulated ranks (one per host)")
    parser.add_argument("--nodes", type=int, help="nodes of the preset (flat: hosts)")
    parser.add_argument("--gpus-per-node", type=int, help="GPUs per node (node8, fattree: 8)")
    parser.add_argument("--link", help="link preset mapped to simulated links (nvlink, ib, tcp...)")
    parser.add_argument("--map-by", choices=MAP_BY, default="slot",
                        help="ranks to hosts as Open MPI's --map-by: slot fills a node first (default), "
                             "node deals them round robin over the nodes")
    parser.add_argument("--bw", type=number, help="bandwidth of the network level, B/s (flat: "
                        "its links; e.g. 50M)")
    parser.add_argument("--lat", type=float, help="latency of one network link, s")
    parser.add_argument("--speed", type=number, help="FLOP/s of a simulated host (default 1e10)")
    parser.add_argument("--sim-flops", type=number, help="modeled compute at F FLOP/s")
    parser.add_argument("--host-speed", type=number,
                        help="executed compute: FLOP/s of this machine (default: --speed, i.e. "
                             "host time 1:1)")
    parser.add_argument("--out", type=Path, help="results file (.h5)")
    parser.add_argument("--build", type=Path,
                        default=Path(os.environ.get("SUITE_SIM_BUILD", REPO / "build-sim")),
                        help="the SMPI build (default $SUITE_SIM_BUILD or build-sim)")
    parser.add_argument("--smpirun", default="smpirun")
    parser.add_argument("--cfg", action="append", default=[],
                        help="extra SimGrid option NAME:VALUE (repeatable)")
    parser.add_argument("--no-plot", action="store_true", help="skip scripts/plots/plot.py")
    parser.add_argument("--python", default=sys.executable, help="interpreter for plot.py")
    return parser.parse_args(ours), flags


def libbenchmark_soname(binary: Path) -> str | None:
    """Google Benchmark's shared library as the binary loads it (Debian: libbenchmark.so.1debian):
    privatised per rank, or all ranks would share one registry of cases."""
    try:
        out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"^\s*(libbenchmark\.so[^\s]*)\s", out, re.M)
    return m.group(1) if m else None


def check(args: argparse.Namespace):
    if args.bench not in BENCHES:
        raise SimError(f"unknown benchmark {args.bench!r}; known: {', '.join(BENCHES)}")
    try:
        platform = make_platform(args.platform, nodes=args.nodes, gpus_per_node=args.gpus_per_node,
                                 link=args.link, bw=args.bw, lat=args.lat, speed=args.speed)
    except PlatformError as err:
        raise SimError(str(err)) from None
    if args.ranks < 1:
        raise SimError(f"--ranks {args.ranks}: must be at least 1")
    if args.ranks > platform.hosts:
        raise SimError(f"{args.ranks} ranks but platform {platform.name} has {platform.hosts} "
                       f"hosts (one rank per host; --nodes adds hosts)")
    for flag in ("sim_flops", "host_speed"):
        value = getattr(args, flag)
        if value is not None and not (value > 0 and math.isfinite(value)):
            raise SimError(f"--{flag.replace('_', '-')} {value:g}: must be a positive number of "
                           "FLOP/s")
    if args.sim_flops and args.host_speed:
        raise SimError("--host-speed scales executed compute; --sim-flops models it: give one")
    binary = args.build / "bin" / args.bench
    if not binary.exists():
        raise SimError(f"{binary} is not built: run `make sim` (the SMPI build)")
    if shutil.which(args.smpirun) is None:
        raise SimError(f"{args.smpirun} not found: install SimGrid (scripts/setup.sh installs "
                       "libsimgrid-dev)")
    return platform, binary


def smpirun_command(args, platform, binary: Path, xml: Path, hosts: Path, out: Path,
                    flags: list[str]) -> list[str]:
    cfg = ["network/model:CM02",  # max-min sharing, no calibration factors: plain alpha-beta
           # Without cross traffic: SimGrid otherwise sends each flow's acknowledgements back as
           # 5% of its bytes, so a ring, whose every link carries a flow each way, moved at
           # 1/1.05 of the link (measured 0.952x at 1 GB/s); with it off a block of B bytes takes
           # exactly B / bw plus the route's latency, the alpha-beta the tests hold it to.
           "network/crosstraffic:0",
           "network/loopback-bw:1e12", "network/loopback-lat:0",
           # Open MPI's collective algorithms, but for all-reduce (Rabenseifner: recursive-halving
           # reduce-scatter + recursive-doubling all-gather), reduce-scatter (recursive halving),
           # all-gather (recursive doubling) and bcast (binomial tree): for small messages
           # SimGrid 3.32's Open MPI selector falls back to linear algorithms whose N concurrent
           # flows into one host cost O(N^2) in the max-min solver (7 s for one 1-element
           # all-reduce at 512 ranks, against 0.1 s); fixed choices also give sp_tp's
           # all-reduce and reduce-scatter + all-gather one alpha-beta model
           # (scripts/envs/sim_alpha_beta.py).
           "smpi/coll-selector:ompi", "smpi/allreduce:rab_rdb",
           "smpi/reduce_scatter:ompi_basic_recursivehalving", "smpi/allgather:rdb",
           "smpi/bcast:binomial_tree",
           # dlopen privatisation copies the executable and libbenchmark per rank, into
           # smpirun's temporary folder: this run's own (TMPDIR, see main).
           "smpi/privatization:dlopen", "smpi/display-timing:yes",
           # No simulated delay per MPI_Test / MPI_Wtime (SMPI's guard against busy-wait loops):
           # the CPU ring polls between attention tiles, and each poll would add 0.1 ms.
           "smpi/test:0", "smpi/wtime:0"]
    soname = libbenchmark_soname(binary)
    if soname:
        cfg.append(f"smpi/privatize-libs:{soname}")
    if args.sim_flops:
        # Modeled compute's tensors are SMPI shared memory (common/sim/sim.hpp), which maps one
        # block over and over: 64 MiB blocks keep 1024 ranks of real model sizes far below the
        # kernel's 65530 mappings per process that the 1 MiB default would exceed.
        cfg += ["smpi/simulate-computation:no", "smpi/shared-malloc:global",
                f"smpi/shared-malloc-blocksize:{SHARED_BLOCK_BYTES}"]
    else:
        cfg.append(f"smpi/host-speed:{args.host_speed or platform.speed:.9g}f")
    cmd = [args.smpirun, "-np", str(args.ranks), "-platform", str(xml), "-hostfile", str(hosts),
           *(f"--cfg={c}" for c in cfg + args.cfg),
           # SimGrid's chatter off (settings, collective choices); its timing summary kept.
           "--log=root.thres:warning", "--log=smpi_utils.thres:info",
           "--log=smpi_kernel.thres:error", str(binary),
           "--backend", "cpu", "--transport", "mpi", "--link", platform.link, "--out", str(out)]
    if args.sim_flops:
        cmd += ["--sim-flops", repr(args.sim_flops)]
    # SimGrid answers --help itself (its own options); the benchmark's help is -h there.
    return cmd + ["-h" if f == "--help" else f for f in flags]


def run_streaming(cmd: list[str], env: dict[str, str], err_file: Path
                  ) -> tuple[subprocess.CompletedProcess, PeakMemory]:
    """Runs smpirun with its stdout passed on as it comes (less smpirun's own report of a failed
    run: the benchmark's message says it), its stderr collected, its memory sampled."""
    with open(err_file, "w+") as err:
        with subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=err,
                              text=True) as proc, PeakMemory(proc.pid) as memory:
            assert proc.stdout is not None
            for line in proc.stdout:
                if not (line.startswith("Execution failed with code") or " --cfg=" in line):
                    sys.stdout.write(line)
                    sys.stdout.flush()
        err.seek(0)
        return subprocess.CompletedProcess(cmd, proc.returncode, "", err.read()), memory


def default_out(args: argparse.Namespace) -> Path:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return REPO / "results" / "sim" / f"{args.bench}_{args.platform}_{stamp}.h5"


def main(argv: list[str] | None = None) -> int:
    args, flags = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        platform, binary = check(args)
    except SimError as err:
        print(f"error: simulate.py: {err}", file=sys.stderr)
        return 2
    out = (args.out or default_out(args)).resolve()
    stem = out.with_suffix("").name
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
               SUITE_SIM_PLATFORM=platform.name, SUITE_SIM_PLATFORM_DETAIL=platform.detail()
               + ("; ranks round robin over the nodes (--map-by node)" if args.map_by == "node" else ""))
    with tempfile.TemporaryDirectory(prefix="suite-sim-") as tmp:
        xml, hosts = write(platform, args.ranks, Path(tmp), stem, args.map_by)
        cmd = smpirun_command(args, platform, binary, xml, hosts, out, flags)
        # The folder for the per-rank copies of the executable and libbenchmark: one per run, so
        # simulations side by side (ctest -j) neither overwrite nor remove each other's copies
        # (SimGrid aborts: "Cannot write into /tmp/0000000hmark..."). smpirun takes it from
        # TMPDIR: its --cfg=smpi/tmpdir comes after the user's settings and wins, it puts that
        # folder on LD_LIBRARY_PATH for the libraries' copies, and 3.32's -tmpdir flag shifts one
        # argument instead of two.
        env["TMPDIR"] = tmp
        out.parent.mkdir(parents=True, exist_ok=True)
        print("+ " + " ".join(cmd), flush=True)
        start = time.monotonic()
        proc, memory = run_streaming(cmd, env, Path(tmp) / "stderr.txt")
        wall = time.monotonic() - start
        if proc.returncode == 2:  # the benchmark refused its input: its message alone
            sys.stderr.write("".join(line for line in proc.stderr.splitlines(keepends=True)
                                     if line.startswith(("error:", "(run with --help"))))
            return 2
        sys.stderr.write(proc.stderr)  # the benchmark's stderr and SMPI's timing summary
        if proc.returncode == 0 and any(f in ("-h", "--help", "--benchmark_list_tests")
                                        for f in flags):
            return 0  # help or a list of cases: no results file to leave
        if proc.returncode != 0 or not out.exists():
            return proc.returncode or 3
        shutil.copyfile(xml, out.parent / xml.name)
        shutil.copyfile(hosts, out.parent / hosts.name)
    m = re.search(r"Simulated time: ([0-9.eE+-]+)", proc.stderr)
    # Every simulated rank lives in smpirun's one process. PSS is the memory it really took;
    # RSS counts each mapping of modeled compute's shared placeholder block again
    # (process_memory.py).
    summary = {"bench": args.bench, "platform": platform.name, "detail": platform.detail(),
               "ranks": args.ranks, "compute": "modeled" if args.sim_flops else "executed",
               "sim_flops": args.sim_flops, "wall_s": round(wall, 3),
               "peak_pss_bytes": memory.peak_pss, "peak_rss_bytes": memory.peak_rss,
               "memory_samples": memory.samples, "memory_sample_errors": memory.errors,
               "memory_last_error": memory.last_error,
               "simulated_s": float(m.group(1)) if m else None, "command": cmd}
    (out.parent / f"{stem}.sim.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(f"simulated {args.ranks} ranks on {platform.name} in {wall:.1f} s of wall time, peak "
          f"memory {memory.peak_pss / 2**30:.2f} GiB (PSS; RSS {memory.peak_rss / 2**30:.2f} GiB "
          f"counts shared mappings each time); results: {out}")
    if not args.no_plot:
        subprocess.run([*module_command("plots.plot", args.python), str(out), "--out",
                        str(out.parent / f"{stem}_plots")], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
