"""The player against the Mini-Circuits serial emulator: timing log, telemetry, failures → safe state."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
from cellab.attenuator.config import AttenuatorConfig
from cellab.attenuator.driver import create
from cellab.attenuator.emulators.minicircuits import MiniCircuitsDevice
from cellab.attenuator.emulators.servers import PtyServer
from cellab.attenuator.player import Player
from cellab.attenuator.schedule import parse_csv, parse_yaml

from cellab.errors import InputError


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_plays_on_absolute_deadlines_and_logs_everything(mc_serial_config: AttenuatorConfig, mc_device: MiniCircuitsDevice, tmp_path: Path) -> None:
    sched = parse_yaml("update_interval_s: 0.05\nsegments:\n  - {kind: ramp, from_db: 20, to_db: 30, duration_s: 0.5}\n", "r.yaml")
    published: list[tuple[str, dict]] = []
    drv = create(mc_serial_config)
    log = tmp_path / "att.jsonl"
    policy = os.sched_getscheduler(0)
    try:
        res = Player(drv, sched, log_path=log, publish=lambda t, d: published.append((t, d))).run()
    finally:
        drv.close()
    assert res.status == "completed", res.error
    # real-time priority while playing when the host allows it, and the calling thread's policy back after
    assert _lines(log)[0]["realtime"] == (os.geteuid() == 0)
    assert os.sched_getscheduler(0) == policy
    assert res.applied == res.planned == 11
    rows = [r for r in _lines(log) if "planned_s" in r]
    assert [r["planned_s"] for r in rows] == pytest.approx([0.05 * k for k in range(11)])
    assert [r["db"] for r in rows] == [20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30]
    assert all(r["readback_db"] == r["db"] for r in rows)
    # applied after planned, and not by much (loose bound: a shared 2-core machine; see bench.py)
    assert all(0 <= r["late_ms"] < 50 for r in rows)
    assert mc_device.att_db == [30.0]  # completed runs keep the last value
    assert len(published) == 11 and published[0][0] == "attenuation"
    assert _lines(log)[-1]["event"] == "end" and _lines(log)[-1]["status"] == "completed"


def test_csv_log_when_the_path_says_csv(mc_serial_config: AttenuatorConfig, tmp_path: Path) -> None:
    drv = create(mc_serial_config)
    try:
        res = Player(drv, parse_csv("t_s,channel,db\n0,1,40\n0.02,1,41\n", "s.csv"), log_path=tmp_path / "a.csv").run()
    finally:
        drv.close()
    assert res.status == "completed"
    text = (tmp_path / "a.csv").read_text().splitlines()
    assert text[0] == "planned_s,applied_s,late_ms,channel,db,readback_db,source"
    assert text[1].startswith("0.0,") and text[2].split(",")[4] == "41.0"


def test_schedule_outside_limits_never_reaches_the_device(mc_serial_config: AttenuatorConfig, mc_device: MiniCircuitsDevice) -> None:
    drv = create(mc_serial_config)
    try:
        with pytest.raises(InputError, match=r"s.csv: row 3.db: 120.0 dB"):
            Player(drv, parse_csv("t_s,channel,db\n0,1,40\n1,1,120\n", "s.csv"))
    finally:
        drv.close()
    assert mc_device.commands == []


def test_disconnect_during_playback_fails_run_keeps_log_and_ends_safe(mc_device: MiniCircuitsDevice, tmp_path: Path) -> None:
    link = str(tmp_path / "ttyATT")
    srv = [mc_device.serve_pty(link=link)]
    cfg = AttenuatorConfig(name="box", model="minicircuits-rcdat", transport="serial", address=link,
                           min_db=0, max_db=95, timeout_s=0.5, options={"safe_retry_s": 3.0})
    drv = create(cfg)
    rows = "\n".join(f"{0.05 * k:.2f},1,{20 + k}" for k in range(40))
    player = Player(drv, parse_csv("t_s,channel,db\n" + rows + "\n", "s.csv"), log_path=tmp_path / "log.jsonl")

    def unplug_and_replug() -> None:
        while player.applied < 5:
            time.sleep(0.005)
        srv[0].stop()  # cable pulled mid-run
        time.sleep(0.4)
        srv[0] = PtyServer(mc_device, link=link).start()  # back: the safe state must still be reached

    t = threading.Thread(target=unplug_and_replug)
    t.start()
    try:
        res = player.run()
    finally:
        t.join()
        drv.close()
        srv[0].stop()
    assert res.status == "failed"
    assert "closed" in res.error or "lost" in res.error or "cannot open" in res.error
    assert 5 <= res.applied < 40
    assert res.safe_state == {1: "ok"}
    assert mc_device.att_db == [95.0]  # safe value = max_db by default
    lines = _lines(tmp_path / "log.jsonl")
    assert len([r for r in lines if "planned_s" in r]) == res.applied  # what was applied is logged
    assert lines[-1]["status"] == "failed"


def test_device_refusal_mid_run_goes_safe(mc_serial_config: AttenuatorConfig, mc_device: MiniCircuitsDevice) -> None:
    real = mc_device.handle

    def faulty(cmd: str) -> str | None:
        return "0" if "SETATT=33" in cmd else real(cmd)

    mc_device.handle = faulty  # type: ignore[method-assign]
    drv = create(mc_serial_config)
    try:
        # 0.2 s apart: the player skips a value whose successor is already due, and a loaded host once made it skip 32
        res = Player(drv, parse_csv("t_s,channel,db\n0,1,31\n0.2,1,32\n0.4,1,33\n0.6,1,34\n", "s.csv")).run()
    finally:
        drv.close()
    assert res.status == "failed" and "reply 0" in res.error
    assert res.applied == 2
    assert mc_device.att_db == [100.0]


def test_stop_interrupts_a_long_hold(mc_serial_config: AttenuatorConfig) -> None:
    drv = create(mc_serial_config)
    try:
        player = Player(drv, parse_yaml("segments: [{kind: hold, db: 40, duration_s: 600}]\n", "h.yaml")).start()
        time.sleep(0.2)
        t0 = time.monotonic()
        player.stop()
        res = player.wait(5)
        assert res is not None and res.status == "stopped"
        assert time.monotonic() - t0 < 1.0
    finally:
        drv.close()


def test_a_slow_device_skips_stale_values_instead_of_falling_behind(mc_serial_config: AttenuatorConfig, mc_device: MiniCircuitsDevice) -> None:
    real = mc_device.handle

    def slow(cmd: str) -> str | None:
        if "SETATT" in cmd:
            time.sleep(0.05)  # 50 ms per set, schedule asks for one every 10 ms
        return real(cmd)

    mc_device.handle = slow  # type: ignore[method-assign]
    rows = "\n".join(f"{0.01 * k:.2f},1,{20 + k * 0.25}" for k in range(30))
    drv = create(mc_serial_config)
    try:
        res = Player(drv, parse_csv("t_s,channel,db\n" + rows + "\n", "s.csv")).run()
    finally:
        drv.close()
    assert res.status == "completed"
    assert res.skipped > 10 and res.applied + res.skipped == 30
    assert mc_device.att_db == [20 + 29 * 0.25]  # the last value is always applied
    assert res.max_late_ms < 150  # bounded by about one device round trip, not 30 of them
