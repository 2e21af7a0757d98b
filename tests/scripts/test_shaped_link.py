"""shaped_link.py: rate parsing, presets and labels, what the results record (link_env), and bad
input (a bad rate or unit, not root, no ip or tc, no command): one `error:` line, exit 2, nothing
created. No root needed: "not root" and "no tc" are made up by monkeypatching, or by running the
script as nobody / with a PATH that has no tc when these tests do run as root."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from scripts import module_command
from scripts.envs import shaped_link
from synthetic_results import REPO, run_script


def netns_list() -> list[str]:
    ip = shutil.which("ip")
    if ip is None:
        return []
    return subprocess.run([ip, "netns", "list"], capture_output=True, text=True).stdout.split()


@pytest.mark.parametrize("text, bits", [
    ("1gbit", 10**9), ("500mbit", 5 * 10**8), ("2.5gbit", 25 * 10**8), ("125mbps", 10**9),
    ("10GBit", 10**10), ("1000kbit", 10**6), ("1mibit", 2**20), ("3tbit", 3 * 10**12),
])
def test_rates_in_tc_units(text, bits):
    assert shaped_link.parse_rate(text) == bits


@pytest.mark.parametrize("text", ["0gbit", "0", "0.0mbit", "", "gbit", "1g", "1", "-1gbit",
                                  "1e9bit", "1.5.2gbit", "5furlong", "1 gbit", "100kbit",
                                  "1mbps "])
def test_bad_rates_are_refused(text):
    if text == "1mbps ":  # surrounding blanks are tolerated, the unit is what matters
        assert shaped_link.parse_rate(text) == 8 * 10**6
        return
    with pytest.raises(shaped_link.LinkError, match="rate"):
        shaped_link.parse_rate(text)


def test_presets_links_and_labels():
    one = shaped_link.parse_link("shaped-1g")
    assert one.rate_bit == 10**9 and one.label == "shaped-1g"
    assert shaped_link.parse_link("shaped-10g").rate_bit == 10**10
    # shaped:RATE and shaped-RATE are the same link; the label is canonical and parses back
    assert shaped_link.parse_link("shaped:1000mbit") == one
    for name, label in (("shaped:500mbit", "shaped-500mbit"), ("shaped:2.5gbit", "shaped-2500mbit"),
                        ("shaped:10gbit", "shaped-10g")):
        shape = shaped_link.parse_link(name)
        assert shape.label == label and shaped_link.parse_link(label) == shape
    for bad in ("shaped", "shaped:", "shaped-", "shaped-2g", "shaped:2g", "nvlink", "shaped:0gbit"):
        with pytest.raises(shaped_link.LinkError):
            shaped_link.parse_link(bad)
    assert shaped_link.is_shaped("shaped:2gbit") and shaped_link.is_shaped("shaped-1g")
    assert not shaped_link.is_shaped("nvlink") and not shaped_link.is_shaped("shapedx")


def test_overrides_and_their_limits():
    s = shaped_link.parse_link("shaped-1g", burst="32kb", latency="50ms", mtu=16000)
    assert (s.burst_b, s.latency_us, s.mtu) == (32768, 50_000, 16000)
    assert s.tbf_args() == ["rate", "1000000000bit", "burst", "32768", "latency", "50000us"]
    assert s.limit_b == 125_000_000 // 20 + 32768  # rate x latency + the bucket
    with pytest.raises(shaped_link.LinkError, match="below two packets"):
        shaped_link.parse_link("shaped-1g", burst="4kb")
    for kw, needle in (({"burst": "0"}, "--burst"), ({"burst": "20 kb"}, "--burst"),
                       ({"latency": "100"}, "--latency"), ({"latency": "0ms"}, "--latency"),
                       ({"mtu": 100}, "--mtu"), ({"mtu": 70000}, "--mtu")):
        with pytest.raises(shaped_link.LinkError, match=needle):
            shaped_link.parse_link("shaped-1g", **kw)


def test_the_rate_is_shared_by_the_ranks():
    s = shaped_link.parse_link("shaped-1g")
    assert s.rate_Bps == 125e6
    assert s.per_rank_W(2) == 62.5e6 and s.per_rank_W(4) == 31.25e6


def test_link_env_records_rate_burst_queue_mtu_kernel():
    s = shaped_link.parse_link("shaped:500mbit")
    env = dict(kv.split("=", 1) for kv in shaped_link.link_env(s, "suite-shaped-1").split())
    assert env["shaper"] == "tbf" and env["rate"] == "500mbit"
    assert env["burst"] == f"{s.burst_b}B" and env["latency"] == "100ms"
    assert env["limit"] == f"{s.limit_b}B" and env["mtu"] == str(s.mtu)
    assert env["kernel"] == os.uname().release and env["netns"] == "suite-shaped-1"
    assert env["OMPI_MCA_btl"] == "tcp,self" and env["OMPI_MCA_btl_tcp_if_include"] == "lo"
    assert env["OMPI_MCA_oob_tcp_if_include"] == "lo" and env["OMPI_MCA_pml"] == "ob1"
    child = shaped_link.child_environment(s, "suite-shaped-1", "500Mbit,18000b,100ms")
    assert child["SUITE_LINK_LABEL"] == "shaped-500mbit"
    assert "tc=500Mbit,18000b,100ms" in child["SUITE_LINK_ENV"]


def test_the_default_bucket_is_a_few_packets():
    """A bucket larger than a round's message lets small blocks through at line rate: the
    default stays a few packets wherever the rate allows it (docs/SHAPED_LINKS.md)."""
    for bits in (10**8, 5 * 10**8, 10**9):
        s = shaped_link.default_shape(bits)
        assert s.mtu <= s.burst_b <= 3 * s.mtu
    assert shaped_link.default_shape(10**10).burst_b >= shaped_link.default_shape(10**9).burst_b


def _no_subprocess(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError(f"ran {a[0] if a else k} although the input was refused")
    monkeypatch.setattr(subprocess, "run", refuse)
    monkeypatch.setattr(subprocess, "Popen", refuse)


def test_not_root_is_refused_before_anything_runs(monkeypatch, capsys):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    _no_subprocess(monkeypatch)
    assert shaped_link.main(["shaped-1g", "--", "true"]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "needs root" in err
    assert shaped_link.main(["shaped-1g", "--check"]) == 2


def test_missing_tc_or_ip_is_refused(monkeypatch, capsys):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda n, *a, **k: None if n == "tc" else real_which(n))
    _no_subprocess(monkeypatch)
    assert shaped_link.main(["shaped-1g", "--", "true"]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "needs tc" in err
    monkeypatch.setattr(shutil, "which",
                        lambda n, *a, **k: None if n in ("ip", "tc") else "/bin/true")
    assert shaped_link.main(["shaped-1g", "--", "true"]) == 2
    assert "needs ip and tc" in capsys.readouterr().err


def test_a_tc_failure_removes_the_namespace(monkeypatch, capsys):
    """The namespace is made, then tc fails (a kernel without tbf): it is removed again, one
    error, exit 2."""
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(shutil, "which", lambda n, *a, **k: f"/sbin/{n}" if n in ("ip", "tc")
                        else "/bin/true")
    namespaces: set[str] = set()
    calls = []

    def fake_run(cmd, **kw):
        calls.append(cmd)
        out, rc = "", 0
        if cmd[1:3] == ["netns", "add"]:
            namespaces.add(cmd[3])
        elif cmd[1:3] == ["netns", "del"]:
            namespaces.discard(cmd[3])
        elif cmd[1:3] == ["netns", "list"]:
            out = "\n".join(namespaces)
        elif "qdisc" in cmd and "add" in cmd:
            rc = 2
            out = "Error: Specified qdisc kind is unknown."
        return subprocess.CompletedProcess(cmd, rc, out if rc == 0 else "", out if rc else "")

    monkeypatch.setattr(subprocess, "run", fake_run)
    assert shaped_link.main(["shaped:2gbit", "--", "true"]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "sch_tbf" in err and "qdisc kind is unknown" in err
    assert not namespaces
    assert any(c[1:3] == ["netns", "del"] for c in calls)
    # every command but add/del/list/pids runs inside the namespace: the host's lo is never shaped
    for c in calls:
        if c[1] == "netns" and c[2] in ("add", "del", "list", "pids"):
            continue
        assert c[1:4] == ["netns", "exec", c[3]] and c[3].startswith("suite-shaped-") or \
            c[1:3] == ["-n", c[2]] and c[2].startswith("suite-shaped-"), c


@pytest.mark.parametrize("args, needle", [
    (["shaped:0gbit", "--", "true"], "must be positive"),
    (["shaped:5furlong", "--", "true"], "tc's units"),
    (["shaped-2g", "--", "true"], "tc's units"),
    (["warp", "--", "true"], "unknown shaped link"),
    (["shaped-1g"], "no command"),
    ([], "give a shaped link"),
    (["shaped-1g", "--burst", "1kb", "--", "true"], "below two packets"),
    (["shaped-1g", "--", "no-such-command-here"], "command not found"),
])
def test_bad_input_one_error_exit_2_nothing_left(args, needle, tmp_path):
    # Other tests that shape may run meanwhile: only this invocation's namespace (named by its
    # pid) must not be left. Refusals as nobody and without tc are the integration test's
    # (integration_shaped_bad_input).
    popen = subprocess.Popen([*module_command("envs.shaped_link"), *args],
                             cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = popen.communicate(timeout=60)
    assert popen.returncode == 2, err
    assert err.count("error:") == 1 and needle in err, err
    assert not list(tmp_path.iterdir())
    mine = f"suite-shaped-{popen.pid}"
    assert not [n for n in netns_list() if n == mine or n.startswith(mine + "-")]


def test_dry_run_needs_no_root_and_creates_nothing(monkeypatch, capsys):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    _no_subprocess(monkeypatch)
    assert shaped_link.main(["shaped:500mbit", "--dry-run", "--", "mpirun", "-np", "2", "x"]) == 0
    out = capsys.readouterr().out
    assert "tc qdisc add dev lo root tbf rate 500000000bit" in out
    assert "ip netns exec suite-shaped-" in out and "mpirun -np 2 x" in out
    assert "export OMPI_MCA_btl=tcp,self" in out and "SUITE_LINK_ENV=" in out
    assert "ip netns del suite-shaped-" in out


def test_label_and_list():
    proc = run_script("shaped_link.py", "shaped:1000mbit", "--label")
    assert proc.returncode == 0 and proc.stdout.strip() == "shaped-1g"
    proc = run_script("shaped_link.py", "--list")
    assert proc.returncode == 0 and "shaped-1g" in proc.stdout and "shaped-10g" in proc.stdout


def test_help_explains_every_flag():
    proc = run_script("shaped_link.py", "--help")
    assert proc.returncode == 0
    for flag in ("--burst", "--mtu", "--latency", "--dry-run", "--check", "--list", "--label",
                 "--cleanup-stale", "--quiet", "shaped:RATE", "W is RATE / N"):
        assert flag in proc.stdout, flag


def test_run_suite_refuses_a_bad_link_before_writing(tmp_path):
    results = REPO / "results"
    before = set(results.iterdir()) if results.exists() else set()
    for link, np_, needle in (("shaped:0mbit", "4", "must be positive"), ("nvlink", "4", "run_suite.sh takes"),
                              ("emulated-2by2-1g", "4", "emulated-<nodes>x"),
                              ("emulated-2x2-1g", "2", "has 4 ranks; NP=2")):
        proc = subprocess.run(["bash", str(REPO / "scripts" / "run_suite.sh")], cwd=tmp_path,
                              env={**os.environ, "LINK": link, "NP": np_}, capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 2 and proc.stderr.count("error:") == 1, proc.stderr
        assert needle in proc.stderr
    assert (set(results.iterdir()) if results.exists() else set()) == before
