"""The eNB agent over the bus: against a stand-in srsenb (report, telemetry, ground truth, stdin, errors) and
against the real srsenb of ../shared/tools/srsran (start, restart only when needed, crash, safe state)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from cellab.bus.errors import OperationError
from cellab.bus.testing import lab_bus
from cellab.contracts.enb import ConfigureParams, EnbClient, RadioOverrides
from cellab.ran.agent import EnbAgent

ROOM = Path(__file__).resolve().parents[1]
PROFILE = (ROOM / "examples/zmq-25prb.yaml").read_text()


def _wait(cond, timeout_s: float = 10.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


def test_fake_srsenb_telemetry_ground_truth_stdin(tmp_path: Path, fake_srsenb: Path):
    got: list[tuple[str, dict]] = []
    with lab_bus(tmp_path, {"enb1": EnbAgent}, telemetry=True,
                 agent_kwargs={"enb1": {"srsenb_bin": fake_srsenb, "report_poll_s": 0.1}}) as (ctl, agents):
        ctl.subscribe(lambda agent, topic, data: got.append((topic, data)))
        enb = EnbClient(ctl, "enb1")
        result = enb.configure(ConfigureParams(profile_yaml=PROFILE, profile_name="zmq-25prb.yaml",
                                               overrides=RadioOverrides(sr_period_ms=40)))
        assert result.restarted and result.state == "running"
        assert sorted(result.rendered) == ["config/enb.conf", "config/rb.conf", "config/rr.conf", "config/sib.conf"]
        status = _wait(lambda: (s := enb.status()).ground_truth and s.last_metrics and s)
        assert (status.ground_truth.sr_period_ms, status.ground_truth.sr_config_index,
                status.ground_truth.source) == (40, 35, "rrc")
        assert status.connected_rntis == [70] and status.sr_period_ms == 40
        assert enb.cell_gain(1, -12.5).ok
        with pytest.raises(OperationError, match="no cell 4"):
            enb.cell_gain(4, -3)
        _wait(lambda: any(t == "ue_metrics" for t, _ in got) and any(t == "sr_ground_truth" for t, _ in got))
        artifacts = agents["enb1"].artifact_dir
        _wait(lambda: "stdin: cell_gain 1 -12.5" in (artifacts / "srsenb_console.log").read_text())
        lines = [json.loads(x) for x in (artifacts / "enb_metrics.jsonl").read_text().splitlines()]
        assert lines and all(x["rnti"] == 70 and x["dl_cqi"] == 15.0 for x in lines)
        assert enb.safe_state().stopped
        assert enb.status().state == "stopped"


def test_srsenb_config_error_reports_its_line(tmp_path: Path, fake_srsenb: Path, monkeypatch):
    monkeypatch.setenv("FAKE_SRSENB_ERROR", "Error parsing RB configuration")
    with lab_bus(tmp_path, {"enb1": EnbAgent}, agent_kwargs={"enb1": {"srsenb_bin": fake_srsenb}}) as (ctl, _):
        with pytest.raises(OperationError, match="Error parsing RB configuration"):
            EnbClient(ctl, "enb1").configure(ConfigureParams(profile_yaml=PROFILE))


def test_missing_binary_names_the_paths_searched(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("CELLAB_SRSRAN_BIN", raising=False)
    with lab_bus(tmp_path, {"enb1": EnbAgent}, agent_kwargs={"enb1": {"srsenb_bin": "/opt/none/srsenb"}}) as (ctl, _):
        with pytest.raises(OperationError) as info:
            EnbClient(ctl, "enb1").configure(ConfigureParams(profile_yaml=PROFILE))
    assert "srsenb not found" in str(info.value) and "/opt/none/srsenb" in str(info.value)
    assert str(tmp_path / "empty") in str(info.value)


def test_bad_profile_value_is_refused_naming_field(tmp_path: Path, fake_srsenb: Path):
    with lab_bus(tmp_path, {"enb1": EnbAgent}, agent_kwargs={"enb1": {"srsenb_bin": fake_srsenb}}) as (ctl, _):
        with pytest.raises(OperationError) as info:
            EnbClient(ctl, "enb1").configure(ConfigureParams(profile_yaml=PROFILE.replace("period_ms: 20", "period_ms: 7"),
                                                             profile_name="mine.yaml"))
    assert "mine.yaml" in str(info.value) and "sr.period_ms" in str(info.value) and "5, 10, 20, 40, 80" in str(info.value)


def test_real_srsenb_restart_only_when_needed_crash_and_recover(tmp_path: Path, srsenb_bin: Path, srsran_lock):
    with lab_bus(tmp_path, {"enb1": EnbAgent}, agent_kwargs={"enb1": {"srsenb_bin": srsenb_bin}}) as (ctl, _):
        enb = EnbClient(ctl, "enb1", timeout_s=30)
        first = enb.configure(ConfigureParams(profile_yaml=PROFILE))
        assert first.restarted and first.state == "running" and first.restart_reasons == ["first start"]
        same = enb.configure(ConfigureParams(profile_yaml=PROFILE))
        assert not same.restarted and same.pid == first.pid
        changed = enb.configure(ConfigureParams(profile_yaml=PROFILE, overrides=RadioOverrides(sr_period_ms=10)))
        assert changed.restarted and changed.pid != first.pid
        assert changed.restart_reasons == ["SR period 20 -> 10 ms"]
        assert enb.cell_gain(1, -10).ok  # srsenb takes `cell_gain 1 -10` on stdin without exiting
        time.sleep(0.5)
        assert enb.status().state == "running"
        os.kill(changed.pid, signal.SIGKILL)
        status = _wait(lambda: (s := enb.status()).state == "crashed" and s)
        assert status.exit_code == -signal.SIGKILL
        again = enb.configure(ConfigureParams(profile_yaml=PROFILE, overrides=RadioOverrides(sr_period_ms=10)))
        assert again.restarted and "SIGKILL" in again.restart_reasons[0] and again.state == "running"
        assert enb.status().restarts == 3
        assert enb.safe_state().stopped
