"""C2TCP on the demo's mobile channel (issue 18): the fade must not trap it at cwnd 1-2.

The pedestrian schedule of the shoot-out (runs/schedules/pedestrian.yaml) is played on the virtual cell
while one Cubic and one C2TCP flow run, each 12 s. At the bottom of the fade the paper's C2TCP (no
Setpoint floor: `small_flight_pkts 0`) reaches cwnd 1-2; every ACK of that flight waits for an SR
occasion, so the flight's RTT stays above Setpoint and every ACK is Bad, for seconds after the channel
is back (measured: seed 2 with 3 dB fading, 2.8 s at cwnd <= 2 after the recovery, 4.5 against Cubic's
7.8 Mbit/s). The module's default floors the Setpoint at the small flight's own RTT; see
bpf/c2tcp.bpf.c and README.md ("Deviation: the Setpoint floor")."""

from __future__ import annotations

import math
import os
import threading
import time

import pytest
from cellab.server import experiment, flowclient, modules

CELL = {"n_prb": 25, "sr_period_ms": 20, "core_delay_ms": 10, "attenuation_db": 20, "realtime": True,
        "rlc_queue": 4 << 20}  # as the shoot-out: the paper's deep buffer
FLOW_MS = 12_000           # the full shoot-out's flow: the fade is over at 11 s
WARMUP_MS = 1000
PLAY_STEP_S = 0.1          # the schedule's update_interval_s
FULL_CQI_DB = 34.0         # the cell maps 0-34 dB to CQI 15: the channel is back below this
TRAP_LIMIT_MS = 1000.0     # the issue: at most 1 s at cwnd <= 2 once the channel is back


def pedestrian_db(t_s: float) -> float:
    """runs/schedules/pedestrian.yaml: hold 20 dB 1 s, ramp to 50 dB in 4 s, 50 +- 4 dB sine (1 s period)
    for 2 s, ramp back to 20 dB in 4 s, hold."""
    if t_s < 1:
        return 20.0
    if t_s < 5:
        return 20 + 30 * (t_s - 1) / 4
    if t_s < 7:
        return 50 + 4 * math.sin(2 * math.pi * (t_s - 5))
    if t_s < 11:
        return 50 - 30 * (t_s - 7) / 4
    return 20.0


RECOVERED_MS = (7 + (50 - FULL_CQI_DB) / 30 * 4) * 1000  # on the ramp back, the first moment at CQI 15


def low_cwnd_after_recovery_ms(samples: list[dict], limit_pkts: int = 2) -> float:
    """The longest stretch of the sender's tcp_info samples at cwnd <= limit_pkts, counted from the
    channel's recovery on."""
    longest, start = 0.0, None
    for s in samples:
        if s["cwnd_pkts"] > limit_pkts:
            start = None
            continue
        start = s["elapsed_ms"] if start is None else start
        if s["elapsed_ms"] > RECOVERED_MS:
            longest = max(longest, s["elapsed_ms"] - max(start, RECOVERED_MS))
    return longest


def test_low_cwnd_stretches_count_from_the_recovery():
    rows = [{"elapsed_ms": t, "cwnd_pkts": c} for t, c in
            ((8000, 2), (9000, 2), (10_000, 2), (10_500, 9), (11_000, 1), (11_200, 2), (11_400, 30))]
    assert low_cwnd_after_recovery_ms(rows) == pytest.approx(10_000 - RECOVERED_MS)
    assert low_cwnd_after_recovery_ms(rows[4:]) == pytest.approx(200)


def play_schedule(lab, stop: threading.Event) -> None:
    t0 = time.monotonic()
    with lab.control() as ctl:
        while not stop.is_set():
            ctl.set_attenuation(0, pedestrian_db(time.monotonic() - t0))
            stop.wait(PLAY_STEP_S)
        ctl.set_attenuation(0, 20.0)


def mobile_flow(lab, topo, sender, cc: str) -> experiment.FlowRun:
    stop = threading.Event()
    player = threading.Thread(target=play_schedule, args=(lab, stop), daemon=True)
    player.start()
    try:
        return experiment.run_flow(topo, sender, cc, mode=flowclient.MODE_TIME_MS, amount=FLOW_MS,
                                   rcvbuf_bytes=8 << 20, timeout_s=40)
    finally:
        stop.set()
        player.join()


def shootout(lab, on_time, tmp_path) -> tuple[experiment.FlowRun, experiment.FlowRun, dict]:
    topo = lab.topology()
    with experiment.loaded(["c2tcp"]), experiment.sender_in(topo, tmp_path / "logs", sample_ms=20) as sender:
        params = modules.describe()["c2tcp"].params
        cubic = on_time(lab, lambda: mobile_flow(lab, topo, sender, "cubic"))
        c2tcp = on_time(lab, lambda: mobile_flow(lab, topo, sender, "c2tcp"))
    return cubic, c2tcp, params


def describe(cubic, c2tcp, params) -> str:
    return (f"cubic {cubic.throughput_bps / 1e6:.2f} Mbit/s {cubic.mean_rtt_ms(WARMUP_MS):.0f} ms; "
            f"c2tcp {c2tcp.throughput_bps / 1e6:.2f} Mbit/s {c2tcp.mean_rtt_ms(WARMUP_MS):.0f} ms, "
            f"{low_cwnd_after_recovery_ms(c2tcp.samples):.0f} ms at cwnd <= 2 after the recovery; "
            f"cwnd every 0.5 s {[s['cwnd_pkts'] for s in c2tcp.samples[::25]]}; {params}")


def open_lab(netns_prefix: str, **extra):
    from cellab.labs import embedded_lab_class
    VirtualLab = embedded_lab_class("virtual")  # the emulator room's lab, through the registry

    lab = VirtualLab(prefix=netns_prefix, params=CELL | extra)
    lab.up()
    return lab


@pytest.fixture
def lab_factory(require_root, netns_prefix):
    labs = []

    def make(**extra):
        labs.append(open_lab(netns_prefix, **extra))
        return labs[-1]

    yield make
    for lab in labs:
        lab.down()


# 3 dB Gauss-Markov fading on top of the schedule, on several seeds; and the demo's own channel (no fading,
# the seed draws the HARQ failures). The extended tests (`make bench BENCH=extended`) run seed 2, the one whose
# fade trapped the paper's C2TCP, and the demo channel (each pair is 24 s of flows, too long for `make test` on
# 2 cores, which keeps the fade's count in test_low_cwnd_stretches_count_from_the_recovery);
# CELLAB_C2TCP_FADING_SEEDS=5 runs the seeds 1-5.
_SEEDS_ENV = os.environ.get("CELLAB_C2TCP_FADING_SEEDS")
FADING_SEEDS = range(1, 1 + int(_SEEDS_ENV)) if _SEEDS_ENV else (2,)
CHANNELS = [pytest.param(3.0, seed, id=f"fading3dB-seed{seed}", marks=pytest.mark.extended) for seed in FADING_SEEDS] + \
    [pytest.param(0.0, 1, id="demo-channel", marks=pytest.mark.extended)]


@pytest.mark.parametrize(("fading_db", "seed"), CHANNELS)
def test_c2tcp_leaves_the_fade_at_most_of_cubics_throughput(lab_factory, on_time, host_clean, tmp_path, fading_db,
                                                            seed):
    """The delay bound is C2TCP's own (Eq. 9: below 1.5 Setpoint; and below Cubic's), not half of Cubic's:
    Cubic loses packets to HARQ failures in the fade in some runs and drains its queue there, so its mean
    RTT on this channel ranges 59-150 ms between runs of the same seed (README, "Setpoint floor")."""
    cubic, c2tcp, params = shootout(lab_factory(fading_db=fading_db, seed=seed), on_time, tmp_path)
    report = describe(cubic, c2tcp, params)
    print(report)  # the numbers of a passing run too (pytest -rP)
    assert params["small_flight_pkts"] == 8, report
    assert low_cwnd_after_recovery_ms(c2tcp.samples) <= TRAP_LIMIT_MS, report
    assert c2tcp.throughput_bps >= 0.8 * cubic.throughput_bps, report
    assert c2tcp.mean_rtt_ms(WARMUP_MS) <= min(cubic.mean_rtt_ms(WARMUP_MS), 1.5 * params["target_ms"]), report
