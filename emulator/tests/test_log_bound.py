"""Issue 42, "a hand-started lab grows without bound": the virtual cell's long-lived logs (its TTI log and its own
clock, in /run) stay within the lab's bound however long it is left up, and what a run's collect joins from their
two segments is the latest data, whole: TTIs one after the other up to the cell's present, and a clock that maps
every one of them to the wall time the cell ran it (emulator/logcap.c, emulator/logsegments.py)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from cellab.emulator.logsegments import older
from cellab.envvars import LAB_LOG_MAX_ENV as LOG_MAX_ENV
from cellab.envvars import lab_log_max_bytes
from cellab.emulator.ttilog import HEADER_DTYPE, RECORD_DTYPE, read_ttilog
from cellab.errors import InputError
from cellab.labs.clock import StackClock
from cellab.results.cell_time import cell_clock

BOUND_BYTES = 65536  # the cell's least bound: a TTI log segment holds about 0.8 s of one UE, a clock one 4 s
LEFT_UP_S = 10.0


def _size(path) -> int:
    return sum(p.stat().st_size for p in (path, older(path)) if p.exists())


def test_a_lab_left_up_stays_within_its_bound_and_keeps_the_latest_data(vlab, monkeypatch, tmp_path):
    monkeypatch.setenv(LOG_MAX_ENV, str(BOUND_BYTES))
    lab = vlab(ues=1)
    largest = {"tti": 0, "clock": 0}
    end = time.monotonic() + LEFT_UP_S
    while time.monotonic() < end:
        largest["tti"] = max(largest["tti"], _size(lab.tti_log))
        largest["clock"] = max(largest["clock"], _size(lab.cell_clock))
        time.sleep(0.05)
    print(f"largest on disk over {LEFT_UP_S:g} s: TTI log {largest['tti']} B, clock {largest['clock']} B "
          f"(bound {BOUND_BYTES} B each)")
    assert 0 < largest["tti"] <= BOUND_BYTES and 0 < largest["clock"] <= BOUND_BYTES
    assert older(lab.tti_log).exists() and older(lab.cell_clock).exists()  # both rotated: the bound was reached

    arts = lab.collect(tmp_path)
    with lab.control() as ctl:
        now_tti = int(ctl.stats()["tti"])
    ttis = read_ttilog(arts["cell_tti_log"]).ue(0)["tti"].astype(np.int64)
    assert np.all(np.diff(ttis) == 1)  # the two segments joined, nothing missing between them
    segment_ttis = (BOUND_BYTES // 2 - HEADER_DTYPE.itemsize) // RECORD_DTYPE.itemsize
    assert ttis.size >= segment_ttis  # at least one whole segment: the latest N/2 bytes
    assert 0 < ttis[0] and now_tti - 500 <= ttis[-1] <= now_tti  # the old dropped, the latest kept
    clock = StackClock.from_file(arts["stack_clock_dl"])
    assert clock.first_tti > 0 and clock.ttis >= (BOUND_BYTES // 2 - 4096) // 8
    # every TTI of the log that the clock covers maps to the wall time the cell ran it, in order, about 1 ms apart
    covered = ttis[ttis >= clock.first_tti]
    wall = cell_clock({"tti": 0.0, "t_s": 0.0}, arts["stack_clock_dl"])(covered)
    # (the log keeps 1 to 2 segments, 744 to 1488 TTIs, by when it last rotated: 1000 failed a busy run once)
    assert covered.size >= segment_ttis // 2 and np.all(np.diff(wall) > 0)
    assert abs(float(np.median(np.diff(wall))) - 0.001) < 0.0002
    assert abs(wall[-1] - time.time()) < 5.0


def test_a_bound_too_small_for_a_segment_is_refused(monkeypatch):
    for bad in ("1000", "-5", "lots", "1e9"):
        monkeypatch.setenv(LOG_MAX_ENV, bad)
        with pytest.raises(InputError, match=LOG_MAX_ENV):
            lab_log_max_bytes()
    monkeypatch.setenv(LOG_MAX_ENV, "0")
    assert lab_log_max_bytes() == 0  # no bound, on request


def test_cell_log_stays_within_its_bound_and_a_collect_gets_its_latest_events_whole(vlab, monkeypatch, tmp_path):
    monkeypatch.setenv(LOG_MAX_ENV, str(BOUND_BYTES))
    lab = vlab(ues=1, rlf=True)  # with the RLF model every attenuation set is an event on the cell's stdout
    largest, sets = 0, 1500  # about 70 bytes an event: some 4.5 segments of 32 KiB
    with lab.control() as ctl:
        for i in range(sets):
            ctl.set_attenuation(0, i / 100)
            if i % 50 == 0:
                largest = max(largest, _size(lab.cell_log))
    largest = max(largest, _size(lab.cell_log))
    print(f"cell.log: largest on disk {largest} B after {sets} events (bound {BOUND_BYTES} B)")
    assert BOUND_BYTES // 2 < largest <= BOUND_BYTES and older(lab.cell_log).exists()

    from cellab.faults.recovery import read_cell_events

    arts = lab.collect(tmp_path)
    events = read_cell_events(arts["cell_log"])
    values = [round(e["attenuation_db"] * 100) for e in events if e["event"] == "attenuation"]
    assert values[-1] == sets - 1 and values == list(range(values[0], sets))  # the latest, none lost between segments
    assert len(values) * 70 >= BOUND_BYTES // 2 and values[0] > 0  # at least a segment's worth; the oldest dropped
