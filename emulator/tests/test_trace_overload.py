"""Trace mode (Mahimahi's delivery rule), overload and the lab's lifecycle."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import zmq
from cellab.labs.cellctl import CellControlError
from cellab.emulator.ttilog import read_ttilog
from netlab import finish, start_iperf3_download
from pyroute2 import netns

from cellab.errors import InputErrors
from conftest import SHARED

TRACE = SHARED / "traces" / "TMobile-LTE-short.down"


def trace_opportunities_per_ms(path) -> np.ndarray:
    ts = np.loadtxt(path, dtype=np.int64)
    period = int(ts[-1])
    return np.bincount(ts % period, minlength=period)


def test_trace_mode_delivers_the_trace_opportunities(vlab, tmp_path):
    if not TRACE.exists():
        pytest.fail(f"{TRACE} missing (the shared data set)")
    lab = vlab(trace=TRACE, rlc_queue=2_000_000)
    topo = lab.topology()
    # 60 Mbit/s of UDP keeps the queue saturated above the trace's peaks
    server, client = start_iperf3_download(lab.srv_ns, topo.server.address, topo.ues[0].netns, 4,
                                           udp_bps=60_000_000, length=1400)
    finish(client, server)
    rec = read_ttilog(lab.collect(tmp_path)["cell_tti_log"]).ue(0)
    opp = trace_opportunities_per_ms(TRACE)
    tti = rec["tti"].astype(np.int64)
    expected = opp[tti % len(opp)] * 1500  # bytes the trace allows in each TTI (computed from the file here)
    assert np.array_equal(rec["dl_tbs_bits"].astype(np.int64), expected * 8)
    saturated = rec["dl_queue_bytes"] > 100_000
    checked = 0
    for start in range(0, len(rec) - 100, 100):
        window = slice(start, start + 100)
        if not saturated[window].all() or expected[window].sum() < 30_000:
            continue
        delivered = rec["dl_delivered_bytes"][window].astype(np.int64).sum()
        assert abs(delivered - expected[window].sum()) <= 0.01 * expected[window].sum() + 1500
        checked += 1
    assert checked >= 15


def test_uplink_trace_mode_replaces_sr_and_grants(vlab, tmp_path):
    trace_up = SHARED / "traces" / "TMobile-LTE-short.up"
    lab = vlab(trace_up=trace_up, ul_queue=2_000_000, sr_period_ms=80)
    topo = lab.topology()
    server, client = start_iperf3_download(lab.srv_ns, topo.server.address, topo.ues[0].netns, 3,
                                           udp_bps=50_000_000, length=1400, upload=True)
    finish(client, server)
    rec = read_ttilog(lab.collect(tmp_path)["cell_tti_log"]).ue(0)
    opp = trace_opportunities_per_ms(trace_up)
    expected = opp[rec["tti"].astype(np.int64) % len(opp)] * 1500
    assert np.array_equal(rec["ul_grant_bytes"].astype(np.int64), expected)
    assert not (rec["flags"] & 0b110).any()  # no SR, no grants: the trace alone paces the uplink
    saturated = rec["ul_buffer_bytes"] > 100_000
    checked = 0
    for start in range(0, len(rec) - 100, 100):
        window = slice(start, start + 100)
        if not saturated[window].all() or expected[window].sum() < 30_000:
            continue
        delivered = rec["ul_delivered_bytes"][window].astype(np.int64).sum()
        assert abs(delivered - expected[window].sum()) <= 0.01 * expected[window].sum() + 1500
        checked += 1
    assert checked >= 10


def test_overload_drops_at_queue_limit_with_bounded_memory(vlab, tmp_path):
    queue_bytes = 300_000
    lab = vlab(n_prb=6, rlc_queue=queue_bytes)  # ~4 Mbit/s cell
    topo = lab.topology()
    pid = int(lab.pid_file.read_text())
    server, client = start_iperf3_download(lab.srv_ns, topo.server.address, topo.ues[0].netns, 3,
                                           udp_bps=40_000_000, length=1400)  # 10x the link rate
    rss_kb = []
    for _ in range(10):
        time.sleep(0.3)
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
        rss_kb.append(int(next(line for line in status if line.startswith("VmRSS")).split()[1]))
    finish(client, server)
    with lab.control() as ctl:
        st = ctl.stats()
    ue = st["ues"][0]
    assert ue["dl_drop_pkts"] > 1000
    rec = read_ttilog(lab.collect(tmp_path)["cell_tti_log"]).ue(0)
    assert rec["dl_queue_bytes"].max() <= queue_bytes
    assert rec["dl_queue_bytes"].max() >= queue_bytes - 1500
    assert max(rss_kb) < 64 * 1024  # bounded: the queue limit, not the offered load
    assert os.path.exists(f"/proc/{pid}")  # still running


def test_control_socket_and_telemetry(vlab):
    lab = vlab(n_prb=25, n_ues=2, attenuation_db=[10.0, 70.0])
    with lab.control() as ctl:
        a0, a1 = ctl.get_attenuation(0), ctl.get_attenuation(1)
        assert a0["attenuation_db"] == 10.0 and a1["attenuation_db"] == 70.0
        assert a0["rsrp_dbm"] - a1["rsrp_dbm"] == pytest.approx(60.0)
        with pytest.raises(CellControlError, match="ue"):
            ctl.set_attenuation(5, 1.0)
        with pytest.raises(CellControlError, match="allowed"):
            ctl.request("reboot")
        ctl.set_attenuation(1, 20.0)
        assert ctl.pause()["paused"] is True
        assert ctl.resume()["paused"] is False
        time.sleep(0.1)
        st = ctl.stats()
    assert {"rsrp_dbm", "sinr_db", "cqi", "mcs", "queue_bytes", "delivered_bytes"} <= set(st["ues"][1])
    assert st["ues"][1]["attenuation_db"] == 20.0
    sub = zmq.Context.instance().socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"cell")
    sub.setsockopt(zmq.RCVTIMEO, 2000)
    sub.connect(lab.pub_endpoint)
    try:
        import json
        seen = set()
        for _ in range(10):
            topic, body = sub.recv_multipart()
            msg = json.loads(body)
            assert topic == b"cell" and msg["type"] == "cell.summary"
            seen.add(msg["ue"])
        assert seen == {0, 1}
    finally:
        sub.close(0)


def test_down_is_idempotent_and_cleans_up_after_a_crash(vlab):
    lab = vlab(n_prb=6, n_ues=2)
    pid = int(lab.pid_file.read_text())
    os.kill(pid, signal.SIGKILL)  # the cell crashes
    time.sleep(0.2)
    assert lab.status()["cell_pid"] is None
    lab.down()
    lab.down()
    assert not [n for n in netns.listnetns() if n.startswith(lab.prefix + "-")]
    assert not lab.state_dir.exists()
    # a fresh up after the crash works, and configure keeps the namespaces
    lab.up()
    names = sorted(n for n in netns.listnetns() if n.startswith(lab.prefix + "-"))
    pid = int(lab.pid_file.read_text())
    with pytest.raises(InputErrors, match="sr_period_ms"):
        lab.configure({"sr_period_ms": 3})
    assert int(lab.pid_file.read_text()) == pid and os.path.exists(f"/proc/{pid}")  # refused before any change
    lab.configure({"n_prb": 50, "sr_period_ms": 40, "cc": "cubic"})  # other concerns' parameters pass by
    assert sorted(n for n in netns.listnetns() if n.startswith(lab.prefix + "-")) == names
    with lab.control() as ctl:
        assert ctl.stats()["ues"][0]["sr_period_ms"] == 40
    out = subprocess.run(["ip", "netns", "exec", lab.ue_ns(1), "ping", "-c", "2", "-i", "0.2", "10.200.0.1"],
                         capture_output=True, text=True, timeout=10, check=False)
    assert out.returncode == 0
