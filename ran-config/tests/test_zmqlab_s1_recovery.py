"""srsEPC or Open5GS's MME restarted under srsenb on srsran-zmq (issue 41), without srsRAN: srsenb's S1 events read
from its log lines; the lab's recovery on a stand-in lab (core agent, srsenb's S1 events and srsue's console played
by the test): S1's return taken from srsenb's own log time, a UE that attaches by itself left alone, a UE that does
not brought back by restarting srsenb (named in the events), and a srsenb that never sets S1 up again failing the
run naming it. The real stack: test_zmqlab_mme_restart.py."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from cellab.ran import zmqlab_s1_recovery
from cellab.ran.report import PhyLogTail
from cellab.ran.s1_events import parse_s1_line
from cellab.ran.srsenb_proc import with_log_level
from cellab.ran.srsue_proc import ConsoleTail
from cellab.ran.zmqlab_s1_recovery import s1_events_since

from cellab.faults.spec import FaultStep

from .test_zmqlab_core_daemons import CoreLab

# srsenb 23.04's log lines around an MME restart (the shape of its S1AP lines at info level)
ENB_LOG = """2026-11-28T22:10:01.100000 [PHY0   ] [I] [    5] PUCCH: cc=0; rnti=0x46, f=1a, n_pucch=0, dmrs_corr=0.9, sr=no
2026-11-28T22:10:03.411743 [S1AP   ] [I] SCTP Association Shutdown. Association: 1
2026-11-28T22:10:03.411800 [S1AP   ] [I] Restarting S1 connection
2026-11-28T22:10:03.512000 [S1AP   ] [I] Proc "MME Connection" - Failed to initiate S1 connection. Attempting \
reconnection in 10 seconds
2026-11-28T22:10:16.730001 [S1AP   ] [I] Proc "MME Connection" - S1Setup procedure completed successfully
"""
T0 = 1795903800.0  # 2026-11-28T22:10:00 UTC


def test_srsenbs_s1_lines_are_read_with_their_own_utc_time():
    events = [e for e in map(parse_s1_line, ENB_LOG.splitlines()) if e is not None]
    assert [e["event"] for e in events] == ["s1_lost", "s1_connect_failed", "s1_setup"]
    assert [round(e["t_s"] - T0, 3) for e in events] == [3.412, 3.512, 16.73]
    assert parse_s1_line("S1Setup procedure completed successfully") is None  # no stamp: not srsenb's log line


def test_the_enb_agents_log_tail_keeps_s1_events_beside_the_sr_occasions(tmp_path):
    log = tmp_path / "enb.log"
    log.write_text(ENB_LOG[:400])  # cut inside a line: the rest comes with the next read
    tail = PhyLogTail(log)
    tail.read_new()
    with open(log, "a") as out:
        out.write(ENB_LOG[400:])
    tail.read_new()
    assert [e["event"] for e in tail.take_s1_events()] == ["s1_lost", "s1_connect_failed", "s1_setup"]
    assert tail.take_s1_events() == []


def test_the_agents_enb_conf_logs_s1ap_at_info_and_keeps_the_other_levels():
    conf = with_log_level("[enb]\nn_prb = 25\n[log]\nall_level = warning\ns1ap_level = error\n[rf]\n", "s1ap_level",
                          "info")
    assert "[log]\nall_level = warning\ns1ap_level = info\n[rf]" in conf and conf.count("s1ap_level") == 1
    with pytest.raises(ValueError, match="not a srsenb log level"):
        with_log_level(conf, "s1ap_level", "info\nall_level = none")


def test_s1_event_rows_since_a_time_and_attach_lines_are_counted(tmp_path):
    text = '{"event": "s1_setup", "t_s": 5.0}\n{"event": "s1_lost", "t_s": 2.0}\n{"event": "s1_se'
    assert s1_events_since(text, 1.0) == [{"event": "s1_lost", "t_s": 2.0}, {"event": "s1_setup", "t_s": 5.0}]
    assert s1_events_since(text, 3.0) == [{"event": "s1_setup", "t_s": 5.0}]
    console = tmp_path / "srsue_console.log"
    console.write_text("Network attach successful. IP: 172.16.0.2\nRRC Connected\n"
                       "Random Access Complete.     c-rnti=0x47, ta=0\nNetwork attach successful. IP: 172.16.0.3\n")
    tail = ConsoleTail(console).poll()
    assert (tail.attaches, tail.ip, tail.rnti) == (2, "172.16.0.3", "47")


class Ue:
    def __init__(self, index: int):
        self.index, self.text = index, "Network attach successful. IP: 172.16.0.2\n"

    def console_text(self) -> str:
        return self.text

    def attach_count(self) -> int:
        return self.text.count("Network attach successful")


class RecoveryLab(CoreLab):
    """A stand-in lab whose srsenb logs `s1_log` (t_s, event) and whose UEs attach when `attach_on` says so:
    "self" (by themselves once S1 is back), "enb_restart" (after srsenb's restart), or never (None)."""

    def __init__(self, flavour: str, attach_on: str | None, state_dir: Path, s1_back_after_s: float | None = 0.3):
        super().__init__(flavour)
        self.state_dir = state_dir
        self._ues = [Ue(0)]
        self.attach_on, self.s1_back_after_s = attach_on, s1_back_after_s
        self.killed_pids: list[int] = []

    def s1_events(self, since_s: float) -> list[dict[str, Any]]:
        events = [{"event": "s1_lost", "t_s": self._core_killed_at + 0.05}]
        if self.s1_back_after_s is not None and time.time() >= self._core_killed_at + self.s1_back_after_s:
            events.append({"event": "s1_setup", "t_s": self._core_killed_at + self.s1_back_after_s})
            if self.attach_on == "self":
                self._ues[0].text += "Network attach successful. IP: 172.16.0.2\n"
                self.attach_on = "done"
        return [e for e in events if e["t_s"] >= since_s]

    def timing_faults(self) -> dict[str, Any]:
        return {}  # no broker: the waits are taken at real time

    def _kill_srsenb(self) -> int:
        self.killed_pids.append(self.enb.pid)
        self.enb.state = "stopped"
        if self.attach_on == "enb_restart":
            self._ues[0].text += "Network attach successful. IP: 172.16.0.2\n"
        return self.enb.pid

    def _path_back(self, index: int) -> bool:
        self.note_event({"event": "ue_reaches_server", "ue": index})
        return True


@pytest.fixture(autouse=True)
def _short_waits(monkeypatch):
    monkeypatch.setattr(zmqlab_s1_recovery, "UE_SELF_WAIT_STACK_S", 0.6)  # the stand-in's stack at real time
    monkeypatch.setattr(zmqlab_s1_recovery, "UE_ATTACH_WAIT_STACK_S", 0.6)
    monkeypatch.setattr(zmqlab_s1_recovery, "S1_BACK_TIMEOUT_S", 1.5)


def _restart(lab: RecoveryLab, daemon: str) -> dict[str, Any]:
    lab.inject_fault(FaultStep(kind="core_daemon", active=True, daemon=daemon))
    lab.inject_fault(FaultStep(kind="core_daemon", active=False, daemon=daemon))
    return lab.fault_state()


@pytest.mark.parametrize(("flavour", "daemon"), [("srsepc", "srsepc"), ("open5gs", "mme")])
def test_s1_comes_back_at_srsenbs_own_time_and_a_ue_that_attaches_by_itself_restarts_nothing(flavour, daemon, tmp_path):
    lab = RecoveryLab(flavour, attach_on="self", state_dir=tmp_path)
    state = _restart(lab, daemon)
    assert state["s1_up"] is True and "s1_down_why" not in state, state
    recovery = state["s1_recovery"]
    assert recovery["done"] and recovery["attached_by_itself"] == [0] and "restarted" not in recovery, recovery
    assert recovery["s1_setup_at"] == pytest.approx(lab._core_killed_at + 0.3)
    assert [e["event"] for e in lab.events] == ["core_down", "core_up", "s1_lost", "s1_setup", "ue_attached",
                                                "ue_reaches_server"]
    setup = next(e for e in lab.events if e["event"] == "s1_setup")
    assert setup["t_s"] == recovery["s1_setup_at"] and setup["source"] == "srsenb log"  # the log's time, not ours
    assert lab.killed_pids == [] and lab.lost_ues_fault() is None


def test_a_ue_that_does_not_attach_by_itself_is_brought_back_by_restarting_srsenb_named_in_the_events(tmp_path):
    lab = RecoveryLab("srsepc", attach_on="enb_restart", state_dir=tmp_path)
    state = _restart(lab, "srsepc")
    recovery = state["s1_recovery"]
    assert state["s1_up"] is True and recovery["attached_by_itself"] == [] and recovery["attached"] == [0], state
    (restarted,) = recovery["restarts"]  # one was enough
    assert restarted["restarted"] == ["srsenb"] and "UE 0 did not attach by itself" in restarted["why"], recovery
    assert lab.killed_pids == [4242] and lab.enb.configured == ["the run's srsenb configuration"]
    assert lab._enb_restarts == lab.enb.restarts  # the lab's own restart is no crash of the run
    ((since, until, why),) = lab.stack_clock_excused()  # the stack's own stalls while no UE had a connection
    assert since == lab._core_killed_at and until == pytest.approx(recovery["attached_at"][0] + 0.5)
    assert "no UE connected from its kill to the UEs' fresh attach" in why, why
    restart = next(e for e in lab.events if e["event"] == "radio_restart")
    assert restart["restarted"] == ["srsenb"] and "Service Reject" in restart["why"], restart
    names = [e["event"] for e in lab.events]
    assert names.index("s1_setup") < names.index("radio_restart") < names.index("ue_attached"), names


def test_a_ue_never_back_is_named_and_the_next_configure_restarts_the_stack(tmp_path):
    lab = RecoveryLab("open5gs", attach_on=None, state_dir=tmp_path)
    state = _restart(lab, "mme")
    recovery = state["s1_recovery"]
    assert state["s1_up"] is True and recovery["attached"] == [], state
    assert [r["why"] for r in recovery["restarts"]] == [  # srsenb restarted twice, then the UE named
        "UE 0 did not attach by itself within 0.6 stack s of S1's return (srsue's attach after the Service Reject, "
        "on its RRC connection over ZMQ)", "UE 0 did not attach within 0.6 stack s of srsenb's restart"], recovery
    assert recovery["not_attached_console"] == {0: ["Network attach successful. IP: 172.16.0.2"]}
    assert lab.stack_clock_excused() == []  # no UE back: every stall of the run is judged
    lab.reaching = {"0": False}
    assert lab.lost_ues_fault() == ("UE 0 did not come back: no ping to the server (mme was restarted under the "
                                    "running UEs (core_daemon fault))")


def test_srsenb_that_never_sets_s1_up_again_leaves_s1_down_naming_the_mme_and_the_wait(tmp_path):
    lab = RecoveryLab("open5gs", attach_on="self", state_dir=tmp_path, s1_back_after_s=None)
    state = _restart(lab, "mme")
    assert state["s1_up"] is False, state
    assert state["s1_down_why"] == ("mme was restarted under the running srsenb (core_daemon fault): srsenb set S1 "
                                    "up with no MME within 1.5 s of the kill"), state
    assert "ue_attached" not in [e["event"] for e in lab.events] and lab.killed_pids == []
    lab.s1_restored()  # the stack restarted
    assert "s1_recovery" not in lab.fault_state() and lab.s1_lost_reason() is None


def test_the_recovery_runs_on_its_own_thread_so_the_faults_end_is_the_mmes_start(tmp_path):
    lab = RecoveryLab("srsepc", attach_on="self", state_dir=tmp_path, s1_back_after_s=0.8)
    lab.inject_fault(FaultStep(kind="core_daemon", active=True, daemon="srsepc"))
    began = time.monotonic()
    lab.inject_fault(FaultStep(kind="core_daemon", active=False, daemon="srsepc"))
    assert time.monotonic() - began < 0.3 and lab._recovery_log["done"] is False
    assert lab.fault_state()["s1_recovery"]["done"] is True  # fault_state waits for it


def test_the_waits_count_the_stacks_own_time_from_the_brokers_clock_file(tmp_path):
    """10 stack s are 10000 TTIs of the broker's clock (one buffered chunk more), however long the wall took."""
    lab = RecoveryLab("srsepc", attach_on=None, state_dir=tmp_path)
    folder = tmp_path / "broker" / "clock"
    folder.mkdir(parents=True)
    clock = folder / "stack-clock-dl.bin"
    clock.write_bytes(b'{"format": "cellab-stack-clock"}\n' + bytes(8 * 500))
    expired = lab._after_stack_s(1.0)
    assert lab._stack_ttis() == 500 and not expired()
    with open(clock, "ab") as out:
        out.write(bytes(8 * (1000 + 4095)))
    assert not expired()  # one TTI short of 1 stack s and a chunk
    with open(clock, "ab") as out:
        out.write(bytes(8))
    assert expired()
    clock.write_bytes(b'{"format": "cellab-stack-clock"')  # a header still being written: no clock yet
    assert lab._stack_ttis() is None


def test_the_lab_going_down_stops_a_recovery_still_waiting(tmp_path, monkeypatch):
    monkeypatch.setattr(zmqlab_s1_recovery, "S1_BACK_TIMEOUT_S", 60.0)
    lab = RecoveryLab("srsepc", attach_on=None, state_dir=tmp_path, s1_back_after_s=None)
    lab.inject_fault(FaultStep(kind="core_daemon", active=True, daemon="srsepc"))
    lab.inject_fault(FaultStep(kind="core_daemon", active=False, daemon="srsepc"))
    began = time.monotonic()
    lab.stop_s1_recovery()
    assert time.monotonic() - began < 2.0 and lab._recovery_log["done"] is True and lab._recovery is None
    assert lab.killed_pids == []  # nothing restarted on the way down
