"""link_presets.py: every documented preset resolves for both transports; unknown is an error."""

from __future__ import annotations

import subprocess

import pytest

from scripts.envs import link_presets
from synthetic_results import run_script

DOCUMENTED = ("nvlink", "pcie-host", "shm-off", "net", "ib", "tcp")


def test_documented_presets_exist_for_both_transports():
    presets = link_presets.load_presets()
    for name in DOCUMENTED:
        assert name in presets and presets[name]["description"]
        for transport in link_presets.TRANSPORTS:
            assert isinstance(link_presets.resolve(name, transport), dict)


def test_preset_variables_say_what_they_promise():
    assert link_presets.resolve("nvlink", "nccl") == {}
    assert link_presets.resolve("pcie-host", "nccl") == {"NCCL_P2P_DISABLE": "1"}
    net = link_presets.resolve("net", "nccl")
    assert net["NCCL_P2P_DISABLE"] == "1" and net["NCCL_SHM_DISABLE"] == "1"
    assert link_presets.resolve("shm-off", "nccl") == net
    assert link_presets.resolve("ib", "nccl")["NCCL_NET"] == "IB"
    assert link_presets.resolve("tcp", "nccl")["NCCL_NET"] == "Socket"
    assert link_presets.resolve("tcp", "mpi")["OMPI_MCA_btl"] == "self,tcp"


def test_unknown_preset_or_transport_is_an_error():
    with pytest.raises(link_presets.PresetError, match="unknown link preset 'warp'"):
        link_presets.resolve("warp", "nccl")
    with pytest.raises(link_presets.PresetError, match="unknown transport"):
        link_presets.resolve("nvlink", "gloo")
    proc = run_script("link_presets.py", "warp")
    assert proc.returncode == 2 and "unknown link preset 'warp'" in proc.stderr


def test_shell_output_exports_the_variables_and_the_recorded_string():
    proc = run_script("link_presets.py", "tcp", "--transport", "mpi", "--shell")
    assert proc.returncode == 0
    shown = subprocess.run(["bash", "-c", proc.stdout + 'echo "$OMPI_MCA_pml|$SUITE_LINK_ENV"'],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert shown == ("ob1|OMPI_MCA_btl=self,tcp OMPI_MCA_pml=ob1 UCX_TLS=self,tcp,cuda_copy")
