"""The downlink queue policies under a Cubic download with pings (25 PRB, SR 20 ms, core delay 3 ms, the
issue-20 setup): srsenb's queue on the srsran-zmq lab's qci-7 bearer (256 packets not yet sent, tail drop, no
PDCP discard timer) bounds the RTT under load near 256 x 1500 B at the cell's rate plus the uplink's SR wait;
a 4 MiB byte-limited queue (the deep buffers of commercial networks) lets Cubic build far more delay. The
qci-9 bearer's 150 ms discard timer is checked deterministically in test_replay.py."""

from __future__ import annotations

import numpy as np
from netlab import ping_during_download

DEEP_BUFFER_BYTES = 4 << 20


def _loaded_rtts(vlab, on_time, rlc_queue) -> tuple[np.ndarray, dict, dict]:
    # SCHED_FIFO cell: the download and the pinger share the 2 cores with it, and the test is of the model.
    # Pings from 3.5 s on: Cubic (after HyStart's early exit) has by then filled srsenb's queue to its SDU
    # limit, and the deep queue well past it (it grows ~45 ms/s).
    lab = vlab(n_prb=25, sr_period_ms=20, core_delay_ms=3.0, rlc_queue=rlc_queue, realtime=True)
    topo = lab.topology()
    rtts, iperf = on_time(lab, lambda: ping_during_download(
        lab.srv_ns, topo.server.address, topo.ues[0].netns, seconds=7, ping_from_s=3.5, count=15, interval_s=0.2))
    with lab.control() as ctl:
        ue = ctl.stats()["ues"][0]
    lab.down()
    return rtts, iperf, ue


def test_srsenb_queue_bounds_rtt_under_load_and_deep_buffer_does_not(vlab, on_time):
    srsenb_rtts, srsenb_iperf, srsenb_ue = _loaded_rtts(vlab, on_time, "srsenb")
    deep_rtts, deep_iperf, deep_ue = _loaded_rtts(vlab, on_time, DEEP_BUFFER_BYTES)
    assert len(srsenb_rtts) >= 12 and len(deep_rtts) >= 12
    srsenb_bps = srsenb_iperf["end"]["sum_received"]["bits_per_second"]
    summary = (f"srsenb {srsenb_rtts.min():.0f}/{srsenb_rtts.mean():.0f}/{srsenb_rtts.max():.0f} ms "
               f"{srsenb_bps / 1e6:.1f} Mbit/s, deep "
               f"{deep_rtts.min():.0f}/{deep_rtts.mean():.0f}/{deep_rtts.max():.0f} ms "
               f"{deep_iperf['end']['sum_received']['bits_per_second'] / 1e6:.1f} Mbit/s")
    print(summary)
    # srsenb, qci 7: Cubic fills the 256 packets and the arrivals beyond are refused; a ping waits at most what
    # 256 full-size packets take at the cell's rate, plus the SR-bound uplink (up to ~45 ms) and the 2 x 3 ms core
    assert srsenb_ue["dl_drop_pkts"] > 0 and srsenb_ue["dl_discard_pkts"] == 0, summary
    queue_ms = 256 * 1500 * 8 / srsenb_bps * 1e3
    assert srsenb_rtts.max() < queue_ms + 80, (queue_ms, summary)
    assert deep_ue["dl_discard_pkts"] == 0 and deep_ue["dl_drop_pkts"] == 0, summary  # nothing refused: deep
    assert deep_rtts.mean() > 1.5 * srsenb_rtts.mean(), summary
