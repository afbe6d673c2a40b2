"""S-Cubic on a 50 Mbit/s, 50 ms path (virtual cell, constant-rate trace, 1 BDP of queue): the second
1 MB flow to a destination is much faster than Cubic's; other destinations get no state; state expires."""

from __future__ import annotations

import time

import pytest
from cellab.server import experiment, modules

RATE_MBIT = 50.0
RTT_MS = 50.0
BDP_BYTES = int(RATE_MBIT * 1e6 / 8 * RTT_MS / 1e3)
FLOW_BYTES = 1_000_000
# S-Cubic's first flight is min(cwnd, rwnd): the client must offer a BDP-sized initial window
# (the paper's Windows clients offered 179 MSS; Linux offers 10 unless the route says otherwise).
INITRWND_PKTS = 1000
# the next flow starts right after a store (a 1 MB flow takes ~0.3 s): 500 ms is a hit, 0.7 s later expired
TTL_MS = 500


@pytest.fixture
def path(require_root, netns_prefix):
    with experiment.virtual_path(netns_prefix, RATE_MBIT, RTT_MS, queue_bytes=BDP_BYTES, n_ues=2,
                                 initrwnd_pkts=INITRWND_PKTS) as topo:
        yield topo


def one_mb(topo, sender, cc, ue=0):
    stored_before = modules.stats("scubic")["stored"] if cc == "scubic" else 0
    run = experiment.run_flow(topo, sender, cc, ue=ue, amount=FLOW_BYTES, rcvbuf_bytes=8 << 20, timeout_s=20)
    assert run.result.bytes_received == FLOW_BYTES
    if cc == "scubic":
        _wait_stored(stored_before)
    return run.result.fct_s


def _wait_stored(before: int, timeout_s: float = 2.0) -> None:
    """Release (the state store) runs when the kernel destroys the socket, after the flow: wait for it (was a
    fixed 0.2 s after every flow). A flow that stores nothing is left to the caller's asserts."""
    deadline = time.monotonic() + timeout_s
    while modules.stats("scubic")["stored"] == before and time.monotonic() < deadline:
        time.sleep(0.02)


def test_second_flow_is_faster_and_state_stays_per_destination(path, host_clean, tmp_path):
    with experiment.loaded(["scubic"]), experiment.sender_in(path, tmp_path / "logs") as sender:
        one_mb(path, sender, "cubic")
        cubic_second = one_mb(path, sender, "cubic")
        one_mb(path, sender, "scubic")                    # seeds the state for UE 0
        seeded = modules.stats("scubic")
        scubic_second = one_mb(path, sender, "scubic")    # Startup from the stored c* and RTTmin
        after_hit = modules.stats("scubic")
        one_mb(path, sender, "scubic", ue=1)              # another destination: no state
        after_other = modules.stats("scubic")
    report = f"cubic {cubic_second:.3f} s, scubic {scubic_second:.3f} s; {after_hit}"
    print(report)
    assert seeded["stored"] == 1 and seeded["hits"] == 0, report
    assert after_hit["hits"] == 1 and after_hit["startup_exits"] == 1, report
    assert after_hit["last_bdp_pkts"] > 10, report
    assert scubic_second <= 0.7 * cubic_second, report
    assert after_other["hits"] == 1 and after_other["misses"] == seeded["misses"] + 1, after_other


def test_state_expires_after_its_ttl(path, host_clean, tmp_path):
    with experiment.loaded(["scubic"]), experiment.sender_in(path, tmp_path / "logs") as sender:
        modules.set_param("scubic", "ttl_ms", TTL_MS)
        one_mb(path, sender, "scubic")
        one_mb(path, sender, "scubic")        # within the TTL: a hit
        hit = modules.stats("scubic")
        time.sleep(TTL_MS / 1e3 + 0.2)
        one_mb(path, sender, "scubic")        # past the TTL: expired, plain slow start
        expired = modules.stats("scubic")
    assert hit["hits"] == 1 and hit["expired"] == 0, hit
    assert expired["expired"] == 1 and expired["hits"] == 1, expired
