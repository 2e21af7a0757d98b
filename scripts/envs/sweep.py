"""Submit a sweep of Slurm jobs: benchmark x values (block sizes, sequence lengths, tokens)
x link presets x node counts, one job per cell or one job array, each cell through the
benchmark's script in slurm/ (slurm/lib/run_bench.sh does the run and the compare step).

    suite sweep ring_attention --values 4K,8K,16K --link nvlink,net --nodes 1,2 --dry-run
    suite sweep moe --values 2K,8K --axis SKEW=none,zipf,hot --link nvlink-ib --nodes 2 --array
    suite sweep ring_attention --values 64:2K:x2 --link shaped-1g --cpu --tasks-per-node 2

--dry-run prints every job (its sbatch command line) and, per cell, what build/bin/model
predicts (forward time of --layers layers per rank, bytes per rank, memory) at the rates
given with --flops and --bw (or per link with --link-bw), before anything is submitted.
A shaped link (`shaped-1g`, `shaped-10g`, `shaped:RATE`: scripts/envs/shaped_link.py, root and tc)
is this machine's own loopback in a network namespace, shaped: its cells run here, one after
another, each under `shaped_link.py LINK -- mpirun -np RANKS ...` with the job script's flags
(slurm/lib/run_bench.sh), into results/shaped/sweeps/<UTC>/<job name>.h5 (or --sweep-dir); the
model's W is the rate shared by the ranks (rate / ranks). One node only, not with Slurm presets,
--array or --simulate. An emulated cluster (`emulated-2x2-1g`: scripts/envs/emulated_cluster.py,
root) runs its cells here too, each on a cluster of namespaces built for it, into
results/emulated/sweeps/<UTC>/; its label names the nodes and ranks, the model's W is the NIC's
rate over the ranks of a node.
An unknown link preset, a node count the benchmark has no script for, or a bad value list
is an error (exit 2) and nothing is submitted. So is a GPU sweep that the build cannot run:
the build records what it has in bin/suite_features.txt (cmake/build_summary.cmake); without
--transport the jobs take NCCL where the build has it and MPI otherwise (said in one line),
--transport nccl without NCCL or a build without CUDA stops before anything is submitted.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from scripts import ROOT as REPO, module_command
from scripts.envs.link_presets import PresetError, resolve
from scripts.envs import emulated_cluster
from scripts.envs import shaped_link
from scripts.envs import sweep_sim


@dataclass(frozen=True)
class Bench:
    """How a case set is swept: the variable of the job script that takes the swept value, the
    `model` section, and the model flags matching run_bench.sh's sizes (gpu, cpu mode)."""

    variable: str
    what: str
    section: str
    model_gpu: tuple[str, ...]
    model_cpu: tuple[str, ...]


BENCHES = {
    "sp_tp": Bench("SEQ", "s (activation-sized case)", "sp",
                   ("--hidden", "8192", "--heads", "64", "--batch", "1"),
                   ("--hidden", "64", "--heads", "8", "--batch", "1")),
    "sp_tp_layer": Bench("SEQ", "s (sequence length)", "sp",
                         ("--hidden", "8192", "--heads", "64", "--batch", "1"),
                         ("--hidden", "512", "--heads", "8", "--batch", "1")),
    "ring_attention": Bench("BLOCK", "c (tokens per rank)", "ring",
                            ("--hidden", "8192", "--heads", "64", "--kv-heads", "8", "--causal"),
                            ("--hidden", "256", "--heads", "4", "--kv-heads", "2", "--causal")),
    "ulysses": Bench("SEQ", "s (sequence length)", "ulysses",
                     ("--hidden", "8192", "--heads", "64", "--kv-heads", "8", "--causal"),
                     ("--hidden", "256", "--heads", "4", "--kv-heads", "4", "--causal")),
    "moe": Bench("TOKENS", "T (tokens per rank)", "moe",
                 ("--hidden", "4096", "--d-ff", "14336", "--experts", "64", "--top-k", "2",
                  "--swiglu"),
                 ("--hidden", "64", "--d-ff", "128", "--experts", "8", "--top-k", "2",
                  "--swiglu")),
}

SCALE = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}
FEATURES = "suite_features.txt"  # what the build has, beside its executables


class SweepError(ValueError):
    """Bad input: reported as one `error:` line, exit 2, nothing submitted."""


def parse_number(text: str) -> int:
    m = re.fullmatch(r"(\d+)([KMG]?)", text.strip())
    if not m:
        raise SweepError(f"not a number: {text!r} (digits with an optional K, M or G)")
    return int(m.group(1)) * SCALE[m.group(2)]


def parse_values(text: str) -> list[int]:
    """The suite's sweep syntax: `a,b,c`, `begin:end:xFACTOR`, `begin:end:+STEP`."""
    values: list[int] = []
    for item in filter(None, (p.strip() for p in text.split(","))):
        if ":" not in item:
            values.append(parse_number(item))
            continue
        parts = item.split(":")
        if len(parts) != 3 or not parts[2][:1] in ("x", "+"):
            raise SweepError(f"bad range {item!r}: begin:end:xFACTOR or begin:end:+STEP")
        begin, end = parse_number(parts[0]), parse_number(parts[1])
        step = parse_number(parts[2][1:])
        if begin > end or begin <= 0 or (parts[2][0] == "x" and step < 2) or step < 1:
            raise SweepError(f"bad range {item!r}")
        v = begin
        while v <= end:
            values.append(v)
            v = v * step if parts[2][0] == "x" else v + step
    if not values:
        raise SweepError("--values names nothing")
    return values


def format_value(n: int) -> str:
    for suffix in ("G", "M", "K"):
        if n % SCALE[suffix] == 0:
            return f"{n // SCALE[suffix]}{suffix}"
    return str(n)


@dataclass
class Cell:
    index: int
    bench: str
    value: int
    link: str
    nodes: int
    ranks: int
    script: Path
    env: dict[str, str]
    prediction: dict[str, float] | None = None
    note: str = ""
    sbatch: list[str] = field(default_factory=list)


def script_for(bench: str, nodes: int) -> Path:
    name = f"{bench}.sbatch" if nodes == 1 else f"{bench}_multinode.sbatch"
    path = REPO / "slurm" / name
    if not path.exists():
        raise SweepError(f"{bench} has no job script for {nodes} nodes (slurm/{name}); "
                         f"{'it runs inside one node' if nodes > 1 else ''}".rstrip("; "))
    return path


def group_degree(args: argparse.Namespace, ranks: int, nodes: int) -> int:
    """The method's group size the job will use (sp: TP, ring/ulysses: CP, moe: EP)."""
    if args.bench.startswith("sp_tp"):
        if args.group:
            return args.group
        return ranks // nodes if nodes > 1 else ranks  # multi-node sp_tp: TP inside a node
    return args.group or ranks


def model_command(args: argparse.Namespace, cell: Cell, bw: float | None) -> list[str]:
    spec = BENCHES[cell.bench]
    deg = str(group_degree(args, cell.ranks, cell.nodes))
    cmd = [str(args.model), "--section", spec.section, "--layers", str(args.layers),
           "--dtype", "fp32" if args.cpu or args.simulate else "bf16",  # SMPI build: fp32
           *(spec.model_cpu if args.cpu else spec.model_gpu)]
    if spec.section == "sp":
        cmd += ["--seq", str(cell.value), "--tp", deg]
    elif spec.section == "ring":
        cmd += ["--seq", str(cell.value * int(deg)), "--cp", deg]
    elif spec.section == "ulysses":
        # The job's Ulysses degree: DEGREE from --axis, else slurm/lib/run_bench.sh's default.
        degree = cell.env.get("DEGREE", "4" if args.cpu else "8")
        cmd += ["--seq", str(cell.value), "--cp", deg, "--ulysses-degree", degree]
    else:
        cmd += ["--tokens", str(cell.value), "--ep", deg]
    if args.flops:
        cmd += ["--flops", f"{args.flops:g}"]
    if bw:
        cmd += ["--bw", f"{bw:g}"]
    return cmd + shlex.split(args.model_args)


def predict(cmd: list[str]) -> tuple[dict[str, float] | None, str]:
    """Runs `model` and reads its `prediction:` line; (None, why) when it cannot."""
    if not Path(cmd[0]).exists():
        return None, f"{cmd[0]} is not built"
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        return None, f"model failed: {proc.stderr.strip() or proc.stdout.strip()}"
    for line in proc.stdout.splitlines():
        if line.startswith("prediction:"):
            pairs = dict(p.split("=", 1) for p in line.split()[1:])
            return {k: float(v) for k, v in pairs.items() if k != "section"}, ""
    return None, "model printed no prediction line"


def link_bandwidths(text: str) -> dict[str, float]:
    out = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        name, _, value = item.partition("=")
        try:
            out[name] = float(value)
        except ValueError as err:
            raise SweepError(f"--link-bw: {item!r} is not NAME=BYTES_PER_S") from err
    return out


def build_features(bin_dir: Path) -> dict[str, str] | None:
    """The `key=value` lines the build wrote at configure time, or None where it wrote none (a
    build from before the file existed, or no build yet)."""
    path = bin_dir / FEATURES
    if not path.is_file():
        return None
    lines = (line.partition("=") for line in path.read_text().splitlines() if not line.startswith("#"))
    return {key: value for key, sep, value in lines if sep}


def gpu_transport(requested: str | None, bin_dir: Path) -> str:
    """The transport of GPU jobs: the one requested, checked against what the build has, or the
    build's best (nccl, else mpi, said in one line). SweepError where the build lacks CUDA or
    the NCCL requested."""
    features = build_features(bin_dir)
    if features is None:
        return requested or "nccl"
    where = bin_dir / FEATURES
    if features.get("cuda") != "ON":
        raise SweepError(f"{features.get('cuda_off', 'no CUDA in this build')} ({where})")
    if features.get("nccl") == "ON":
        return requested or "nccl"
    why = features.get("nccl_off", "no NCCL in this build")
    if requested == "nccl":
        raise SweepError(f"--transport nccl, but {why} ({where})")
    if requested is None:
        print(f"note: {why}")
    return requested or "mpi"


def extra_axes(items: list[str]) -> list[dict[str, str]]:
    """`--axis NAME=a,b` options as the product of their settings: [{NAME: a, ...}, ...]."""
    settings: list[list[tuple[str, str]]] = []
    for item in items:
        name, _, values = item.partition("=")
        if not re.fullmatch(r"[A-Z][A-Z0-9_]*", name) or not values.strip(","):
            raise SweepError(f"--axis {item!r}: NAME=v1,v2 with an upper-case job variable")
        if name in ("LINK", "SUITE_MODE", "TRANSPORT"):
            raise SweepError(f"--axis {name}: set by the sweep itself (--link, --cpu, --transport)")
        settings.append([(name, v) for v in values.split(",") if v])
    return [dict(combo) for combo in itertools.product(*settings)]


def build_cells(args: argparse.Namespace) -> list[Cell]:
    if args.bench not in BENCHES:
        raise SweepError(f"unknown benchmark {args.bench!r}; known: {', '.join(BENCHES)}")
    spec = BENCHES[args.bench]
    values = parse_values(args.values)
    links = [s.strip() for s in args.link.split(",") if s.strip()]
    transport = "mpi" if args.cpu else args.transport
    try:
        nodes_list = [int(n) for n in args.nodes.split(",")]
    except ValueError as err:
        raise SweepError(f"--nodes: {args.nodes!r} is not a list of integers") from err
    if any(is_local(link) for link in links):
        links = local_links(args, links, nodes_list)
    for link in links:
        if is_local(link):
            continue
        try:
            resolve(link, transport)
        except PresetError as err:
            raise SweepError(str(err)) from err
    if not links or not nodes_list or min(nodes_list) < 1:
        raise SweepError("--link and --nodes must name at least one preset / positive count")
    bws = link_bandwidths(args.link_bw)
    unknown = set(bws) - set(links)
    if unknown:
        raise SweepError(f"--link-bw names presets not swept: {', '.join(sorted(unknown))}")
    axes = extra_axes(args.axis)
    cells = []
    for nodes in nodes_list:
        script = script_for(args.bench, nodes)
        for link in links:
            for value, extra in itertools.product(values, axes):
                env = {"LINK": link, spec.variable: str(value), **extra}
                if args.cpu:
                    env["SUITE_MODE"] = "cpu"
                else:
                    env["TRANSPORT"] = args.transport
                if args.group:
                    env[{"sp": "TP", "ring": "CP", "ulysses": "CP", "moe": "EP"}[spec.section]] = \
                        str(args.group)
                cell = Cell(len(cells), args.bench, value, link, nodes,
                            nodes * args.tasks_per_node, script, env)
                if is_emulated(link):  # the cluster's own nodes and ranks, on this machine
                    cluster = emulated_cluster.parse_label(link)
                    cell.nodes, cell.ranks = cluster.nodes, cluster.ranks
                if args.group and cell.ranks % args.group:
                    raise SweepError(f"--group {args.group} does not divide {cell.ranks} ranks")
                cells.append(cell)
    return cells


def is_emulated(link: str) -> bool:
    return link.startswith("emulated-")


def is_local(link: str) -> bool:
    """A link built on this machine: a shaped loopback or an emulated cluster."""
    return shaped_link.is_shaped(link) or is_emulated(link)


def local_links(args: argparse.Namespace, links: list[str], nodes_list: list[int]) -> list[str]:
    """The local links' results labels (`shaped:1gbit` is `shaped-1g`), or SweepError where
    they cannot run: this machine's, here, not through Slurm or the simulator. An emulated
    cluster brings its own nodes and ranks (emulated-<nodes>x<ranks per node>-<rate>)."""
    if not all(is_local(link) for link in links):
        raise SweepError("shaped links and emulated clusters run on this machine and the other "
                         "presets through Slurm: sweep them separately")
    if nodes_list != [1]:
        raise SweepError("a shaped link or an emulated cluster is this machine: --nodes 1 (an "
                         "emulated cluster's label names its nodes)")
    if args.simulate or args.array:
        raise SweepError("local links run here, one cell after another: no --simulate, --array")
    try:
        return [emulated_cluster.parse_label(link).label if is_emulated(link)
                else shaped_link.parse_link(link).label for link in links]
    except shaped_link.LinkError as err:
        raise SweepError(str(err)) from err


def local_bw(cell: Cell) -> float:
    """W for the model on a local link: a shaped loopback's rate shared by every rank sending at
    once; an emulated cluster's NIC shared by the ranks of a node."""
    if is_emulated(cell.link):
        cluster = emulated_cluster.parse_label(cell.link)
        return cluster.rate_bit / 8 / cluster.ranks_per_node
    return shaped_link.parse_link(cell.link).per_rank_W(cell.ranks)


def local_command(args: argparse.Namespace, cell: Cell, name: str, out_dir: Path) -> list[str]:
    """`shaped_link.py LINK -- mpirun -np RANKS BIN FLAGS` or `emulated_cluster.py --link LINK --
    BIN FLAGS`: the job script's flags for the cell (slurm/lib/run_bench.sh's suite_case_args)
    and its backend, transport, dtype and label."""
    mode = "cpu" if args.cpu else "gpu"
    env = {k: v for k, v in cell.env.items() if k not in ("SUITE_MODE", "TRANSPORT")}
    try:
        flags = sweep_sim.case_args(cell.bench, mode, env)
    except sweep_sim.SimSweepError as err:
        raise SweepError(str(err)) from err
    backend, transport, dtype = ("cpu", "mpi", "fp32") if args.cpu else ("cuda", args.transport,
                                                                         "bf16")
    binary = args.bin_dir / cell.bench.removesuffix("_layer")
    if is_emulated(cell.link):
        launch = [*module_command("envs.emulated_cluster"), "--link", cell.link,
                  "--mpirun", shlex.split(args.mpirun)[0], "--"]
    else:
        launch = [*module_command("envs.shaped_link"), cell.link, "--",
                  *shlex.split(args.mpirun), "-np", str(cell.ranks), "--oversubscribe"]
    return [*launch, str(binary), *flags, "--backend", backend, "--transport", transport,
            "--dtype", dtype, "--link", cell.link, "--out", str(out_dir / f"{name}.h5")]


def run_local(args: argparse.Namespace, cells: list[Cell], out_dir: Path) -> int:
    """Runs (or with --dry-run prints) every cell here on its local link; 1 if any failed."""
    commands = [local_command(args, c, job_name(args, c), out_dir) for c in cells]
    print(f"\n{len(commands)} run(s) on this machine (a shaped loopback or an emulated cluster)"
          f"{' (dry run: nothing runs)' if args.dry_run else ''}:")
    if not args.dry_run:
        try:  # not root or no tc: refused before anything runs
            if any(is_emulated(c.link) for c in cells):
                emulated_cluster.find_tools(shlex.split(args.mpirun)[0])
            else:
                shaped_link.find_tools()
        except shaped_link.LinkError as err:
            raise SweepError(str(err)) from err
        out_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if os.geteuid() == 0:  # Open MPI refuses root without these (and shaping needs root)
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return run_cells(commands, args.dry_run, out_dir, "run", env)


def run_cells(commands: list[list[str]], dry_run: bool, out_dir: Path, what: str,
              env: dict[str, str] | None = None) -> int:
    """Runs here, one after another, the command of each cell (with --dry-run only prints them);
    exit status 1 if any failed. `what` names one in the error line ("run", "simulation")."""
    failed = 0
    for cmd in commands:
        print("  " + shlex.join(cmd), flush=True)
        if dry_run:
            continue
        rc = subprocess.run(cmd, cwd=REPO, env=env).returncode
        if rc != 0:
            failed += 1
            print(f"error: {what} failed ({rc}): {shlex.join(cmd)}", file=sys.stderr)
    if not dry_run:
        print(f"results: {out_dir} ({len(commands) - failed} of {len(commands)} cells)")
    return 1 if failed else 0


def sbatch_base(args: argparse.Namespace, cell: Cell) -> list[str]:
    cmd = [args.sbatch, f"--nodes={cell.nodes}", f"--ntasks-per-node={args.tasks_per_node}",
           f"--gpus-per-node={0 if args.cpu else args.tasks_per_node}"]
    return cmd + shlex.split(args.sbatch_args)


def job_name(args: argparse.Namespace, cell: Cell) -> str:
    """The cell's name: its job name, and its results file's with --simulate."""
    spec = BENCHES[args.bench]
    extra = "".join(f"-{k.lower()}{v}" for k, v in cell.env.items()
                    if k not in ("LINK", "SUITE_MODE", "TRANSPORT", spec.variable))
    return f"{args.bench}-{spec.variable.lower()}{format_value(cell.value)}{extra}" \
           f"-{cell.link}-n{cell.nodes}"


def per_cell_commands(args: argparse.Namespace, cells: list[Cell]) -> list[list[str]]:
    cmds = []
    for cell in cells:
        exports = ",".join(f"{k}={v}" for k, v in cell.env.items())
        name = job_name(args, cell)
        cell.sbatch = [*sbatch_base(args, cell), f"--job-name={name}",
                       f"--export=ALL,{exports}", str(cell.script)]
        cmds.append(cell.sbatch)
    return cmds


def array_commands(args: argparse.Namespace, cells: list[Cell],
                   sweep_dir: Path) -> list[list[str]]:
    """One array per (script, node count); the cells file holds each task's variables."""
    groups: dict[tuple[Path, int], list[Cell]] = {}
    for cell in cells:
        groups.setdefault((cell.script, cell.nodes), []).append(cell)
    cmds = []
    for (script, nodes), group in groups.items():
        cells_file = sweep_dir / f"{script.stem}_n{nodes}.cells"
        for task, cell in enumerate(group):
            cell.note = f"array task {task} of {cells_file.name}"
        cmd = [*sbatch_base(args, group[0]), f"--array=0-{len(group) - 1}",
               f"--job-name={args.bench}-sweep-n{nodes}",
               f"--export=ALL,SUITE_SWEEP_CELLS={cells_file}", str(script)]
        for cell in group:
            cell.sbatch = cmd
        cmds.append((cmd, cells_file, group))
    return cmds


def write_cells_file(path: Path, group: list[Cell]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(" ".join(f"{k}={v}" for k, v in c.env.items()) + "\n"
                            for c in group))


def fmt(x: float | None, unit: str) -> str:
    return "-" if x is None else f"{x:.3g}{unit}"


def print_plan(args: argparse.Namespace, cells: list[Cell]) -> None:
    spec = BENCHES[args.bench]
    print(f"{args.bench}: {len(cells)} cell(s): {spec.what} x link x nodes; model: forward "
          f"of {args.layers} layer(s) per rank\n")
    header = ("cell", "nodes", "ranks", "link", spec.variable, "axes", "pred_step_s",
              "pred_bytes/rank", "pred_memory", "note")
    rows = []
    for c in cells:
        p = c.prediction or {}
        axes = " ".join(f"{k}={v}" for k, v in c.env.items()
                        if k not in ("LINK", "SUITE_MODE", "TRANSPORT", spec.variable)) or "-"
        rows.append((str(c.index), str(c.nodes), str(c.ranks), c.link, format_value(c.value), axes,
                     fmt(p.get("step_s"), " s"), fmt(p.get("bytes_per_rank"), " B"),
                     fmt(p.get("memory_bytes"), " B") if p.get("memory_bytes") else "-", c.note))
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    for row in [header, tuple("-" * w for w in widths), *rows]:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bench", help=f"case set: {', '.join(BENCHES)}")
    parser.add_argument("--values", required=True,
                        help="the swept value per cell: sp_tp/ulysses s, ring_attention c, moe "
                             "T; list a,b,c or range begin:end:xF (K/M/G = 1024 powers)")
    parser.add_argument("--axis", action="append", default=[], metavar="NAME=v1,v2",
                        help="a further axis of job variables (slurm/README.md), e.g. "
                             "SKEW=none,zipf,hot for moe or SIZES=1M,1G for sp_tp; repeatable; "
                             "the model's prediction does not depend on it")
    parser.add_argument("--link", default="nvlink",
                        help="link presets, comma-separated: slurm/link_presets.json's, or shaped "
                             "links run here (shaped-1g, shaped-10g, shaped:RATE; "
                             "scripts/envs/shaped_link.py --list), or clusters emulated here "
                             "(emulated-<nodes>x<ranks per node>-<rate>, e.g. emulated-2x2-1g: "
                             "scripts/envs/emulated_cluster.py)")
    parser.add_argument("--nodes", default="1", help="node counts, comma-separated")
    parser.add_argument("--tasks-per-node", type=int, default=8,
                        help="ranks (GPUs) per node (default 8)")
    parser.add_argument("--group", type=int, default=0,
                        help="group size passed as TP/CP/EP (default: the script's)")
    parser.add_argument("--transport", default=None, choices=("nccl", "mpi"),
                        help="GPU jobs' transport (default: nccl where the build has it "
                             "(--bin-dir's suite_features.txt), else mpi)")
    parser.add_argument("--cpu", action="store_true",
                        help="CPU mode (SUITE_MODE=cpu, MPI, no GPUs requested)")
    parser.add_argument("--array", action="store_true",
                        help="one job array per script and node count instead of a job per cell")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the jobs and the model's predictions, submit nothing")
    parser.add_argument("--simulate", action="store_true",
                        help="run every cell here on a simulated cluster (SimGrid SMPI, "
                             "scripts/envs/simulate.py; `make sim` first) instead of submitting it: "
                             "1 node = node8, N nodes = fattree; -F gives modeled compute at F "
                             "with the job's GPU sizes, without it the CPU sizes are executed")
    parser.add_argument("--layers", type=int, default=1, help="model layers for the prediction")
    parser.add_argument("--flops", "-F", type=float, default=None,
                        help="F for the model (FLOP/s; default: model's)")
    parser.add_argument("--bw", "-W", type=float, default=None,
                        help="W for the model (B/s; default: model's)")
    parser.add_argument("--link-bw", default="",
                        help="W per preset, e.g. nvlink=4.5e11,net=2.5e10 (overrides --bw)")
    parser.add_argument("--model-args", default="",
                        help="extra model flags, e.g. '--hidden 4096 --heads 32'")
    parser.add_argument("--model", type=Path, default=REPO / "build" / "bin" / "model",
                        help="the model executable (default build/bin/model)")
    parser.add_argument("--sbatch", default="sbatch", help="sbatch command (default sbatch)")
    parser.add_argument("--sbatch-args", default="",
                        help="extra sbatch flags for every job, e.g. '--partition=gpu --time=1:00:00'")
    parser.add_argument("--sweep-dir", type=Path, default=None,
                        help="where array cell files go (default results/slurm/sweeps/<UTC>); "
                             "with --simulate or a shaped link, the results files")
    parser.add_argument("--mpirun", default="mpirun",
                        help="MPI launcher of shaped-link cells, run here (default mpirun)")
    parser.add_argument("--bin-dir", type=Path, default=REPO / "build" / "bin",
                        help="the build's executables (default build/bin): its suite_features.txt "
                             "says which transports the GPU jobs can use; shaped-link cells run "
                             "them")
    args = parser.parse_args(argv)
    if args.tasks_per_node < 1 or args.layers < 1 or args.group < 0:
        parser.error("--tasks-per-node and --layers must be >= 1, --group >= 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.simulate and not args.flops:
        args.cpu = True  # executed compute: the job script's CPU sizes
    here = args.simulate or any(is_local(link.strip()) for link in args.link.split(","))
    try:
        if args.cpu or here:
            args.transport = args.transport or "nccl"
        else:  # GPU jobs through Slurm run the build in --bin-dir: a transport it has, or none
            args.transport = gpu_transport(args.transport, args.bin_dir)
        cells = build_cells(args)
    except SweepError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    bws = link_bandwidths(args.link_bw)
    for cell in cells:
        bw = bws.get(cell.link, args.bw)
        if bw is None and args.simulate:  # the simulated link's own figure
            bw = sweep_sim.simulated_bw(args, cell)
        if bw is None and is_local(cell.link):  # the rate the ranks share
            bw = local_bw(cell)
        cell.prediction, why = predict(model_command(args, cell, bw))
        if why:
            cell.note = why
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    if args.simulate:
        print_plan(args, cells)
        out_dir = args.sweep_dir or REPO / "results" / "sim" / "sweeps" / stamp
        try:
            commands = sweep_sim.plan(args, cells, [job_name(args, c) for c in cells], out_dir)
            return run_cells(commands, args.dry_run, out_dir, "simulation")
        except sweep_sim.SimSweepError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
    if cells and is_local(cells[0].link):
        print_plan(args, cells)
        kind = "emulated" if is_emulated(cells[0].link) else "shaped"
        out_dir = args.sweep_dir or REPO / "results" / kind / "sweeps" / stamp
        try:
            return run_local(args, cells, out_dir)
        except SweepError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
    sweep_dir = args.sweep_dir or REPO / "results" / "slurm" / "sweeps" / stamp
    if args.array:
        arrays = array_commands(args, cells, sweep_dir)
        commands = [cmd for cmd, _, _ in arrays]
    else:
        commands = per_cell_commands(args, cells)
    print_plan(args, cells)
    print(f"\n{len(commands)} sbatch command(s){' (dry run: nothing submitted)' if args.dry_run else ''}:")
    for cmd in commands:
        print("  " + shlex.join(cmd))
    if args.dry_run:
        return 0
    if args.array:
        for _, cells_file, group in arrays:
            write_cells_file(cells_file, group)
    failed = 0
    for cmd in commands:
        proc = subprocess.run([cmd[0], "--parsable", *cmd[1:]], capture_output=True, text=True,
                              cwd=REPO)
        if proc.returncode != 0:
            failed += 1
            print(f"error: sbatch failed ({proc.returncode}): {proc.stderr.strip()}",
                  file=sys.stderr)
        else:
            print(f"submitted: {proc.stdout.strip()}")  # the job id (--parsable)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
