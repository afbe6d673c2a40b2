"""The SR grid estimator in stack time, on synthetic deliveries: a stack whose TTI rate swings between 340 and 700
per wall second, SR occasions the UE leaves unused, HARQ retransmissions, reply jitter, every SR period."""

from __future__ import annotations

import random

import numpy as np
import pytest

from cellab.labs.clock import StackClock
from cellab.ue.sr_grid import MIN_PROBES, POLL_GUARD_TTI, estimate_on_clock, grid_estimate, sr_metrics_on_clock

T0_S = 1_764_000_000.0


def swinging_clock(seed: int, seconds: float = 40.0, lo: float = 340.0, hi: float = 700.0) -> StackClock:
    """A broker's clock whose TTI rate is redrawn every 50-300 ms between lo and hi TTIs per wall second."""
    rng = np.random.default_rng(seed)
    durations = []
    while sum(durations) < seconds:
        rate = rng.uniform(lo, hi)
        durations += [1.0 / rate] * int(rate * rng.uniform(0.05, 0.3))
    times_ns = (T0_S * 1e9 + np.cumsum(durations) * 1e9).astype(np.int64)
    return StackClock("stack-clock-dl", times_ns, first_tti=1000)


def average_ruler(clock: StackClock) -> StackClock:
    """The same run read with one average ruler (what the wall-time estimator had): a constant TTI rate."""
    n = clock.ttis
    start, end = clock.wall_at(clock.first_tti + 1), clock.wall_at(clock.first_tti + n)
    times_ns = (np.linspace(start, end, n) * 1e9).astype(np.int64)
    return StackClock("stack-clock-dl", times_ns, first_tti=clock.first_tti)


def probe_summary(clock: StackClock, period: int, seed: int, probes: int = 30, skip: float = 0.3,
                  harq: float = 0.05, gap_x: float = 1.0, poll: bool = True) -> dict:
    """The probe summary's uplink_probes of `probes` idle-uplink pings on `clock`: each waits for the next SR
    occasion (phase + k period, in stack TTIs), leaves each occasion unused with probability `skip`, is granted a
    fixed 10 TTIs later, is HARQ-retransmitted (+8 TTIs) with probability `harq`, and its reply reaches the probe
    a fraction of a TTI after its TTI passed. A probe sent within 20 TTIs of the previous PUSCH rides the eNB's
    poll of the emptied UE instead (`poll`). The next probe goes 30-110 ms (x gap_x) of wall time after the reply."""
    rng = random.Random(seed)
    phase = rng.randrange(period)
    start_tti = clock.first_tti + 200
    t_s = clock.wall_at(start_tti) if clock.source != "wall" else T0_S + 0.2
    reply_ns, rtt_ms, last_pusch = [], [], None
    for _ in range(probes):
        a = clock.tti_at(t_s)
        if poll and last_pusch is not None and a < last_pusch + 20:
            pusch = last_pusch + 20  # the poll's grant, not an SR
        else:
            occasion = phase + period * np.ceil((a + 1 - phase) / period)
            while rng.random() < skip:
                occasion += period
            pusch = occasion + 6
        pusch += 8 if rng.random() < harq else 0
        reply_tti = pusch + 4 + rng.uniform(0.05, 0.6)
        reply_s = clock.wall_at(reply_tti)
        reply_ns.append(int(round(reply_s * 1e9)))
        rtt_ms.append((reply_s - t_s) * 1e3)
        last_pusch = pusch
        t_s = reply_s + rng.uniform(0.030, 0.110) * gap_x
    return {"uplink_probes": {"requested": probes, "sent": probes, "rtt_ms": rtt_ms, "reply_wall_ns": reply_ns}}


@pytest.mark.parametrize("period", [5, 10, 20, 40, 80])
def test_every_period_on_a_swinging_stack_clock(period: int):
    for seed in range(3):
        clock = swinging_clock(seed)
        est = estimate_on_clock(probe_summary(clock, period, seed * 7 + period, gap_x=2.0), clock)
        assert est is not None and est.period_tti == period, est
        assert est.confidence == "high" and est.regime == "sr-limited"
        assert est.off_grid_share is not None and est.off_grid_share < 0.2


@pytest.mark.parametrize("period", [5, 10, 20, 40, 80])
def test_every_period_on_the_wall_clock(period: int):
    """A real eNB or the virtual cell: stack time is wall time, the same estimator reads the same grid."""
    clock = StackClock.wall()
    est = estimate_on_clock(probe_summary(clock, period, period, skip=0.0, poll=False), clock)
    assert est is not None and est.period_tti == period, est


def test_skipped_occasions_do_not_move_the_grid():
    """Half the occasions left unused: waits widen to several periods (the wait fit reads 2P), the grid stays P."""
    clock = swinging_clock(11)
    summary = probe_summary(clock, 10, 5, skip=0.5, gap_x=2.0)
    est = estimate_on_clock(summary, clock)
    assert est is not None and est.period_tti == 10
    assert max(summary["uplink_probes"]["rtt_ms"]) > 3 * 10 * (1 / 0.7)  # some waited several periods


def test_the_average_ruler_answers_nothing_rather_than_wrong():
    """What the issue saw: the same deliveries read with one average TTI rate smear the grid; the estimator must then
    say no answer (or, rarely, the truth), never another period."""
    named_wrong = answered = 0
    for seed in range(10):
        for period in (5, 20, 80):
            clock = swinging_clock(100 + seed)
            est = estimate_on_clock(probe_summary(clock, period, seed, gap_x=2.0), average_ruler(clock))
            assert est is not None
            answered += est.period_tti is not None
            named_wrong += est.period_tti not in (None, period)
    assert named_wrong == 0
    assert answered < 10  # the smeared grid mostly cannot decide


def test_poll_rides_are_left_out_by_stack_time():
    """Probes sent within 20 TTIs of the previous PUSCH ride the eNB's poll (at PUSCH + 20: off a 40 or 80 grid);
    the guard drops them by their stack-time gap and the period stays right."""
    clock = swinging_clock(3, lo=340, hi=400)
    summary = probe_summary(clock, 40, 9, probes=60, gap_x=1.0)
    est = estimate_on_clock(summary, clock)
    assert est is not None and est.n_poll_guarded > 5 and est.period_tti == 40, est


def test_too_few_probes_is_no_answer():
    clock = swinging_clock(4)
    est = estimate_on_clock(probe_summary(clock, 20, 1, probes=MIN_PROBES - 1, gap_x=2.0), clock)
    assert est is not None and est.period_tti is None and "at least" in est.reason


def test_replies_on_no_grid_name_no_period():
    rng = np.random.default_rng(8)
    for _ in range(30):
        replies = np.cumsum(rng.uniform(40, 120, size=30))
        est = grid_estimate(replies, replies - 30)
        assert est.period_tti is None, est


def test_the_grid_of_a_pure_tti_lattice_is_not_an_sr_period():
    """Grants whenever asked (no SR wait): replies on every TTI, at random ones: not SR-limited, no period."""
    rng = np.random.default_rng(2)
    replies = np.cumsum(rng.integers(40, 120, size=40)) + 0.3 + rng.uniform(0, 0.1, size=40)
    est = grid_estimate(replies, replies - 30)
    assert est.period_tti is None and est.best_model == 1 and est.regime == "not-sr-limited", est


def test_a_clock_that_does_not_span_the_probes_is_no_answer():
    clock = swinging_clock(5, seconds=40.0)
    summary = probe_summary(clock, 10, 3, gap_x=2.0)
    short = StackClock("stack-clock-dl", np.asarray([int(T0_S * 1e9) + i * 2_000_000 for i in range(500)]), 0)
    est = estimate_on_clock(summary, short)
    assert est is not None and est.period_tti is None and "does not span" in est.reason


def test_poll_guard_bound_is_above_the_enb_poll():
    assert POLL_GUARD_TTI > 20 - 6  # the poll comes 20 TTIs after the last PUSCH, the reply ~6 after it


def test_metrics_fields_say_which_clock():
    clock = swinging_clock(6)
    summary = probe_summary(clock, 20, 4, gap_x=2.0)
    stack = sr_metrics_on_clock(summary, clock)
    assert stack["sr_clock"] == "stack" and stack["sr_estimate_ms"] == 20.0 and stack["sr_estimate_source"] == "stack-grid"
    wall = sr_metrics_on_clock(summary, StackClock.wall())
    assert wall["sr_clock"] == "wall" and "sr_estimate_ms" not in wall and "sr_grid" in wall
    old = {"uplink_probes": {"requested": 30, "rtt_ms": [20.0] * 30}}  # a probe from before stack time
    assert sr_metrics_on_clock(old, clock)["sr_clock"] == "wall"
    assert sr_metrics_on_clock({"uplink_probes": {}}, clock) == {}


def test_run_metrics_read_the_estimate_on_the_runs_clock(tmp_path):
    """The core's probe metrics hand the summary and the run's clock to this room (entry point sr_on_clock): on a
    stack clock the grid's answer replaces the probe's wall-clock one, scored against the truth as before."""
    import json

    from cellab.results.metrics import RunContext, probe_run_metrics

    clock = swinging_clock(7)
    doc = probe_summary(clock, 40, 2, gap_x=2.0) | {
        "status": "ok", "total_bytes": 0, "flows": [],
        "sr_estimate": {"regime": "sr-limited", "period_ms": None, "ambiguous": True, "candidates_ms": [20, 40],
                        "confidence": "none"}}
    path = tmp_path / "probe-summary.json"
    path.write_text(json.dumps(doc))
    wall = probe_run_metrics({"probe-summary": path}, RunContext(t0_s=T0_S, duration_s=2, sr_true_ms=40))
    assert wall["sr_clock"] == "wall" and wall["sr_outcome"] == "no-answer"
    ctx = RunContext(t0_s=T0_S, duration_s=2, sr_true_ms=40, stack_clock=clock)
    stack = probe_run_metrics({"probe-summary": path}, ctx)
    assert stack["sr_clock"] == "stack" and stack["sr_estimate_ms"] == 40.0 and stack["sr_outcome"] == "right"
    assert "sr_candidates_ms" not in stack and stack["sr_ambiguous"] is False


def _clock_file(path, clock: StackClock, direction: str, run_id: str) -> None:
    import json

    header = {"format": "cellab-stack-clock", "version": 1, "direction": direction, "sample_rate_hz": 5_760_000,
              "samples_per_tti": 5760, "clock": "CLOCK_REALTIME", "run_id": run_id, "first_tti": clock.first_tti}
    times = [int(round(clock.wall_at(clock.first_tti + 1 + i) * 1e9)) for i in range(clock.ttis)]
    path.write_bytes(json.dumps(header).encode() + b"\n" + np.asarray(times, dtype="<i8").tobytes())


def test_the_replies_are_read_on_the_uplink_record(tmp_path):
    """The UE's events follow the broker's uplink record: given the run's (downlink) clock file, the estimate reads
    its uplink sibling of the same run; a sibling from another run is no answer, naming it."""
    truth, skewed = swinging_clock(9, seconds=25), swinging_clock(10, seconds=25)
    summary = probe_summary(truth, 20, 3, gap_x=2.0)
    _clock_file(tmp_path / "stack-clock-dl.bin", skewed, "dl", "run-a")
    _clock_file(tmp_path / "stack-clock-ul.bin", truth, "ul", "run-a")
    dl = StackClock.from_file(tmp_path / "stack-clock-dl.bin", expect_run_id="run-a")
    est = estimate_on_clock(summary, dl)
    assert est is not None and est.clock == "stack-clock-ul" and est.period_tti == 20
    _clock_file(tmp_path / "stack-clock-ul.bin", truth, "ul", "run-b")
    est = estimate_on_clock(summary, dl)
    assert est is not None and est.period_tti is None and "run-b" in est.reason
