"""Calibration fit and storage, and mobility replay of drive logs through a calibration."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
from cellab.attenuator.calibration import (
    Calibration,
    CalibrationError,
    CalibrationStore,
    SweepPoint,
    fit,
    sweep,
)
from cellab.attenuator.config import AttenuatorConfig
from cellab.attenuator.driver import create
from cellab.attenuator.emulators.minicircuits import MiniCircuitsDevice
from cellab.attenuator.mobility import (
    ANDROID_SIGNAL_LOG,
    DriveLogFormat,
    ReplayOptions,
    load_drive_log,
    parse_drive_log,
    replay,
    smooth,
)
from cellab.attenuator.schedule import SafetyLimits, check

from cellab.errors import InputError


def _synthetic_cal(a: float = -45.0, b: float = 1.0) -> Calibration:
    return Calibration(shield_box="box1", ue="pixel", earfcn=3350, a_dbm=a, b_db_per_db=b,
                       residual_rms_db=0, max_residual_db=0, min_db=0, max_db=95)


def test_fit_recovers_line_and_refuses_noise() -> None:
    rng = random.Random(7)
    pts = [SweepPoint(db=d, rsrp_dbm=-42.0 - 0.98 * d + rng.uniform(-0.3, 0.3), samples=3) for d in range(10, 80, 5)]
    cal = fit(pts, "box1", "pixel", 3350)
    assert cal.a_dbm == pytest.approx(-42.0, abs=0.5)
    assert cal.b_db_per_db == pytest.approx(0.98, abs=0.02)
    assert cal.residual_rms_db < 0.3
    noisy = [SweepPoint(db=d, rsrp_dbm=-42.0 - d + rng.uniform(-6, 6), samples=1) for d in range(10, 80, 5)]
    with pytest.raises(CalibrationError, match="residual RMS .* fit refused"):
        fit(noisy, "box1", "pixel", 3350)
    flat = [SweepPoint(db=d, rsrp_dbm=-80.0, samples=1) for d in range(10, 80, 5)]
    with pytest.raises(CalibrationError, match="slope"):
        fit(flat, "box1", "pixel", 3350)


def test_fit_drops_points_outside_the_ue_reporting_range() -> None:
    pts = [SweepPoint(db=d, rsrp_dbm=max(-40.0 - d, -140.0), samples=1) for d in range(0, 120, 10)]
    cal = fit(pts, "b", "u", 1)
    assert cal.excluded == 3  # 0 dB (-40 dBm, above the -44 ceiling), 100 and 110 dB (stuck at the -140 floor)
    assert cal.b_db_per_db == pytest.approx(1.0)


def test_store_round_trip_per_box_ue_earfcn(tmp_path: Path) -> None:
    store = CalibrationStore(tmp_path / "cal")
    cal = _synthetic_cal()
    path = store.save(cal)
    assert path.name == "box1__pixel__3350.json"
    assert store.load("box1", "pixel", 3350) == cal
    with pytest.raises(InputError, match="no calibration for box 'box1', UE 'pixel', EARFCN 1300"):
        store.load("box1", "pixel", 1300)


def test_sweep_through_the_serial_emulator(tmp_path: Path) -> None:
    dev = MiniCircuitsDevice()
    srv = dev.serve_pty(link=str(tmp_path / "tty"))
    drv = create(AttenuatorConfig(name="a", model="minicircuits-rcdat", transport="serial", address=srv.port,
                                  min_db=0, max_db=100, timeout_s=1.0))
    try:
        # the "UE" sees the attenuation the device really applied, through a 47 dB path loss
        pts = sweep(drv, 1, lambda: -47.0 - dev.att_db[0], 20, 60, 10, settle_s=0, samples=2, sample_interval_s=0)
    finally:
        drv.close()
        srv.stop()
    assert [p.db for p in pts] == [20, 30, 40, 50, 60]
    cal = fit(pts, "box", "ue", 100)
    assert (cal.a_dbm, cal.b_db_per_db, cal.residual_rms_db) == (-47.0, 1.0, 0.0)


def test_replay_of_synthetic_log_reproduces_expected_schedule_exactly(tmp_path: Path) -> None:
    log_path = tmp_path / "drive.csv"
    rows = [(0.0, -80.0), (1.0, -85.0), (2.0, -85.0), (3.0, -100.1), (4.0, -150.0), (5.0, -30.0), (6.0, -90.3)]
    log_path.write_text("time,rsrp\n" + "".join(f"{t},{r}\n" for t, r in rows) + "7.0,\n")
    log = load_drive_log(log_path, DriveLogFormat(time_column="time", rsrp_column="rsrp"))
    assert log.skipped == 1  # the empty RSRP
    rep = replay(log, _synthetic_cal(a=-45.0, b=1.0), ReplayOptions(channel=2, min_db=10, max_db=95, step_db=0.25))
    got = [(p.t_s, p.channel, p.db) for p in rep.schedule.points]
    # dB = -45 - RSRP; -150 → 105 clipped to 95; -30 → -15 clipped to 10; repeats dropped
    assert got == [(0.0, 2, 35.0), (1.0, 2, 40.0), (3.0, 2, 55.0), (4.0, 2, 95.0), (5.0, 2, 10.0), (6.0, 2, 45.25)]
    r = rep.report
    assert (r.samples, r.clipped, r.points) == (7, 2, 6)
    assert r.clipped_share == pytest.approx(2 / 7)
    # -100.1 → 55.1 → 55.0 dB gives -100.0: 0.1 dB off; -90.3 → 45.3 → 45.25 gives -90.25: 0.05 dB off
    assert r.quantization_error_max_abs_db == pytest.approx(0.1)
    assert r.quantization_error_mean_abs_db == pytest.approx(0.15 / 5)
    assert r.total_error_max_abs_db == pytest.approx(25.0)  # -30 dBm wanted, 10 dB floor gives -55 dBm
    # the schedule passes the lab's safety check as is
    check(rep.schedule, SafetyLimits(channels=[1, 2], min_db=10, max_db=95, step_db=0.25))


def test_smoothing_is_a_centred_moving_average() -> None:
    log = parse_drive_log("t_s,rsrp_dbm\n0,-80\n1,-90\n2,-100\n3,-90\n", DriveLogFormat(), "d.csv")
    sm = smooth(log.samples, 2.0)
    assert [s.rsrp_dbm for s in sm] == [-85.0, -90.0, pytest.approx(-280 / 3), -95.0]


def test_android_signal_log_jsonl_with_unavailable_values() -> None:
    lines = [{"time_ms": 1_700_000_000_000 + 500 * i, "rsrp_dbm": v} for i, v in enumerate([-90, 2147483647, -95])]
    log = parse_drive_log("\n".join(json.dumps(x) for x in lines), ANDROID_SIGNAL_LOG, "sig.jsonl")
    assert [(s.t_s, s.rsrp_dbm) for s in log.samples] == [(0.0, -90.0), (1.0, -95.0)]
    assert log.skipped == 1


def test_drive_log_errors_name_file_and_column() -> None:
    with pytest.raises(InputError, match=r"d.csv: header: no column 'rsrp_dbm' \(allowed: t_s, rsrp\)"):
        parse_drive_log("t_s,rsrp\n0,-80\n", DriveLogFormat(), "d.csv")
    with pytest.raises(InputError, match=r"d.csv: row 3.t_s: time goes back"):
        parse_drive_log("t_s,rsrp_dbm\n1,-80\n0,-80\n", DriveLogFormat(), "d.csv")
    iso = parse_drive_log("ts,rsrp_dbm\n2024-05-01T10:00:00Z,-80\n2024-05-01T10:00:02.5Z,-81\n",
                          DriveLogFormat(time_column="ts", time_unit="iso"), "d.csv")
    assert [s.t_s for s in iso.samples] == [0.0, 2.5]
    assert math.isclose(iso.samples[1].rsrp_dbm, -81)
