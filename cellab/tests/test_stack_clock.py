"""cellab.labs.clock: the stack clock file read strictly (a truncated record, a time not after the one before,
another run's clock, a wrong header: an InputError naming file and record or field), wall time <-> stack TTI on a
clock whose speed swings, and what covers/summary say about a stall."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cellab.errors import InputError
from cellab.labs.base import EmbeddedLab
from cellab.labs.clock import StackClock

T0_S = 1_800_000_000.0


def _header(**over) -> dict:
    return {"format": "cellab-stack-clock", "version": 1, "direction": "dl", "sample_rate_hz": 3840000,
            "samples_per_tti": 3840, "clock": "CLOCK_REALTIME", "run_id": "r1", "first_tti": 100} | over


def _write(path: Path, times_s, header: dict | None = None, tail: bytes = b"") -> Path:
    ns = np.round(np.asarray(times_s, dtype=np.float64) * 1e9).astype("<i8")
    path.write_bytes(json.dumps(header or _header()).encode() + b"\n" + ns.tobytes() + tail)
    return path


def _swinging(n: int = 2000) -> np.ndarray:
    """TTIs 2.9 ms apart (340 a second), then 1.43 ms (700 a second), alternating every 200 TTIs."""
    steps = np.where((np.arange(n) // 200) % 2 == 0, 1 / 340, 1 / 700)
    return T0_S + np.cumsum(steps)


@pytest.mark.parametrize(("tail", "times", "header", "field", "says"), [
    (b"\x01\x02\x03", None, None, "record 2000", "truncated: 3 of 8 bytes"),
    (b"", "back", None, "record 7", "not monotonic: TTI 107"),
    (b"", "same", None, "record 7", "is not after record 6's"),
    (b"", None, _header(format="pcap"), "header.format", "is not a stack clock"),
    (b"", None, _header(version=2), "header.version", "allowed: 1"),
    (b"", None, _header(direction="both"), "header.direction", "allowed: dl, ul"),
    (b"", None, _header(samples_per_tti=3000), "header.samples_per_tti", "is not sample_rate_hz 3840000 / 1000"),
    (b"", None, _header(first_tti=-1), "header.first_tti", "is not a non-negative whole number"),
    (b"", None, _header(clock="CLOCK_MONOTONIC"), "header.clock", "allowed: CLOCK_REALTIME"),
    (b"", None, _header(run_id=None), "header.run_id", "is not a string"),
])
def test_a_bad_clock_file_is_refused_naming_file_and_where(tmp_path, tail, times, header, field, says):
    t = _swinging()
    if times == "back":
        t[7] = t[6] - 0.001
    elif times == "same":
        t[7] = t[6]
    path = _write(tmp_path / "stack-clock-dl.bin", t, header, tail)
    with pytest.raises(InputError) as err:
        StackClock.from_file(path, expect_run_id="r1")
    assert err.value.source == str(path) and err.value.field == field, str(err.value)
    assert says in str(err.value)


def test_another_runs_clock_and_a_file_without_header_are_refused(tmp_path):
    path = _write(tmp_path / "c.bin", _swinging(10))
    with pytest.raises(InputError, match="'r1' is another run's clock \\(this run is 'r2'\\)"):
        StackClock.from_file(path, expect_run_id="r2")
    assert StackClock.from_file(path).ttis == 10  # no run expected: any
    (tmp_path / "raw.bin").write_bytes(b"\x00" * 5000)
    with pytest.raises(InputError, match="header: no JSON line ending in a newline within its first 4096 bytes"):
        StackClock.from_file(tmp_path / "raw.bin")
    (tmp_path / "text.bin").write_bytes(b"hello\n")
    with pytest.raises(InputError, match="header: not a JSON line"):
        StackClock.from_file(tmp_path / "text.bin")
    with pytest.raises(InputError, match="cannot read the stack clock"):
        StackClock.from_file(tmp_path / "missing.bin")


def test_wall_time_maps_to_the_stack_ttis_the_clock_recorded_as_its_speed_swings(tmp_path):
    t = _swinging()
    clock = StackClock.from_file(_write(tmp_path / "c.bin", t), "r1")
    assert clock.tti_at(t[0]) == pytest.approx(101.0)  # record 0 ends TTI 100
    assert clock.tti_at(t[450]) == pytest.approx(551.0)
    assert clock.tti_at((t[450] + t[451]) / 2) == pytest.approx(551.5, abs=1e-4)
    assert clock.wall_at(551.5) == pytest.approx((t[450] + t[451]) / 2, abs=1e-6)
    assert clock.stack_s(t[999]) == pytest.approx(1.0)  # 1000 TTIs since TTI 100 began
    assert clock.tti_at(t[-1] + 1.0) == pytest.approx(2100.0 + (len(t) - 1) / (t[-1] - t[0]), rel=1e-6)  # past it: mean rate
    s = clock.summary(stall_ms=50)
    assert s.source == "stack-clock-dl" and s.ttis == 2000 and s.stalls == []
    assert s.speed == pytest.approx(2 / (1 / 0.34 + 1 / 0.7), rel=0.01)  # the harmonic mean of the halves
    assert s.speed_p5 == pytest.approx(0.34, abs=0.02) and s.speed_p95 == pytest.approx(0.70, abs=0.02)
    assert s.max_gap_ms == pytest.approx(1000 / 340, abs=0.01) and len(s.file_sha256) == 64
    assert clock.covers(t[10], t[-10], max_gap_ms=200) == []


def test_a_stall_is_named_and_a_clock_short_of_the_workload_does_not_cover_it(tmp_path):
    t = _swinging()
    t[1000:] += 0.3  # 300 ms without a TTI after record 999
    clock = StackClock.from_file(_write(tmp_path / "c.bin", t), "r1")
    reasons = clock.covers(t[10], t[-10], max_gap_ms=200)
    assert len(reasons) == 1 and "the stack stalled 30" in reasons[0] and "after TTI 1099" in reasons[0], reasons
    s = clock.summary(stall_ms=200, start_wall_s=t[10], end_wall_s=t[-10])
    assert [round(x.gap_ms) for x in s.stalls] == [301] and s.stalls[0].at_wall_s == pytest.approx(t[999])
    assert s.ttis == 1981
    assert clock.covers(t[1001], t[-10], max_gap_ms=200) == []  # after the stall
    late = clock.covers(t[0] - 1.0, t[-1] + 0.5, max_gap_ms=200)
    assert any("starts 1000 ms after the workload began" in r for r in late)
    assert any("ends 500 ms before the workload ended" in r for r in late)
    empty = StackClock.from_file(_write(tmp_path / "e.bin", []), "r1")
    assert empty.covers(T0_S, T0_S + 1, 200) == ["the stack clock (e.bin) recorded no TTI"]
    assert empty.summary(200).speed is None


def test_the_wall_clock_is_real_time_and_every_lab_has_it_by_default():
    wall = StackClock.wall()
    assert wall.tti_at(T0_S) == T0_S * 1000 and wall.wall_at(5.0) == 0.005
    assert wall.covers(0, 1e10, 1) == [] and wall.summary(200).speed == 1.0
    assert EmbeddedLab.stack_clock(None, Path("/nonexistent")).source == "wall"  # type: ignore[arg-type]


class _Lab:
    def __init__(self, clock=None, error=None):
        self.clock, self.error = clock, error

    def stack_clock(self, lab_artifacts_dir):
        if self.error:
            raise self.error
        return self.clock


def test_a_run_is_invalid_when_its_clock_stalls_or_is_unreadable_and_valid_when_merely_slow(tmp_path):
    from cellab.campaign.rules import Retry
    from cellab.labs.clock import run_clock_timing

    retry = Retry()
    assert retry.max_stack_gap_ms == 200 and retry.min_stack_speed is None  # speed recorded, not judged
    slow = StackClock.from_file(_write(tmp_path / "slow.bin", T0_S + np.arange(3000) / 340.0), "r1")  # 0.34
    timing = run_clock_timing(_Lab(slow), tmp_path, T0_S + 0.5, T0_S + 8.0, retry.max_stack_gap_ms)
    assert timing["stack_clock"]["speed"] == pytest.approx(0.34, rel=1e-3) and timing["stack_clock"]["file"] == "slow.bin"
    assert retry.invalid_reason({"stack_speed": 0.34} | timing) is None
    t = T0_S + np.arange(3000) / 340.0
    t[1500:] += 1.0
    stalled = StackClock.from_file(_write(tmp_path / "stalled.bin", t), "r1")
    timing = run_clock_timing(_Lab(stalled), tmp_path, T0_S + 0.5, T0_S + 8.0, retry.max_stack_gap_ms)
    why = retry.invalid_reason(timing)
    assert why.startswith("the stack clock does not cover the workload: the stack stalled 100") and "after TTI 1599" in why
    assert [round(s["gap_ms"]) for s in timing["stack_clock"]["stalls"]] == [1003]
    assert "stack_clock_invalid" not in run_clock_timing(_Lab(stalled), tmp_path, T0_S + 0.5, T0_S + 8.0, None)
    broken = run_clock_timing(_Lab(error=InputError("x.bin", "record 3", "truncated")), tmp_path, 0, 1, 200)
    assert retry.invalid_reason(broken) == ("the stack clock does not cover the workload: the stack clock is "
                                            "unusable: x.bin: record 3: truncated")
    assert run_clock_timing(_Lab(StackClock.wall()), tmp_path, 0, 1, 200) == {}  # real time: nothing to add
    assert run_clock_timing(object(), tmp_path, 0, 1, 200) == {}  # a lab without a stack clock


def test_a_stall_wholly_inside_a_window_the_lab_excuses_is_recorded_with_its_reason_not_judged(tmp_path):
    from cellab.campaign.rules import Retry
    from cellab.labs.clock import run_clock_timing

    t = T0_S + np.arange(3000) / 340.0
    t[1500:] += 1.0  # one 1 s stall after 1499/340 = 4.41 s
    t[2500:] += 0.5  # and another at 7.35 s
    clock = StackClock.from_file(_write(tmp_path / "stalled.bin", t), "r1")
    retry = Retry()
    excused = [(T0_S + 4.0, T0_S + 6.0, "srsepc restarted: no UE connected")]
    timing = run_clock_timing(_Lab(clock), tmp_path, T0_S + 0.5, T0_S + 8.5, retry.max_stack_gap_ms, excused)
    why = retry.invalid_reason(timing)  # the second stall is outside the window: still judged
    assert why is not None and "stalled 503 ms" in why and "stalled 100" not in why, why
    (gap,) = timing["stack_clock"]["excused_stalls"]
    assert round(gap["gap_ms"]) == 1003 and gap["why"] == "srsepc restarted: no UE connected", gap
    assert [round(s["gap_ms"]) for s in timing["stack_clock"]["stalls"]] == [1003, 503]  # the record keeps both
    # a window that holds only part of a gap excuses nothing
    edge = [(T0_S + 5.0, T0_S + 6.0, "too late")]
    assert clock.covers(T0_S + 0.5, T0_S + 8.5, 200, edge) == clock.covers(T0_S + 0.5, T0_S + 8.5, 200)
    assert clock.excused_gaps(T0_S + 0.5, T0_S + 8.5, 200, edge) == []
