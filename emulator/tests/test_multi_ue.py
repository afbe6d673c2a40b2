"""Several UEs in one virtual cell: one namespace each, the proportional-fair scheduler sharing the PRBs,
per-UE attenuation through the cell's control, per-UE ground truth in the TTI log."""

from __future__ import annotations

import json
import subprocess
import time

import numpy as np
import pytest
from cellab.emulator.params import MAX_UES
from cellab.emulator.ttilog import read_ttilog
from cellab.emulator.vlab import VirtualLab
from netlab import finish, start_iperf3_download
from pyroute2 import netns

from cellab.errors import CellabError, InputError, InputErrors

N_PRB = 25


def jain(x) -> float:
    x = np.asarray(x, dtype=float)
    return float(x.sum() ** 2 / (len(x) * (x ** 2).sum()))


def test_ue_count_is_checked_before_anything_is_touched(netns_prefix):
    assert VirtualLab(netns_prefix, ues=4).ue_count == 4
    assert VirtualLab(netns_prefix, {"n_ues": 3}, ues=3).ue_count == 3
    assert VirtualLab.max_ues == MAX_UES == 16
    for bad in (0, 17, 2.5, True):
        with pytest.raises(InputError, match="ues"):
            VirtualLab(netns_prefix, ues=bad)
    with pytest.raises(InputError, match="disagrees with n_ues"):
        VirtualLab(netns_prefix, {"n_ues": 2}, ues=3)
    with pytest.raises(InputErrors, match="n_ues"):
        VirtualLab(netns_prefix, n_ues=17)
    assert not [n for n in netns.listnetns() if n.startswith(netns_prefix)]


def test_four_ues_one_namespace_each_with_their_own_attenuation(require_root, netns_prefix):
    lab = VirtualLab(netns_prefix, ues=4, n_prb=N_PRB, cqi_period_ms=5)
    try:
        topo = lab.up()
        assert [h.name for h in topo.ues] == ["ue0", "ue1", "ue2", "ue3"]
        assert [h.netns for h in topo.ues] == [f"{netns_prefix}-ue{i}" for i in range(4)]
        assert [h.address for h in topo.ues] == [f"10.200.1.{i + 1}" for i in range(4)]
        assert topo.extra["ue_count"] == 4
        assert {h.netns for h in topo.ues} <= set(netns.listnetns())
        assert lab.set_ue_attenuation(2, 50.0)["attenuation_db"] == 50.0
        assert lab.ue_attenuation(2)["rsrp_dbm"] == pytest.approx(-110.0)
        assert lab.ue_attenuation(1)["attenuation_db"] == 0.0
        time.sleep(0.1)  # a few CQI periods and the report delay
        cqi = [u["cqi"] for u in lab.ue_stats()]
        assert cqi[0] == cqi[1] == cqi[3] == 15 and cqi[2] < 10, cqi
        with pytest.raises(InputError, match="0..3"):
            lab.set_ue_attenuation(4, 10.0)
        with pytest.raises(CellabError, match="attenuation_db"):
            lab.set_ue_attenuation(0, 300.0)
    finally:
        lab.down()
    assert not [n for n in netns.listnetns() if n.startswith(netns_prefix)]


# make test keeps four UEs sharing the cell fairly through a campaign (test_multi_ue_campaign.py) and the
# scheduler's equal shares (test_scheduler.py)
@pytest.mark.extended
def test_four_simultaneous_downloads_share_the_cell_fairly(vlab, tmp_path):
    lab = vlab(ues=4, n_prb=N_PRB, rlc_queue=300_000)
    topo = lab.topology()
    seconds = 6
    procs = [start_iperf3_download(lab.srv_ns, topo.server.address, ue.netns, seconds, port=5330 + i)
             for i, ue in enumerate(topo.ues)]
    clients = [client for _server, client in procs]
    outputs = [c.communicate(timeout=seconds + 30)[0] for c in clients]
    finish(*[p for pair in procs for p in pair])
    mbps = [json.loads(o)["end"]["sum_received"]["bits_per_second"] / 1e6 for o in outputs]
    log = read_ttilog(lab.collect(tmp_path)["cell_tti_log"])
    assert log.n_ues == 4 and log.n_prb == N_PRB
    busy = log.backlogged()
    assert busy.sum() > 2000, busy.sum()  # over 2 s with all four queues holding data
    # every PRB of the cell is used, and given to the UEs, in every TTI all four are backlogged
    prb = log.per_tti("dl_prb").astype(int)
    assert (prb.sum(axis=1) <= N_PRB).all()
    assert (prb[busy].sum(axis=1) == N_PRB).all()
    totals = log.ue_totals(busy)
    assert sum(t["dl_prb"] for t in totals) == N_PRB * int(busy.sum())
    # equal channels: PF gives each a quarter of the PRBs and of the bytes while all are backlogged
    shares = np.array([t["dl_prb"] for t in totals]) / (N_PRB * busy.sum())
    assert np.all(np.abs(shares - 0.25) < 0.03), shares
    assert jain([t["dl_delivered_bytes"] for t in totals]) > 0.99
    # the four TCP downloads (Cubic, started 0.3 s apart) end up with fair-ish throughputs
    assert jain(mbps) > 0.9, mbps
    # the cell's capacity at 25 PRB (README: 17.2 Mbit/s for one Cubic flow, 18.3 the TBS table); the flows
    # start 0.3 s apart, so their 6 s windows span 6.9 s
    assert 0.7 * 17.2 < sum(mbps) < 1.2 * 18.3, mbps
    with lab.control() as ctl:
        stats = ctl.stats()["ues"]
    assert [u["ue"] for u in stats] == [0, 1, 2, 3] and all(u["delivered_bytes"] > 0 for u in stats)


def test_sixteen_ues_each_reach_the_server_through_the_cell(vlab, tmp_path):
    lab = vlab(ues=16, n_prb=25, sr_period_ms=10)
    topo = lab.topology()
    assert len(topo.ues) == 16 and topo.ues[-1].name == "ue15" and topo.ues[-1].address == "10.200.1.16"
    pings = [subprocess.Popen(["ip", "netns", "exec", ue.netns, "ping", "-n", "-c", "3", "-i", "0.2", "-W", "2",
                               topo.server.address], stdout=subprocess.PIPE, text=True) for ue in topo.ues]
    outputs = [p.communicate(timeout=30)[0] for p in pings]
    assert all(" 0% packet loss" in o for o in outputs), outputs
    stats = lab.ue_stats()
    assert [u["ue"] for u in stats] == list(range(16))
    assert all(u["sr_sent"] >= 1 and u["delivered_bytes"] >= 3 * 84 for u in stats)
    # srsENB-style SR resources: 5 slots at P = 10 (I_SR 5, 7, 9, 11, 13), UE k on slot k mod 5
    assert [u["i_sr"] for u in stats] == [5 + 2 * (k % 5) for k in range(16)]
    log = read_ttilog(lab.collect(tmp_path)["cell_tti_log"])
    assert log.n_ues == 16
    totals = log.ue_totals()
    assert all(t["dl_delivered_bytes"] >= 3 * 84 and t["ul_delivered_bytes"] >= 3 * 84 for t in totals)
