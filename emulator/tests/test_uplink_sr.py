"""Uplink scheduling: SR period in ping RTTs, ACK bunching per policy, compared with a real srsRAN stack."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from netlab import (Capture, bunch_start_spacing_ms, burst_gaps_ms, in_ns, iperf3_download, ping_rtts_ms,
                    pings_the_cell_kept, udp_ping_rtts_ms)

# ../shared/data/srsran-sample/README.md: ping from the UE to the SGi address through a real srsRAN 4G
# eNB+UE+EPC, 50 pings, RTT min/avg/max (ms) per SR period
SRSRAN_PING = {5: (18.1, 21.4, 24.0), 10: (19.4, 24.6, 29.9), 20: (19.3, 29.7, 44.4), 40: (20.2, 38.7, 58.5),
               80: (21.8, 61.4, 118.8)}
# Core delay that gives the emulated cell the real stack's minimum RTT: the emulated fixed uplink path is
# SR -> grant 4 TTI -> PUSCH 4 TTI -> decode 1 TTI, the downlink 1-2 TTI; 2 x 3 ms closes the gap to ~18 ms.
CORE_DELAY_MS = 3.0
# The real stack is software (srsenb, srsepc, ZMQ radio): its forwarding adds about a millisecond of jitter
# each way (its minimum RTT varies by 3.7 ms across the five runs). The comparison models that with 0-1 ms
# of uniform core jitter per direction.
CORE_JITTER_MS = 1

# Pings start every 110-170 ms at random: longer than a UE stays on BSR-driven grants after its last uplink
# data (SR wait + 8 ms + the 20 ms periodic BSR timer, at most 108 ms), so each ping starts from SR as with
# the real stack's 1 s pings, and random so they sample every phase of the SR period.
PING_GAP_S = (0.110, 0.170)


# Not at 5 ms: there srsRAN's whole spread (5.9 ms) is within the pinger's own scheduling noise on a 2-core VM
# (the model measured 6.4-8.0 ms in session 12's runs). `make test` runs 40 ms; the sweep is extended.
@pytest.mark.parametrize("period_ms", [pytest.param(10, marks=pytest.mark.extended),
                                       pytest.param(20, marks=pytest.mark.extended), 40,
                                       pytest.param(80, marks=pytest.mark.extended)])
def test_ping_rtt_spread_matches_srsran(vlab, period_ms):
    # The comparison is of the model: the cell runs SCHED_FIFO, and the pings a TTI run over 2 ms late could
    # have delayed are left out (a stall of the cell on a busy host would show as one huge RTT in a max-based
    # statistic; CI's host ran 1.2 % of TTIs over 2 ms late, too many to throw whole measurements away).
    lab = vlab(n_prb=25, sr_period_ms=period_ms, core_delay_ms=CORE_DELAY_MS, core_jitter_ms=CORE_JITTER_MS,
               realtime=True)
    rmin, ravg, rmax = SRSRAN_PING[period_ms]
    rtt, spoiled = pings_the_cell_kept(lab, 50, *PING_GAP_S, need=48, window_ms=rmax + 10.0, seed=period_ms)
    print(f"P={period_ms} rtt min/avg/max {rtt.min():.1f}/{rtt.mean():.1f}/{rtt.max():.1f} of {len(rtt)} pings, "
          f"{spoiled} left out (the host delayed them)")
    # The spread leaves out the two highest RTTs: the pinger itself is not real-time, and a max-based statistic
    # must not be decided by one of its late wake-ups (the SR wait is uniform over the period: 46 of 48
    # samples span 4 % less of it).
    spread, half_mean = float(np.sort(rtt)[-3] - rtt.min()), 2 * float(rtt.mean() - rtt.min())
    assert abs(rtt.min() - rmin) <= 4.0, rtt.min()  # same minimum RTT (calibrated core delay)
    # 2 (avg - min) is the real stack's, within 25 %: the SR wait, uniform over the period, makes it the period
    assert abs(half_mean - 2 * (ravg - rmin)) <= 0.25 * 2 * (ravg - rmin), (half_mean, 2 * (ravg - rmin))
    # The spread tracks the period itself. Not compared with srsRAN's max - min: one run's extreme, it does not
    # repeat (SR 20 ms: 25.1 ms in the five-period run of srsran-sample, 12.5 ms in its 25-PRB run).
    assert 0.8 * period_ms <= spread <= period_ms + 3.0, (spread, spoiled)


def _ack_times(lab, tmp_path: Path, n_prb: int, seconds: int = 3) -> np.ndarray:
    topo = lab.topology()
    cap = Capture(lab.srv_ns, "lte0", f"tcp and src host {topo.ues[0].address}", tmp_path / "acks.pcap")
    iperf3_download(lab.srv_ns, topo.server.address, topo.ues[0].netns, seconds=seconds)  # iperf3: whole seconds
    times = cap.stop()
    assert len(times) > 200
    return times[times > times[0] + 1.0]  # past slow start


def phase_concentration(times_s: np.ndarray, period_ms: float) -> float:
    """|mean of exp(2 pi i t / P)|: 1 when every packet arrives at the same phase of period P, ~0 when spread."""
    return float(np.abs(np.exp(2j * np.pi * times_s * 1000.0 / period_ms).mean()))


@pytest.mark.parametrize("period_ms", [5, pytest.param(10, marks=pytest.mark.extended),
                                       pytest.param(20, marks=pytest.mark.extended), 40,
                                       pytest.param(80, marks=pytest.mark.extended)])
def test_sr_strict_acks_leave_in_bunches_spaced_by_period(vlab, tmp_path, period_ms):
    lab = vlab(n_prb=25, sr_period_ms=period_ms, ul_policy="sr-strict", core_delay_ms=5.0)
    # 1 s past slow start (was 2): 25 bunches at 40 ms, each of many ACKs; srsenb's gap histogram keeps 2 s
    times = _ack_times(lab, tmp_path, 25, seconds=2)
    assert phase_concentration(times, period_ms) >= 0.6
    gaps, per_burst = burst_gaps_ms(times)
    assert per_burst >= 4, per_burst  # bunches, not a clock of single ACKs
    if period_ms == 5:
        # SR -> PUSCH takes 8 ms, so only every other 5 ms occasion finds the UE without a grant in flight
        assert abs(np.median(gaps) - 10.0) <= 1.5, np.median(gaps)
    else:
        # a bunch bigger than one grant continues on the 8 ms BSR cycle: join pieces less than 9 ms apart
        bunch_gaps = bunch_start_spacing_ms(times, join_ms=9.0)
        print(f"sr-strict P={period_ms}: median bunch spacing {np.median(bunch_gaps):.1f} ms, "
              f"{per_burst:.1f} ACKs per burst")
        assert abs(np.median(bunch_gaps) - period_ms) <= 1.5, np.median(bunch_gaps)


@pytest.mark.parametrize("period_ms", [pytest.param(5, marks=pytest.mark.extended), 80])
def test_srsenb_ack_bunches_match_srsran_independent_of_period(vlab, tmp_path, period_ms):
    # srsran-sample README: 6 PRB, ~1.6 ACKs per burst, gap modes at 7-9 and 17-20 ms, median 8.5-9.3 ms,
    # the same for SR periods 5, 20 and 80 ms
    lab = vlab(n_prb=6, sr_period_ms=period_ms, ul_policy="srsenb", core_delay_ms=5.0)
    times = _ack_times(lab, tmp_path, 6)
    gaps, per_burst = burst_gaps_ms(times)
    print(f"srsenb P={period_ms}: {per_burst:.2f} ACKs per burst, median gap {np.median(gaps):.1f} ms")
    assert 1.2 <= per_burst <= 2.2, per_burst
    assert 7.0 <= np.median(gaps) <= 10.0, np.median(gaps)
    hist, edges = np.histogram(gaps, bins=np.arange(0, 41, 1.0))
    first = edges[np.argmax(hist[:13])]  # mode below 13 ms
    second = edges[13 + np.argmax(hist[13:25])]  # mode between 13 and 25 ms
    assert 6.0 <= first <= 9.0, first
    assert 16.0 <= second <= 21.0, second
    assert hist[13:25].sum() >= 0.05 * len(gaps)
    assert phase_concentration(times, period_ms) < 0.5  # no trace of the SR period


def test_uplink_survives_pause_and_resume_under_load(vlab):
    """A pause skips TTIs: a grant due in one must still be served after resume, or the UE never sends an SR
    again (seen: a C2TCP flow sat in Loss for 28 s after one pause/resume with the uplink busy)."""
    lab = vlab(n_prb=25, sr_period_ms=10, ul_policy="sr-strict")
    topo = lab.topology()
    busy = subprocess.Popen(in_ns(topo.ues[0].netns, "ping", "-q", "-i", "0.002", "-c", "1500", topo.server.address),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rng = random.Random(7)
    try:
        with lab.control() as ctl:
            for _ in range(40):  # many short pauses with the uplink busy: grants fall due inside them
                ctl.pause()
                time.sleep(rng.uniform(0.002, 0.012))
                ctl.resume()
                time.sleep(rng.uniform(0.005, 0.02))
    finally:
        busy.kill()
        busy.wait()
    rtt = ping_rtts_ms(topo.ues[0].netns, topo.server.address, 10, 0.12)
    assert len(rtt) >= 9, rtt  # the uplink still moves


def test_a_stalled_cell_never_beats_its_model_delay(vlab):
    """A host that stops the cell can only make packets late. A packet read when the cell wakes past a TTI's
    deadline belongs to the first TTI not yet run; stamped with the overdue one it would skip the stall and
    arrive sooner than the model allows (seen: a 15.3 ms ping RTT on a cell whose floor is 17.3 ms)."""
    lab = vlab(n_prb=25, sr_period_ms=5, core_delay_ms=20.0)  # a fixed, long floor: compression stands out
    topo = lab.topology()
    floor_ms = udp_ping_rtts_ms(lab.srv_ns, topo.server.address, topo.ues[0].netns, 40, 0.03, 0.05, seed=1).min()
    cell_pid = lab.status()["cell_pid"]
    done = threading.Event()

    def stall_the_cell() -> None:
        rng = random.Random(3)
        while not done.is_set():
            os.kill(cell_pid, signal.SIGSTOP)
            time.sleep(rng.uniform(0.003, 0.008))
            os.kill(cell_pid, signal.SIGCONT)
            time.sleep(rng.uniform(0.005, 0.02))

    staller = threading.Thread(target=stall_the_cell, daemon=True)
    since_ns = time.monotonic_ns()
    staller.start()
    try:
        rtt = udp_ping_rtts_ms(lab.srv_ns, topo.server.address, topo.ues[0].netns, 60, 0.03, 0.05, seed=2)
    finally:
        done.set()
        staller.join()
        os.kill(cell_pid, signal.SIGCONT)
    until_ns = time.monotonic_ns()
    with lab.control() as ctl:
        log = ctl.stalls(since_ns)
    # the cell logged the stalls it was put through, on the caller's clock (what measurements filter by)
    assert log["complete"] and log["min_late_us"] == 1000, log
    assert sum(late_us >= 3000 for _, late_us in log["stalls"]) >= 20, log["stalls"][:20]
    assert all(since_ns <= due_ns <= until_ns for due_ns, _ in log["stalls"]), (since_ns, until_ns, log["stalls"][:5])
    print(f"floor {floor_ms:.1f} ms; stalled: min {rtt.min():.1f} mean {rtt.mean():.1f} ms, "
          f"{int((rtt < floor_ms - 0.5).sum())} of {len(rtt)} below the floor")
    assert len(rtt) >= 55
    assert rtt.min() >= floor_ms - 0.5, (rtt.min(), floor_ms)
