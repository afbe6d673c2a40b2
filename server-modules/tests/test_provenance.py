"""The server agent's `provenance` names the BPF programs the kernel holds, read back through bpf(2): each
program's tag equals what bpftool (an independent reader) says of the same loaded object."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from cellab.bus.testing import lab_bus
from cellab.server.agent import ServerAgent
from cellab.server.loaded_objects import loaded_modules


def _bpftool_tags(prefix: str) -> dict[str, str]:
    listed = json.loads(subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True,
                                       check=True).stdout)
    # the kernel keeps 15 characters of a program's name; bpftool prints the full name from the BTF
    return {p["name"][:15]: p["tag"] for p in listed if p.get("type") == "struct_ops" and p["name"].startswith(prefix)}


def test_server_agent_reports_its_loaded_modules_as_the_kernel_holds_them(tmp_path, host_clean):
    if shutil.which("bpftool") is None:
        pytest.skip("bpftool is not installed: nothing independent to check the read-back against")
    with lab_bus(tmp_path, {"srv": ServerAgent}) as (controller, _):
        assert controller.request("srv", "provenance", timeout_s=30)["software"]["modules"] == {}  # holds none yet
        controller.request("srv", "load_modules", {"names": ["c2tcp"]}, timeout_s=60)
        try:
            report = controller.request("srv", "provenance", timeout_s=30)
            bpftool = _bpftool_tags("c2tcp_")
        finally:
            controller.request("srv", "unload_modules", {}, timeout_s=60)
    c2tcp = report["software"]["modules"]["c2tcp"]
    assert c2tcp["programs"] and c2tcp["programs"] == bpftool, (c2tcp, bpftool)
    assert len(c2tcp["sha256"]) == 64
    assert report["role"] == "server" and report["cellab"] and report["kernel"]
    assert len(report["software"]["programs"]["cellab-modules"]["sha256"]) == 64
    assert report["software"]["sysctls"]["net.ipv4.tcp_congestion_control"]
    assert "c2tcp" not in loaded_modules(["c2tcp"])  # unloaded: nothing pinned, nothing reported
