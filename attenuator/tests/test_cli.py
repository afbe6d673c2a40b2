"""`cellab atten` sub-commands against emulators."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from cellab.attenuator.calibration import Calibration
from cellab.attenuator.cli import atten_app
from cellab.attenuator.config import load_config
from cellab.attenuator.emulators.minicircuits import MiniCircuitsDevice
from typer.testing import CliRunner

from cellab.errors import InputErrors

runner = CliRunner()


def _write_config(tmp_path: Path, address: str, **kw: Any) -> Path:
    entry = {"name": "box1", "model": "minicircuits-rcdat", "transport": "serial", "address": address,
             "min_db": 10, "max_db": 100, "timeout_s": 1.0, **kw}
    path = tmp_path / "atten.yaml"
    path.write_text(yaml.safe_dump({"attenuators": [entry]}))
    return path


def test_set_get_info_play(tmp_path: Path) -> None:
    dev = MiniCircuitsDevice()
    srv = dev.serve_pty(link=str(tmp_path / "tty"))
    try:
        cfg = _write_config(tmp_path, srv.port)
        r = runner.invoke(atten_app, ["set", str(cfg), "1", "33.3"])
        assert r.exit_code == 0, r.output
        assert "33.25 dB" in r.output and dev.att_db == [33.25]
        r = runner.invoke(atten_app, ["info", str(cfg)])
        assert '"RCDAT-6000-110"' in r.output
        sched = tmp_path / "s.csv"
        sched.write_text("t_s,channel,db\n0,1,20\n0.05,1,30\n")
        r = runner.invoke(atten_app, ["play", str(sched), "--config", str(cfg), "--log", str(tmp_path / "l.jsonl")])
        assert r.exit_code == 0, r.output
        assert dev.att_db == [30.0]
        bad = tmp_path / "bad.csv"
        bad.write_text("t_s,channel,db\n0,1,20\n1,1,5\n")
        r = runner.invoke(atten_app, ["check", str(bad), "--config", str(cfg)])
        assert r.exit_code != 0 and "row 3.db" in str(r.exception)
    finally:
        srv.stop()


def test_config_errors_name_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "a.yaml"
    path.write_text(yaml.safe_dump({"attenuators": [{"name": "x", "model": "minicircuits-rcdat", "transport": "visa",
                                                     "max_db": 90}]}))
    try:
        load_config(path)
        raise AssertionError("accepted a bad config")
    except InputErrors as exc:
        text = str(exc)
        assert str(path) in text and "attenuators[0]" in text and "allowed: serial, usb-hid, http, telnet" in text
    path.write_text(yaml.safe_dump({"name": "x", "model": "acme", "transport": "serial", "max_db": 90}))
    try:
        load_config(path)
        raise AssertionError("accepted a bad model")
    except InputErrors as exc:
        assert "model" in str(exc) and "minicircuits-rcdat" in str(exc)


def test_replay_writes_schedule_and_report(tmp_path: Path) -> None:
    cal = Calibration(shield_box="b", ue="u", earfcn=1, a_dbm=-45, b_db_per_db=1, residual_rms_db=0,
                      max_residual_db=0, min_db=0, max_db=95)
    (tmp_path / "cal.json").write_text(cal.model_dump_json())
    (tmp_path / "drive.csv").write_text("t_s,rsrp_dbm\n0,-80\n1,-90\n2,-200.5\n")
    out = tmp_path / "sched.csv"
    r = runner.invoke(atten_app, ["replay", str(tmp_path / "drive.csv"), "--calibration", str(tmp_path / "cal.json"),
                                  "--out", str(out), "--min-db", "10", "--max-db", "95"])
    assert r.exit_code == 0, r.output
    assert out.read_text() == "t_s,channel,db\n0,1,35\n1,1,45\n"
    report = json.loads(r.output)
    assert report["samples"] == 2 and report["skipped"] == 1
