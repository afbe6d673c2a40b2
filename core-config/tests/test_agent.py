"""The core agent over the real bus (CURVE controller, DEALER agent), without daemons that need root:
contract conformance, refusals that name the field, per-run folders, and a program that is not installed."""

from __future__ import annotations

import pytest

from cellab.bus.errors import OperationError
from cellab.bus.testing import lab_bus
from cellab.contracts.core import CORE_CONTRACT, ConfigureParams, CoreClient, StartParams
from cellab.contracts.registry import agent_class
from cellab.epc.agent import CoreAgent

from .conftest import EXAMPLES


def test_registered_and_implements_the_contract():
    assert agent_class("core", "epc") is CoreAgent
    assert CORE_CONTRACT.missing_in(CoreAgent) == []


def test_configure_start_refusals_and_run_folders(tmp_path):
    profile = (EXAMPLES / "lab-core.yaml").read_text()
    programs = {"open5gs-hssd": "/nonexistent/open5gs-hssd"}
    with lab_bus(tmp_path, {"core1": CoreAgent}, agent_kwargs={"core1": {"programs": programs}}) as (ctl, agents):
        core = CoreClient(ctl, "core1", timeout_s=20)
        status = core.status()
        assert not status.ok and status.problems == ["not configured"]
        with pytest.raises(OperationError) as err:
            core.start(StartParams())
        assert "configure first" in str(err.value)

        with pytest.raises(OperationError) as err:
            core.configure(ConfigureParams(profile_yaml=profile.replace("tacs: [7]", "tacs: [70000]")))
        assert "profile_yaml" in str(err.value) and "tacs" in str(err.value)

        first = core.configure(ConfigureParams(profile_yaml=profile, flavour="open5gs-2.6"))
        second = core.configure(ConfigureParams(profile_yaml=profile))
        assert (first.run_dir, second.run_dir) == ("core-runs/001", "core-runs/002")
        assert second.flavour == "open5gs" and second.daemons == ["hss", "pcrf", "sgwc", "sgwu", "upf", "smf", "mme"]
        run = agents["core1"].artifact_dir / second.run_dir
        assert (run / "config/mme.yaml").is_file() and str(run / "logs") in (run / "config/mme.yaml").read_text()

        with pytest.raises(OperationError) as err:
            core.start(StartParams(daemons=["hss", "amf"]))
        assert "amf" in str(err.value) and err.value.field == "params.daemons"
        with pytest.raises(OperationError) as err:
            core.start(StartParams(daemons=["hss"]))
        assert "hss: program /nonexistent/open5gs-hssd is not installed" in str(err.value)
        status = core.status()
        assert not status.ok


def test_start_error_line_is_the_cause_not_the_teardown():
    from cellab.epc.daemons import classify, start_error_line

    log = ("NextEPC daemon v0.3.10\n\x1b[31m[11/25 08:34:32.966] FATL: Loading of extension x.so failed\x1b[0m\n"
           "[11/25 08:34:32.966] ERRR: ERROR: in '((fd_ext_load()))'\n[11/25 08:34:33.077] ERRR: 1 not freed\n")
    assert start_error_line(log) == "[11/25 08:34:32.966] FATL: Loading of extension x.so failed"
    assert start_error_line("a\nb: error: no config\nc\n") == "b: error: no config"
    assert start_error_line("only line\n") == "only line"
    assert classify("[HSS    ] [E] User not found at HSS. IMSI: 001010123456780") == "imsi_unknown"
    assert classify("WARN: Cannot find IMSI in DB : 001010999999999") == "imsi_unknown"
    assert classify("Sending S1 Setup Failure - Unknown PLMN") == "s1_setup_failure"
    assert classify("Network attach successful. IP: 172.16.0.2") == "attach_ok"
    assert classify("INFO: NextEPC daemon start") is None


def test_a_program_that_exits_at_start_is_reported_with_its_own_line(tmp_path):
    """`sleep -c CONF` (a real program refusing an option) stands in for a daemon that exits at start: the
    start error carries its own words, status keeps them, and telemetry says it exited."""
    import shutil
    import threading

    sleep = shutil.which("sleep")
    # one daemon: with two failing, which one the start sees dead first is the host's timing
    programs = {"open5gs-hssd": sleep}
    events: list[dict] = []
    seen = threading.Event()
    with lab_bus(tmp_path, {"core1": CoreAgent}, telemetry=True,
                 agent_kwargs={"core1": {"programs": programs}}) as (ctl, _agents):
        def on_event(agent: str, topic: str, data: dict) -> None:
            if topic == "core.event":
                events.append(data)
                seen.set()

        ctl.subscribe(on_event)
        core = CoreClient(ctl, "core1", timeout_s=20)
        core.configure(ConfigureParams(profile_yaml=(EXAMPLES / "lab-core.yaml").read_text()))
        with pytest.raises(OperationError) as err:
            core.start(StartParams(daemons=["hss"], settle_s=3))
        assert f"hss exited at start (code 1): {sleep}: invalid option -- 'c'" in str(err.value)
        status = core.status()
        hss = next(d for d in status.daemons if d.name == "hss")
        assert hss.exit_code == 1 and hss.error == f"{sleep}: invalid option -- 'c'" and not status.ok
        assert any(p.startswith("hss exited (code 1)") for p in status.problems)
        assert seen.wait(5) and events[0]["daemon"] == "hss" and events[0]["kind"] == "exited"


def test_kill_sigkills_one_named_daemon_and_start_brings_back_only_that_one(tmp_path, monkeypatch):
    """`kill` (a core_daemon fault's crash): refused before configure, for a name the flavour does not run
    (the allowed names listed) and for a daemon not running; else the daemon's own pid SIGKILLed and reaped, its
    state saying so; `start` then starts only what is not running; each step said as `core_daemon` telemetry (a
    fault's recovery reads it). A sleeping script stands in for the daemons."""
    import signal
    import threading

    from cellab.epc import agent as core_agent

    monkeypatch.setattr(core_agent, "PORT_WAIT_S", 0.1)  # the stand-ins listen nowhere
    standin = tmp_path / "standin"
    standin.write_text("#!/bin/sh\nexec sleep 60\n")
    standin.chmod(0o755)
    programs = {"open5gs-hssd": str(standin), "open5gs-pcrfd": str(standin)}
    said: list[tuple[str, str, int]] = []
    third = threading.Event()
    with lab_bus(tmp_path, {"core1": CoreAgent}, telemetry=True,
                 agent_kwargs={"core1": {"programs": programs}}) as (ctl, _agents):
        def on_sample(agent: str, topic: str, data: dict) -> None:
            if topic == "core_daemon" and data["daemon"] == "hss":
                said.append((data["state"], data["pid"]))
                if len(said) == 3:
                    third.set()

        ctl.subscribe(on_sample)
        core = CoreClient(ctl, "core1", timeout_s=20)
        with pytest.raises(OperationError, match="configure first"):
            core.kill("hss")
        core.configure(ConfigureParams(profile_yaml=(EXAMPLES / "lab-core.yaml").read_text()))
        before = {d.name: d.pid for d in core.start(StartParams(daemons=["hss", "pcrf"], settle_s=0.2)).daemons}
        with pytest.raises(OperationError) as err:
            core.kill("amf")
        assert err.value.field == "params.daemon" and "'amf'" in str(err.value), err.value
        assert err.value.allowed == ["hss", "pcrf", "sgwc", "sgwu", "upf", "smf", "mme"]
        with pytest.raises(OperationError) as err:
            core.kill("upf")
        assert "upf is not running" in str(err.value) and err.value.allowed == ["hss", "pcrf"], err.value

        killed = core.kill("hss")
        assert killed.pid == before["hss"] and killed.exit_code == -signal.SIGKILL, killed
        status = {d.name: d for d in core.status().daemons}
        assert not status["hss"].running and status["hss"].exit_code == -signal.SIGKILL
        assert status["hss"].error == core_agent.KILLED_LINE and status["pcrf"].running
        with pytest.raises(OperationError, match="hss is not running"):
            core.kill("hss")

        after = {d.name: d.pid for d in core.start(StartParams(daemons=["hss", "pcrf"], settle_s=0.2)).daemons}
        assert after["pcrf"] == before["pcrf"] and after["hss"] not in (None, before["hss"]), (before, after)
        assert third.wait(5), said  # the stand-ins listen nowhere: no `listening`
        assert said == [("started", before["hss"]), ("killed", before["hss"]), ("started", after["hss"])], said
        assert core.stop().daemons
