"""sp_tp on a simulated cluster beside the alpha-beta model of the algorithms it ran.

    sim_alpha_beta.py RESULTS.h5 [--platform PRESET --nodes N --link L ...]

For every collective case of a simulated sp_tp file: the simulated step time, and the
alpha-beta time of the algorithms scripts/envs/simulate.py selects: all-reduce = Rabenseifner
(smpi/allreduce:rab_rdb: recursive-halving reduce-scatter then recursive-doubling all-gather,
step j moving n/2^j bytes between ranks 2^(j-1) apart), and SP's reduce-scatter (recursive
halving) + all-gather (recursive doubling), whose step j moves n/2^j bytes between ranks t/2^j
apart: the same bytes per rank, but the largest half crosses the farthest link. Both are
    T = 2 sum_{j=1..log2 t} (alpha_j + n / 2^j / W_j)
with each step's own alpha (the route's latency) and W (its slowest link) for the pair that
takes longest, ranks placed as the hostfile places them (rank r on GPU r mod g of node r div
g). A group of t ranks that is not a power of two is not modelled. `simulated_us` is the step
as the benchmark reports it (median over iterations of the slowest rank, each rank's clock
started as it left the barrier before the step); `fastest_us` is the quickest rank's time, which
carries no barrier exit skew (about 23 us over 1024 ranks on the fat tree).
The platform defaults to the one the file records (preset, nodes, link); its per-level numbers
come from scripts/envs/sim_platform.py.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

import numpy as np

from scripts.envs.sim_platform import Platform, make_platform
from scripts.results.suite_results import read_results

LEAF_LAT = 0.5e-6  # a leaf switch hop (sim_platform's leaf links)


def hop(p: Platform, a: int, b: int) -> tuple[float, float]:
    """(alpha, W) of one message from rank a to rank b."""
    lk = p.links()
    if p.topology == "flat":
        return 2 * lk.net_lat, lk.net_bw
    na, nb = a // p.gpus_per_node, b // p.gpus_per_node
    if na == nb:
        return 2 * lk.intra_lat, lk.intra_bw
    same_leaf = na // p.nodes_per_leaf == nb // p.nodes_per_leaf
    return 2 * lk.net_lat + (LEAF_LAT if same_leaf else 2 * LEAF_LAT), lk.net_bw


def worst(p: Platform, ranks: range, peer, nbytes: float) -> float:
    """One step in which every rank of the group exchanges nbytes with peer(i): the slowest
    pair sets the step's time."""
    t = 0.0
    for i in range(len(ranks)):
        alpha, w = hop(p, ranks.start + i, ranks.start + peer(i))
        t = max(t, alpha + nbytes / w)
    return t


def steps(p: Platform, ranks: range, n: float, near_first: bool) -> float:
    """log2 t steps; step j exchanges n/2^j bytes between ranks 2^(j-1) apart (near_first,
    MPICH's recursive halving inside Rabenseifner) or t/2^j apart (the far pair first)."""
    t = len(ranks)
    return sum(worst(p, ranks, lambda i, d=(1 << (j - 1)) if near_first else t >> j: i ^ d,
                     n / 2**j) for j in range(1, int(math.log2(t)) + 1))


def predict(p: Platform, op: str, n: float, ranks: range) -> float:
    """All-reduce (Rabenseifner, rab_rdb): reduce-scatter by recursive halving with the nearest
    pair first, then the all-gather retracing it: 2 sum_j alpha(2^(j-1)) + n/2^j / W(2^(j-1)).
    SP's reduce-scatter (Open MPI's recursive halving) + all-gather (recursive doubling) move
    the same bytes per rank but pair the farthest ranks with the largest half:
    2 sum_j alpha(t/2^j) + n/2^j / W(t/2^j)."""
    if len(ranks) & (len(ranks) - 1):
        raise ValueError(f"a group of {len(ranks)} ranks: the model covers powers of two")
    return 2 * steps(p, ranks, n, near_first=(op == "allreduce"))


def platform_of(res, args) -> Platform:
    a = res.attrs
    preset = args.platform or str(a.get("sim_platform", "flat"))
    detail = str(a.get("sim_platform_detail", ""))
    nodes = args.nodes
    if nodes is None:
        m = re.search(r"(\d+) (?:node\(s\)|hosts)", detail)
        nodes = int(m.group(1)) if m else None
    link = args.link or (str(a.get("link")) if preset != "flat" else None)
    # the network level's numbers as run (simulate.py --bw / --lat may have overridden them)
    m = re.search(r"(?:links|NIC) ([0-9.e+-]+) B/s ([0-9.e+-]+) s", detail)
    bw, lat = (float(m.group(1)), float(m.group(2))) if m else (None, None)
    return make_platform(preset, nodes=nodes, link=link, bw=args.bw or bw, lat=args.lat or lat)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path)
    parser.add_argument("--platform")
    parser.add_argument("--nodes", type=int)
    parser.add_argument("--link")
    parser.add_argument("--bw", type=float)
    parser.add_argument("--lat", type=float)
    args = parser.parse_args(argv)
    res = read_results(args.results)
    if res.attrs.get("simulated") != 1 or res.bench != "sp_tp":
        print(f"error: {args.results} is not a simulated sp_tp run", file=sys.stderr)
        return 2
    p = platform_of(res, args)
    t = int(res.config_attr("group_size"))
    group = range(0, t)
    print(f"{args.results}: {res.describe()}\nplatform: {p.detail()}; group of {t} ranks")
    print(f"{'case':<32} {'simulated_us':>12} {'fastest_us':>10} {'alpha_beta_us':>13} "
          f"{'ratio':>6}")
    for case in res.cases_of("sp_tp"):
        op, nbytes = case.params.get("op"), case.params.get("n_bytes")
        if op not in ("allreduce", "rs_ag") or nbytes is None:
            continue
        pred = predict(p, str(op), float(nbytes), group)
        sim = case.median_s or float("nan")
        times = case.datasets.get("time_s")
        fastest = float(np.min(times)) if times is not None else float("nan")
        print(f"{case.name:<32} {sim * 1e6:12.2f} {fastest * 1e6:10.2f} {pred * 1e6:13.2f} "
              f"{sim / pred:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
