"""Loss recovery after a burst of 10 lost packets, with the receiver window at one BDP (the paper's
AW = C x U): with opportunistic retransmission and a recovery-phase window algorithm the sender keeps
sending new data during recovery instead of waiting on the receiver window (kernel PRR baseline)."""

from __future__ import annotations


import pytest
from cellab.server import experiment, flowclient, modules

RATE_MBIT = 20.0          # the paper's HSPA+ rate
RTT_MS = 100.0            # the paper's U = 100 ms
QUEUE_BYTES = 4_300_000   # the paper's link buffer
# SO_RCVBUF after the handshake: the window scale stays large (room to widen the 16-bit field) and the
# window itself comes to about one BDP (250 kB at 20 Mbit/s x 100 ms).
RCVBUF_AFTER_CONNECT_BYTES = 200_000
DROP_AFTER_PKTS = 3000    # well into steady state
BURST_PKTS = 10
# the send-buffer flows: alive when ss reads at 1.6 s (only samples before it count), not on to 2 s
SNDBUF_FLOW_MS = 1800
FLOW_MS = 3000            # the burst falls 2.4 s in, its recovery is over by 2.5 s (measured; was 4 s)


@pytest.fixture
def path(require_root, netns_prefix):
    with experiment.virtual_path(netns_prefix, RATE_MBIT, RTT_MS, QUEUE_BYTES) as topo:
        yield topo


def burst_loss_flow(topo, sender, cc):
    modules.set_param("burst_drop", "after_pkts", DROP_AFTER_PKTS)   # re-arms the dropper
    modules.set_param("burst_drop", "drop_pkts", BURST_PKTS)
    run = experiment.run_flow(topo, sender, cc, mode=flowclient.MODE_TIME_MS, amount=FLOW_MS,
                              rcvbuf_after_connect_bytes=RCVBUF_AFTER_CONNECT_BYTES, timeout_s=30)
    assert modules.stats("burst_drop")["dropped"] == BURST_PKTS
    rec = run.recovery(RATE_MBIT * 1e6)
    assert rec, f"{cc}: no recovery episode in the samples"
    # the episode must end inside the flow (FLOW_MS), or its new data and utilisation are cut short
    in_recovery = [s["elapsed_ms"] for s in run.samples if s["ca_state"] != 0]
    print(f"{cc}: recovery {in_recovery[0]:.0f}..{in_recovery[-1]:.0f} ms of {run.samples[-1]['elapsed_ms']:.0f} ms")
    return rec


@pytest.mark.parametrize("variant", ["cubic_barr", pytest.param("cubic_qarr", marks=pytest.mark.extended)])
def test_variant_keeps_sending_during_recovery(variant, path, host_clean, tmp_path):
    ue, srv = path.ues[0], path.server
    with experiment.loaded([variant]), experiment.loaded(["burst_drop"], netns=ue.netns, dev="lte0"), \
            experiment.sender_in(path, tmp_path / "logs") as sender:
        base = burst_loss_flow(path, sender, "cubic")
        with experiment.loaded(["or_ingress"], netns=srv.netns, dev="lte0"):
            opt = burst_loss_flow(path, sender, variant)
            widened = modules.stats("or_ingress")["widened_acks"]
    report = f"PRR baseline {base}; {variant}+OR {opt}; widened ACKs {widened}"
    print(report)
    assert widened > 0, report
    assert base["rwnd_limited_ms"] >= 0.3 * base["duration_ms"], "baseline not window-bound: " + report
    # the window stays open (no PRR cut) and OR lets it past rwnd: new data in recovery at least doubles
    assert opt["new_bytes"] >= 2 * base["new_bytes"], report
    assert opt["utilisation"] >= 3 * base["utilisation"], report
    assert not opt["went_to_loss"], report
    if variant == "cubic_barr":
        # BARR's window (rate x RTT) stays below the widened receive window: the time spent blocked on
        # rwnd drops. QARR keeps the pre-loss window, so it sends more but runs into the widened edge
        # between ACKs and the kernel keeps counting that as rwnd-limited time.
        assert opt["rwnd_limited_ms"] <= 0.5 * base["rwnd_limited_ms"], report


def _sndbuf_per_cwnd(topo, sender, cc: str) -> float:
    """Send buffer (ss tb) over the largest cwnd the flow reached, read near the end of a bulk flow."""
    import re
    import subprocess
    import threading
    import time

    box: list[object] = []
    t = threading.Thread(target=lambda: box.append(experiment.run_flow(
        topo, sender, cc, mode=flowclient.MODE_TIME_MS, amount=SNDBUF_FLOW_MS, rcvbuf_bytes=8 << 20, timeout_s=20)))
    t.start()
    time.sleep(1.6)
    out = subprocess.run(["ip", "netns", "exec", topo.server.netns, "ss", "-tmni", "state", "established",
                          "sport", "=", ":5301"], capture_output=True, text=True, check=True).stdout
    t.join(timeout=20)
    tb = int(re.search(r"tb(\d+)", out).group(1))
    run = box[0]
    max_cwnd = max(s["cwnd_pkts"] for s in run.samples if s["elapsed_ms"] < 1600)
    return tb / max_cwnd


def test_send_buffer_grows_three_times_cwnd(require_root, netns_prefix, host_clean, tmp_path):
    """.sndbuf_expand = 3 (paper Thm 11): the send buffer follows 3 x cwnd instead of the kernel's 2."""
    with experiment.wired_path(netns_prefix, rate_mbit=50, buffer_bytes=200_000) as topo, \
            experiment.loaded(["cubic_barr"]), experiment.sender_in(topo, tmp_path / "logs") as sender:
        # The send buffer only grows, to expand x the largest cwnd; a sampler that misses a cwnd peak (a busy
        # host: CI saw 30174 bytes per packet where the peak was missed, 6661 where it was not) can only make
        # tb/cwnd larger. So the least of three flows is each one's estimate.
        pairs = [(_sndbuf_per_cwnd(topo, sender, "cubic"), _sndbuf_per_cwnd(topo, sender, "cubic_barr"))
                 for _ in range(3)]
    print("sndbuf per cwnd (cubic, cubic_barr):", [(round(c), round(b)) for c, b in pairs])
    ratio = min(b for _, b in pairs) / min(c for c, _ in pairs)
    assert 1.3 <= ratio <= 1.7, pairs
