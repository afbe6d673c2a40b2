"""Sender-side ExLL on a bloated bottleneck (virtual cell, constant-rate trace, 5 ms SR period): it
leaves Cubic's slow start, then holds the RTT near its minimum-RTT estimate at Cubic's throughput."""

from __future__ import annotations

import pytest
from cellab.server import experiment, flowclient, modules

RATE_MBIT = 24.0
RTT_MS = 40.0
QUEUE_BYTES = 1_500_000
FLOW_MS = 5000    # ExLL's RTT over Cubic's: 0.33 at 6 s, 0.36-0.38 at 5 s, 0.44 at 4 s (0.5 asserted)
WARMUP_MS = 1000


@pytest.fixture
def path(require_root, netns_prefix):
    with experiment.virtual_path(netns_prefix, RATE_MBIT, RTT_MS, QUEUE_BYTES, sr_period_ms=5) as topo:
        yield topo


def test_exll_takes_control_and_keeps_the_queue_short(path, host_clean, tmp_path):
    with experiment.loaded(["exll"]), experiment.sender_in(path, tmp_path / "logs", sample_ms=20) as sender:
        cubic = experiment.run_flow(path, sender, "cubic", mode=flowclient.MODE_TIME_MS, amount=FLOW_MS,
                                    rcvbuf_bytes=8 << 20, timeout_s=30)
        exll = experiment.run_flow(path, sender, "exll", mode=flowclient.MODE_TIME_MS, amount=FLOW_MS,
                                   rcvbuf_bytes=8 << 20, timeout_s=30)
        stats = modules.stats("exll")
    rtt_cubic, rtt_exll = cubic.mean_rtt_ms(WARMUP_MS), exll.mean_rtt_ms(WARMUP_MS)
    report = (f"cubic {rtt_cubic:.1f} ms {cubic.throughput_bps / 1e6:.2f} Mbit/s; "
              f"exll {rtt_exll:.1f} ms {exll.throughput_bps / 1e6:.2f} Mbit/s; {stats}")
    assert stats["control_entries"] == 1 and stats["updates"] > 10, report
    # mRE = mpRTT + one SR period: the controlled RTT sits above the minimum, far below Cubic's
    assert stats["last_mre_us"] >= stats["last_mprtt_us"] + 5000, report
    assert rtt_exll <= 0.5 * rtt_cubic, report
    assert exll.throughput_bps >= 0.85 * cubic.throughput_bps, report
    print(report)
