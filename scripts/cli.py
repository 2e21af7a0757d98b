"""`suite`: the suite's Python tools as sub-commands of one program (`suite --help` lists them,
`suite COMMAND --help` gives one's flags). Each sub-command is one module's `main(argv)`,
imported only when it runs, so that listing them needs none of their dependencies; each module
also runs on its own as `python -m scripts.<folder>.<module>`."""

from __future__ import annotations

import importlib
import sys
from typing import NamedTuple


class Command(NamedTuple):
    module: str  # under scripts/
    summary: str


COMMANDS = {
    # results: verdicts, summaries, pages
    "summary": Command("results.summary", "a text table of results files: median step time, "
                                          "predictions, checks (CSV/JSON too)"),
    "compare": Command("results.compare", "a run against a baseline, case by case: regressions and checks"),
    "baselines": Command("results.baselines", "the baseline registry: list, add, find, rekey"),
    "run-verdict": Command("results.run_verdict", "every results file of a run against its baseline"),
    "history": Command("results.history", "a metric of each case over many runs (text, CSV, HTML)"),
    "change-points": Command("results.change_points", "where each case's history stepped: size, "
                                                      "commits and environment on either side"),
    "history-scale": Command("results.history_scale", "history's time over thousands of copied "
                                                      "results files, indexed"),
    "sensitivity": Command("results.sensitivity", "the smallest simulated slowdown change-points "
                                                  "finds (make sim); --cpu: real runs' verdicts"),
    "report-page": Command("results.report_page", "one HTML page for one run's folder"),
    "host-load": Command("results.host_load", "run a benchmark, recording how busy the machine was"),
    "test-counts": Command("results.test_counts", "how many tests ran and skipped, from ctest's JUnit report"),
    # figures
    "plot": Command("plots.plot", "PNG figures of every benchmark in a results file"),
    "trace": Command("plots.chrome_trace", "a results file's op timelines as Chrome trace-event JSON (Perfetto)"),
    "plot-varlen": Command("plots.plot_varlen", "packed documents against N_c: the model's prediction"),
    # where benchmarks run
    "simulate": Command("envs.simulate", "a benchmark on a simulated cluster (SimGrid's SMPI)"),
    "sim-platform": Command("envs.sim_platform", "the simulated platforms and link presets"),
    "sim-alpha-beta": Command("envs.sim_alpha_beta", "sp_tp simulated beside the alpha-beta model"),
    "sim-ring-demo": Command("envs.sim_ring_demo", "a simulated ring block-size sweep around this machine's c*"),
    "shaped-link": Command("envs.shaped_link", "a command over a shaped loopback link (root, tc)"),
    "emulated-cluster": Command("envs.emulated_cluster", "a benchmark on a cluster emulated on this "
                                                         "machine (root, namespaces)"),
    "link-presets": Command("envs.link_presets", "the link presets of slurm/link_presets.json"),
    "sweep": Command("envs.sweep", "a sweep of benchmark runs: Slurm jobs, shaped, emulated or simulated"),
    "wire-bytes": Command("envs.wire_bytes", "bytes on the wire per case, counted by the MPI library"),
    # the planner
    "calibrate": Command("planner.calibrate", "measure the rates the planner's formulas need"),
    "plan-check": Command("planner.plan_check", "the planner's ranked meshes run, beside its predictions"),
    "published-runs": Command("studies.published_runs", "the planner beside published training runs "
                                                        "(Megatron-LM, MegaScale, DeepSeek-V3)"),
    # the studies behind docs/
    "cp-side-by-side": Command("studies.cp_side_by_side", "context-parallel methods on the same packs of documents"),
    "mesh-orders": Command("studies.mesh_orders", "the same mesh degrees in several axis orders, simulated"),
    "packed-layouts": Command("studies.packed_layouts", "the ring's layouts on one pack of documents, simulated"),
    "moe-overlap-crossing": Command("studies.moe_overlap_crossing", "the MoE all-to-all behind another micro-batch "
                                                                     "across d_ff, simulated"),
    "moe-overlap-deepseek": Command("studies.moe_overlap_deepseek", "the same at DeepSeek-V3's sizes, simulated"),
    "moe-node-study": Command("studies.moe_node_study", "MoE dispatch across nodes at DeepEP's configuration, simulated"),
    "ring-crossing": Command("studies.ring_crossing", "where a ring block-size sweep stops exposing its transfer"),
    "tp-overlap-crossing": Command("studies.tp_overlap_crossing", "where TP+SP's collective matmul stops "
                                                                  "exposing its transfers"),
    "two-tier-table": Command("studies.two_tier_table", "the two-tier methods: model, simulated and emulated"),
    "blas-core-rates": Command("studies.blas_core_rates", "the CPU GEMM and attention rates beside numpy's "
                                                          "SGEMM, on OpenBLAS's pick of core and the suite's"),
    "docs-check": Command("studies.docs_check", "rerun the simulations behind docs' tables; fail on drift"),
    # PyTorch peers of a GPU check
    "torch-peer": Command("peers.torch_peer", "PyTorch's rates for kernel_bench's shapes (needs PyTorch, a GPU)"),
    "torch-async-tp-peer": Command("peers.torch_async_tp_peer", "PyTorch's async TP as sp_tp's peer "
                                                                "(needs PyTorch, GPUs)"),
    "peer-ratios": Command("peers.peer_ratios", "suite / PyTorch ratios from one GPU run"),
}


def command_line(tool: str, python: str = sys.executable) -> list[str]:
    """`suite TOOL` as a command line that `python` runs; TOOL is a sub-command (`plan-check`) or
    its module's file name (`plan_check.py`)."""
    name = tool.removesuffix(".py").replace("_", "-")
    if name not in COMMANDS:
        raise KeyError(f"no suite command {name!r}")
    return [python, "-m", "scripts", name]


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"  {name:<{width}}  {command.summary}" for name, command in COMMANDS.items()]
    return ("usage: suite COMMAND [ARGS...]\n\n" + (__doc__ or "").split("\n\n")[0] + "\n\ncommands:\n"
            + "\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(usage(), end="")
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"suite: no command {name!r}\n\n{usage()}", end="", file=sys.stderr)
        return 2
    module = importlib.import_module(f"scripts.{COMMANDS[name].module}")
    sys.argv[0] = f"suite {name}"  # argparse's prog, in usage lines and errors
    return module.main(rest) or 0


if __name__ == "__main__":
    sys.exit(main())
