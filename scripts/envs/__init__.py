"""Where a benchmark runs besides mpirun here: SimGrid's simulated clusters, a shaped loopback,
a cluster emulated on this machine; sweeps over them and the bytes a run puts on the wire."""
