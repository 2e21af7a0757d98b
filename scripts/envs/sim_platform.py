"""Simulated platforms for SimGrid's SMPI (scripts/envs/simulate.py), generated from a few numbers.

    suite sim-platform --list                               the presets and the simulated links
    suite sim-platform fattree --nodes 16 --out plat.xml    write a platform file (and print it)

Presets (topology, nodes, GPUs per node, link; each value can be overridden):
  flat     hosts on one crossbar, one link each (default 4 hosts, 50 MB/s, 5 us: a slow link
           that puts the ring's c* inside a CPU block-size sweep); for tests
  node8    one node of 8 GPUs on an NVLink-like switch (link preset nvlink)
  fattree  N nodes of 8 (default 128 = 1024 GPUs): NVLink inside a node, and a per-GPU network
           link (InfiniBand-like NIC) into a two-level fat tree (leaf switches of 4 nodes, non-blocking spine)

The suite's link presets (slurm/link_presets.json) map to simulated links in LINKS: per GPU,
the bandwidth and latency of the path inside a node and of the network link. A preset that
turns peer-to-peer off (net, ib, shm-off, tcp) routes traffic inside a node through the NICs
too, as NCCL then does. Hosts are named node<n>-gpu<g> (flat: host<i>); rank r runs on the
r-th host of the hostfile. Bandwidths are per direction (links are full duplex). The network
model is SimGrid's CM02 (max-min sharing, no correction factors), so a lone transfer of B
bytes over a route takes sum(latency) + B / min(bandwidth): alpha-beta, contention included.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from scripts import ROOT

LINK_PRESETS_FILE = ROOT / "slurm" / "link_presets.json"


class PlatformError(ValueError):
    """Bad input: an unknown preset or link, or numbers that make no platform (exit 2)."""


@dataclass(frozen=True)
class Link:
    """One simulated link preset: bytes/s and seconds per link (a route crosses two links of
    each level it uses: out of the sender, into the receiver)."""

    intra_bw: float  # GPU to GPU inside a node, per GPU and direction
    intra_lat: float
    net_bw: float  # the GPU's own network link (NIC), per direction
    net_lat: float
    intra_via_nic: bool  # peer-to-peer off: traffic inside a node goes out and back through NICs
    note: str


LINKS: dict[str, Link] = {
    "nvlink": Link(450e9, 0.5e-6, 50e9, 1e-6, False,
                   "NVLink 4 (H100 SXM, 450 GB/s per direction) inside a node; 400 Gb/s "
                   "InfiniBand NDR per GPU between nodes"),
    "nvlink-ib": Link(450e9, 0.5e-6, 50e9, 1e-6, False,
                      "as nvlink (InfiniBand forced between nodes is what nvlink simulates)"),
    "pcie-host": Link(25e9, 2.5e-6, 50e9, 1e-6, False,
                      "peer-to-peer off: GPU to GPU through host memory over PCIe (25 GB/s); "
                      "InfiniBand NDR between nodes"),
    "net": Link(50e9, 1e-6, 50e9, 1e-6, True,
                "P2P and shared memory off: every transfer through the GPU's 400 Gb/s NIC"),
    "shm-off": Link(50e9, 1e-6, 50e9, 1e-6, True, "as net"),
    "ib": Link(50e9, 1e-6, 50e9, 1e-6, True, "every transfer over InfiniBand NDR (400 Gb/s)"),
    "tcp": Link(12.5e9, 10e-6, 12.5e9, 10e-6, True,
                "TCP sockets on 100 GbE for every transfer (12.5 GB/s, 10 us per link)"),
}


@dataclass(frozen=True)
class Platform:
    name: str
    topology: str  # flat | node | fattree
    nodes: int
    gpus_per_node: int
    link: str  # a key of LINKS; flat: only a label (its one level is bw / lat)
    bw: float  # flat: the hosts' links; node, fattree: overrides the network (NIC) bandwidth
    lat: float
    speed: float  # FLOP/s of each simulated host (executed compute: scaled by host speed / this)
    nodes_per_leaf: int = 4
    loopback_bw: float = 1e12  # a rank's messages to itself (device memory copy)
    description: str = ""

    @property
    def hosts(self) -> int:
        return self.nodes * self.gpus_per_node

    def host_names(self) -> list[str]:
        if self.topology == "flat":
            return [f"host{i}" for i in range(self.nodes)]
        return [f"node{n}-gpu{g}" for n in range(self.nodes) for g in range(self.gpus_per_node)]

    def links(self) -> Link:
        """The simulated link figures, with --bw / --lat applied to the network level."""
        if self.topology == "flat":
            return Link(self.bw, self.lat, self.bw, self.lat, False, "flat crossbar")
        base = LINKS[self.link]
        net_bw = self.bw or base.net_bw
        net_lat = self.lat or base.net_lat
        if base.intra_via_nic:
            return replace(base, intra_bw=net_bw, intra_lat=net_lat, net_bw=net_bw, net_lat=net_lat)
        return replace(base, net_bw=net_bw, net_lat=net_lat)

    def detail(self) -> str:
        """One line of the numbers, stored in the results as `sim_platform_detail`."""
        if self.topology == "flat":
            return (f"flat: {self.nodes} hosts on a crossbar, links {self.bw:g} B/s {self.lat:g} s, "
                    f"speed {self.speed:g} FLOP/s")
        lk = self.links()
        text = (f"{self.topology}: {self.nodes} node(s) x {self.gpus_per_node} GPUs, link {self.link}: "
                f"intra {lk.intra_bw:g} B/s {lk.intra_lat:g} s per link"
                f"{' (through the NICs)' if lk.intra_via_nic else ''}, NIC {lk.net_bw:g} B/s "
                f"{lk.net_lat:g} s, speed {self.speed:g} FLOP/s")
        if self.topology == "fattree" and self.nodes > 1:
            text += f", two-level fat tree: leaves of {self.nodes_per_leaf} nodes, non-blocking spine"
        return text


PRESETS: dict[str, Platform] = {
    "flat": Platform("flat", "flat", 4, 1, "flat", 50e6, 5e-6, 1e10,
                     description="4 hosts on a crossbar, 50 MB/s and 5 us links (tests, the "
                                 "ring's crossing on the CPU)"),
    "node8": Platform("node8", "node", 1, 8, "nvlink", 0.0, 0.0, 1e10,
                      description="one node of 8 GPUs, NVLink-like"),
    "fattree": Platform("fattree", "fattree", 128, 8, "nvlink-ib", 0.0, 0.0, 1e10,
                        description="128 nodes of 8 GPUs: NVLink inside, a 400 Gb/s NIC per GPU "
                                    "into a two-level fat tree"),
}


def known_links() -> list[str]:
    """The link presets simulate.py accepts: those of slurm/link_presets.json it can map."""
    try:
        names = list(json.loads(LINK_PRESETS_FILE.read_text())["presets"])
    except (OSError, ValueError, KeyError):
        names = []
    return [n for n in names if n in LINKS] or list(LINKS)


def make_platform(preset: str, *, nodes: int | None = None, gpus_per_node: int | None = None,
                  link: str | None = None, bw: float | None = None, lat: float | None = None,
                  speed: float | None = None) -> Platform:
    """A preset with the given overrides; PlatformError for anything that makes no platform."""
    if preset not in PRESETS:
        raise PlatformError(f"unknown platform preset {preset!r}; known: {', '.join(PRESETS)}")
    p = PRESETS[preset]
    if nodes is not None:
        if nodes < 1:
            raise PlatformError(f"--nodes {nodes}: must be at least 1")
        if p.topology == "node" and nodes != 1:
            raise PlatformError(f"{preset} is one node; use fattree for {nodes} nodes")
        p = replace(p, nodes=nodes)
    if gpus_per_node is not None:
        if gpus_per_node < 1 or p.topology == "flat":
            raise PlatformError(f"--gpus-per-node {gpus_per_node}: a positive count, for node8 "
                                "and fattree")
        p = replace(p, gpus_per_node=gpus_per_node)
    if link is not None and p.topology != "flat":
        if link not in LINKS:
            raise PlatformError(f"link preset {link!r} has no simulated link; known: "
                                f"{', '.join(known_links())}")
        p = replace(p, link=link)
    for flag, value in (("--bw", bw), ("--lat", lat), ("--speed", speed)):
        if value is not None and not (value > 0 and value < float("inf")):
            raise PlatformError(f"{flag} {value}: must be a positive number")
    return replace(p, bw=bw or p.bw, lat=lat or p.lat, speed=speed or p.speed)


def _link(lid: str, bw: float, lat: float, policy: str = "SPLITDUPLEX") -> str:
    return (f'<link id="{lid}" bandwidth="{bw:.6g}Bps" latency="{lat:.6g}s" '
            f'sharing_policy="{policy}"/>')


def _route(src: str, dst: str, links: list[tuple[str, str]], zone: bool = False,
           gw: tuple[str, str] | None = None) -> str:
    ctn = "".join(f'<link_ctn id="{lid}"{f" direction={chr(34)}{d}{chr(34)}" if d else ""}/>'
                  for lid, d in links)
    if zone:
        assert gw is not None
        return (f'<zoneRoute src="{src}" dst="{dst}" gw_src="{gw[0]}" gw_dst="{gw[1]}" '
                f'symmetrical="NO">{ctn}</zoneRoute>')
    return f'<route src="{src}" dst="{dst}" symmetrical="NO">{ctn}</route>'


def _node_zone(p: Platform, n: int, lk: Link, with_gateway: bool) -> list[str]:
    """Node n: its GPUs, a gateway router (the way out) and the routes between them."""
    gpus = [f"node{n}-gpu{g}" for g in range(p.gpus_per_node)]
    out = [f'<zone id="node{n}" routing="Full">']
    out += [f'<host id="{h}" speed="{p.speed:.6g}f"/>' for h in gpus]
    if with_gateway:
        out.append(f'<router id="node{n}-gw"/>')
    for h in gpus:
        out.append(_link(f"{h}-nic", lk.net_bw, lk.net_lat))
        if not lk.intra_via_nic:
            out.append(_link(f"{h}-nvl", lk.intra_bw, lk.intra_lat))
    intra = "nic" if lk.intra_via_nic else "nvl"
    for a in gpus:
        for b in gpus:
            if a != b:
                out.append(_route(a, b, [(f"{a}-{intra}", "UP"), (f"{b}-{intra}", "DOWN")]))
        if with_gateway:
            out.append(_route(a, f"node{n}-gw", [(f"{a}-nic", "UP")]))
            out.append(_route(f"node{n}-gw", a, [(f"{a}-nic", "DOWN")]))
    out.append("</zone>")
    return out


def platform_xml(p: Platform) -> str:
    """The SimGrid platform file (DTD 4.1) of p."""
    head = ["<?xml version='1.0'?>",
            '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">',
            '<platform version="4.1">', f"<!-- preset {p.name}; {p.detail()} -->"]
    if p.topology == "flat":
        body = [f'<cluster id="flat" prefix="host" suffix="" radical="0-{p.nodes - 1}" '
                f'speed="{p.speed:.6g}f" bw="{p.bw:.6g}Bps" lat="{p.lat:.6g}s" '
                f'loopback_bw="{p.loopback_bw:.6g}Bps" loopback_lat="0s"/>']
    elif p.nodes == 1:
        body = _node_zone(p, 0, p.links(), with_gateway=False)
    else:
        lk = p.links()
        leaves = (p.nodes + p.nodes_per_leaf - 1) // p.nodes_per_leaf
        # Non-blocking: a leaf's uplink carries all of its NICs at once.
        uplink_bw = p.nodes_per_leaf * p.gpus_per_node * lk.net_bw
        body = ['<zone id="world" routing="Full">']
        for n in range(p.nodes):
            body += _node_zone(p, n, lk, with_gateway=True)
        body += [_link(f"leaf{i}-up", uplink_bw, 0.5e-6) for i in range(leaves)]
        # The non-blocking switches add latency only. Inside a leaf each pair of nodes crosses
        # its own latency link: one switch link shared by every pair would tie all the leaf's
        # flows into one max-min system, whose every flow's end re-solves all of them (an
        # all-to-all-v of 64 ranks, four in flight: 61 s of wall time, against 2.4 s with a
        # link per pair, the same simulated time to 2e-5). The spine, of zero latency, is left
        # out of the routes for the same reason.
        leaf = lambda n: n // p.nodes_per_leaf  # noqa: E731
        pairs = [(a, b) for a in range(p.nodes) for b in range(p.nodes) if a != b]
        body += [_link(f"node{a}-node{b}", 1e15, 0.5e-6, "FATPIPE")
                 for a, b in pairs if leaf(a) == leaf(b)]
        for a, b in pairs:
            links = ([(f"node{a}-node{b}", "")] if leaf(a) == leaf(b) else
                     [(f"leaf{leaf(a)}-up", "UP"), (f"leaf{leaf(b)}-up", "DOWN")])
            body.append(_route(f"node{a}", f"node{b}", links, zone=True,
                               gw=(f"node{a}-gw", f"node{b}-gw")))
        body.append("</zone>")
    return "\n".join(head + body + ["</platform>", ""])


MAP_BY = ("slot", "node")


def rank_hosts(p: Platform, ranks: int, map_by: str = "slot") -> list[str]:
    """The host of each rank, in Open MPI's --map-by words: `slot` fills a node before the next
    (ranks 0..g-1 on node 0), `node` deals ranks round robin over the nodes (rank r on node
    r mod nodes), so that groups of consecutive ranks span nodes."""
    if ranks > p.hosts:
        raise PlatformError(f"{ranks} ranks but platform {p.name} has {p.hosts} hosts "
                            f"(one rank per host; --nodes adds hosts)")
    names = p.host_names()
    if map_by == "slot" or p.topology == "flat":
        return names[:ranks]
    if map_by != "node":
        raise PlatformError(f"--map-by {map_by!r}: one of {', '.join(MAP_BY)}")
    g = p.gpus_per_node
    return [names[(r % p.nodes) * g + r // p.nodes] for r in range(ranks)]


def write(p: Platform, ranks: int, directory: Path, stem: str, map_by: str = "slot") -> tuple[Path, Path]:
    """Writes <stem>.platform.xml and <stem>.hosts (rank r's host on line r, rank_hosts)."""
    hosts_of = rank_hosts(p, ranks, map_by)
    directory.mkdir(parents=True, exist_ok=True)
    xml, hosts = directory / f"{stem}.platform.xml", directory / f"{stem}.hosts"
    xml.write_text(platform_xml(p))
    hosts.write_text("\n".join(hosts_of) + "\n")
    return xml, hosts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("preset", nargs="?")
    parser.add_argument("--list", action="store_true", help="list presets and simulated links")
    parser.add_argument("--nodes", type=int)
    parser.add_argument("--gpus-per-node", type=int)
    parser.add_argument("--link")
    parser.add_argument("--bw", type=float)
    parser.add_argument("--lat", type=float)
    parser.add_argument("--speed", type=float)
    parser.add_argument("--out", type=Path, help="write the platform file here")
    args = parser.parse_args(argv)
    if args.list:
        for name, p in PRESETS.items():
            print(f"{name:<8} {p.hosts:>5} hosts  {p.description}")
        print("\nlinks (per GPU and direction; the route crosses two links per level):")
        for name in known_links():
            lk = LINKS[name]
            print(f"  {name:<10} intra {lk.intra_bw:8.3g} B/s {lk.intra_lat:7.2g} s  NIC "
                  f"{lk.net_bw:8.3g} B/s {lk.net_lat:7.2g} s  {lk.note}")
        return 0
    if not args.preset:
        parser.error("give a preset or --list")
    try:
        p = make_platform(args.preset, nodes=args.nodes, gpus_per_node=args.gpus_per_node,
                          link=args.link, bw=args.bw, lat=args.lat, speed=args.speed)
    except PlatformError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    xml = platform_xml(p)
    if args.out:
        args.out.write_text(xml)
        print(f"{args.out}: {p.detail()}")
    else:
        print(xml, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
