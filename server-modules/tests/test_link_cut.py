"""The server agent's `set_link` (fault `sgi_cut` on a lab inventory, issue 41), on the wired lab: cut, the UE's pings
to the server's address get no answer while the agent keeps answering the bus; restored, they do again. The cut's
rule is the agent's own (another rule stays), and the agent's safe state restores a cut left behind. An address the
server does not hold is refused, naming it. Root: namespaces."""

from __future__ import annotations

import subprocess

import pytest

from cellab.bus import OperationError
from cellab.bus.testing import lab_bus
from cellab.contracts.server import ServerClient
from cellab.labs.netns import in_netns
from cellab.labs.wired import WiredLab
from cellab.server.agent import ServerAgent
from cellab.server.link_cut import RULE_PRIORITY

pytestmark = pytest.mark.shares_cpu  # a wired lab and pings: nothing timed


def in_ns(netns: str, *argv: str) -> list[str]:
    return in_netns(netns, list(argv))


def _pings(netns: str, address: str) -> bool:
    return subprocess.run(in_ns(netns, "ping", "-c", "1", "-W", "1", address), capture_output=True,
                          timeout=10, check=False).returncode == 0


def _rules(netns: str) -> str:
    return subprocess.run(in_ns(netns, "ip", "-4", "rule", "show"), capture_output=True, text=True, timeout=10,
                          check=True).stdout


def test_the_server_cuts_and_restores_its_link_to_the_ues_and_its_safe_state_restores_it(
        require_root, netns_prefix, tmp_path):
    lab = WiredLab(netns_prefix, rate_mbit=10, buffer_bytes=60_000)
    try:
        topo = lab.up()
        server_ns, ue_ns, address = topo.server.netns, topo.ues[0].netns, topo.server.address
        assert _pings(ue_ns, address)
        # another owner's rule: the cut's removal leaves it
        subprocess.run(in_ns(server_ns, "ip", "-4", "rule", "add", "from", "192.0.2.7", "priority", "4200",
                             "lookup", "main"), check=True, timeout=10)
        with lab_bus(tmp_path, {"server1": ServerAgent}, agent_kwargs={"server1": {"netns": server_ns}}) as (
                controller, agents):
            server = ServerClient(controller, "server1", 10)
            cut = server.set_link(address, up=False)
            assert cut.device == "srv0" and not cut.up
            assert not _pings(ue_ns, address)
            assert controller.request("server1", "ping", timeout_s=5)["agent"] == "server1"  # the bus: untouched
            assert f"{RULE_PRIORITY}:\tfrom {address} blackhole" in _rules(server_ns)
            assert server.set_link(address, up=True).up and _pings(ue_ns, address)
            assert f"{RULE_PRIORITY}:" not in _rules(server_ns) and "4200:\tfrom 192.0.2.7" in _rules(server_ns)
            with pytest.raises(OperationError, match="no interface of this server holds 192.0.2.1"):
                server.set_link("192.0.2.1", up=False)
            server.set_link(address, up=False)  # left cut: the agent's stop (its safe state) restores it
            agents["server1"].stop()
        assert _pings(ue_ns, address) and f"{RULE_PRIORITY}:" not in _rules(server_ns)
    finally:
        lab.down()
