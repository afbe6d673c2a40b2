"""Every module registers, is listed, is chosen by a socket, carries a transfer, and unloads cleanly."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from cellab.server import experiment, flowclient, modules

PICK_CC = "import socket,sys; s=socket.socket(); s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, sys.argv[1].encode()); print(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b'\\0').decode())"


@pytest.fixture
def wired(require_root, netns_prefix):
    with experiment.wired_path(netns_prefix, rate_mbit=50, buffer_bytes=200_000) as topo:
        yield topo


@pytest.mark.parametrize("name", modules.CC_MODULES)
def test_module_registers_carries_a_transfer_and_unloads(name, wired, host_clean, unprivileged, tmp_path):
    modules.load([name])
    try:
        assert name in modules.available_congestion_controls()
        allowed = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control").read_text().split()
        assert name in allowed, "not flagged TCP_CONG_NON_RESTRICTED"
        info = modules.describe()[name]
        assert info.loaded and info.registered
        assert (Path("/sys/fs/bpf/cellab") / name / "link").exists()
        # an unprivileged socket may pick it
        out = subprocess.run(unprivileged([sys.executable, "-c", PICK_CC, name]), capture_output=True, text=True,
                             timeout=30, check=False)
        assert out.returncode == 0 and out.stdout.strip() == name, out.stderr
        with experiment.sender_in(wired, tmp_path / "logs") as sender:
            run = experiment.run_flow(wired, sender, name, amount=3_000_000, timeout_s=30)
        assert run.result.status == 0 and run.result.bytes_received == 3_000_000
        assert run.summary["cc"] == name
        assert modules.stats(name)["flows"] >= 1, "the module's init never ran"
    finally:
        modules.unload([name])
    assert name not in modules.available_congestion_controls()
    assert not (Path("/sys/fs/bpf/cellab") / name).exists()


def test_unload_leaves_established_connections_alone(wired, host_clean, tmp_path):
    modules.load(["c2tcp"])
    box: list[flowclient.FlowResult] = []
    with experiment.sender_in(wired, tmp_path / "logs") as sender:
        t = threading.Thread(target=lambda: box.append(flowclient.fetch(
            wired.server.address, sender.port, mode=flowclient.MODE_TIME_MS, amount=2500, cc_name="c2tcp",
            netns=wired.ues[0].netns, timeout_s=20)))
        t.start()
        time.sleep(1.0)
        modules.unload(["c2tcp"])
        assert "c2tcp" not in modules.available_congestion_controls()
        # a new connection can no longer pick it ...
        refused = flowclient.fetch(wired.server.address, sender.port, amount=1000, cc_name="c2tcp",
                                   netns=wired.ues[0].netns)
        assert refused.status == 2
        t.join(timeout=20)
        time.sleep(0.2)
        summaries = {s["flow_id"]: s for s in sender.summaries()}
        samples = sender.samples(box[0].flow_id)
    # ... while the running one kept its congestion control and finished normally
    assert box and box[0].status == 0 and 2.4 <= box[0].fct_s <= 6
    flow = summaries[box[0].flow_id]
    assert flow["cc"] == "c2tcp" and flow["end"] == "done"
    late = [s for s in samples if s["elapsed_ms"] > 1500]
    assert late and late[-1]["bytes_acked"] > late[0]["bytes_acked"], "no progress after the unload"
    assert box[0].bytes_received * 8 / box[0].fct_s > 20e6


def linked_programs() -> set[str]:
    """Names of the programs that BPF links currently hold."""
    links = json.loads(subprocess.run(["bpftool", "-j", "link", "show"], capture_output=True, text=True,
                                      check=True).stdout or "[]")
    progs = json.loads(subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True,
                                      check=True).stdout or "[]")
    names = {p["id"]: p.get("name", "") for p in progs}
    return {names.get(link.get("prog_id"), "") for link in links}


def test_tc_programs_attach_in_a_namespace_and_detach(wired, host_clean):
    modules.load(["or_ingress"], netns=wired.server.netns, dev="srv0")
    modules.load(["burst_drop"], netns=wired.ues[0].netns, dev="ue0")
    try:
        assert {"or_ingress", "burst_drop"} <= linked_programs()
        assert set(modules.loaded()) >= {"or_ingress", "burst_drop"}
    finally:
        modules.unload(["or_ingress", "burst_drop"])
    assert not {"or_ingress", "burst_drop"} & linked_programs()


def test_cubic_cap_holds_its_window_at_the_cap(wired, host_clean, tmp_path):
    """The frontier tool: a 6-packet cap on a 50 Mbit/s path Cubic would fill, and the window never passes it."""
    cap_pkts = 6
    with experiment.loaded(["cubic_cap"]):
        modules.set_param("cubic_cap", "cwnd_cap_pkts", cap_pkts)
        with experiment.sender_in(wired, tmp_path / "logs") as sender:
            run = experiment.run_flow(wired, sender, "cubic_cap", mode=flowclient.MODE_TIME_MS, amount=1500,
                                      timeout_s=20)
        capped = modules.stats("cubic_cap")["capped_acks"]
    assert run.result.status == 0 and run.samples
    assert max(s["cwnd_pkts"] for s in run.samples) <= cap_pkts
    assert capped > 0, "the cap never acted: Cubic alone would have grown past it"
