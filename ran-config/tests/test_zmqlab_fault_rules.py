"""The srsran-zmq lab's own faults without root (zmqlab_faults): the policy rules an S1 cut adds and removes, the
local table moved behind them, the S1-U ends read from the profiles the lab renders from, the rules read back
from `ip -j rule show`, core_daemon's refusals, and an eNB restart through a stand-in eNB agent (the kill
recorded, not sent). The `ip` calls are recorded by a stand-in lab, not run."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from cellab.ran import zmqlab_faults
from cellab.ran.zmqlab import SrsranZmqLab
from cellab.ran.zmqlab_faults import (
    CUT_PREF,
    LOCAL_PREF,
    StackFaults,
    cut_rule_argv,
    cut_rules_in,
    local_table_argvs,
    s1u_addresses,
)
from cellab.ran.zmqlab_params import CORE_PROFILES, ENB_PROFILE

from cellab.campaign.load import load_campaign
from cellab.errors import CellabError, InputError, InputErrors
from cellab.faults.spec import FaultStep

# `ip -j rule show` (iproute2 6.1) in a core namespace with the local table moved and one S1 cut in place
RULES_CUT = json.dumps([
    {"priority": 50, "src": "all", "dst": "127.0.1.1", "ipproto": "udp", "dport": 2152, "action": "blackhole"},
    {"priority": 50, "src": "all", "dst": "127.0.1.100", "ipproto": "udp", "dport": 2152, "action": "blackhole"},
    {"priority": 100, "src": "all", "table": "local"},
    {"priority": 32766, "src": "all", "table": "main"},
    {"priority": 32767, "src": "all", "table": "default"}])
RULES_CLEAN = json.dumps(json.loads(RULES_CUT)[2:])
LINK_UP = "7: srv0@if6: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP\\    link/ether 0a:..."


def test_the_cut_rules_discard_gtpu_to_each_end_before_the_local_table():
    assert cut_rule_argv("add", "127.0.1.100") == ["ip", "rule", "add", "pref", "50", "to", "127.0.1.100", "ipproto",
                                                   "udp", "dport", "2152", "blackhole"]
    assert cut_rule_argv("del", "127.0.1.1")[:3] == ["ip", "rule", "del"]
    with pytest.raises(ValueError, match="add or del"):
        cut_rule_argv("flush", "127.0.1.1")
    # the local table's rule is added at its new place before the one at 0 goes: never a moment without it
    assert local_table_argvs() == [["ip", "rule", "add", "pref", str(LOCAL_PREF), "table", "local"],
                                   ["ip", "rule", "del", "pref", "0"]]
    assert CUT_PREF < LOCAL_PREF


@pytest.mark.parametrize("core", sorted(CORE_PROFILES))
def test_s1u_runs_between_srsenbs_gtp_address_and_the_cores(core):
    assert s1u_addresses(ENB_PROFILE.read_text(), CORE_PROFILES[core].read_text()) == ["127.0.1.1", "127.0.1.100"]


def test_the_cut_rules_are_read_back_from_ip_json():
    assert cut_rules_in(RULES_CUT) == ["127.0.1.1", "127.0.1.100"]
    assert cut_rules_in(RULES_CLEAN) == [] and cut_rules_in("") == []
    # a blackhole at another preference is not the cut's
    assert cut_rules_in(json.dumps([{"priority": 7, "dst": "127.0.1.1", "action": "blackhole"}])) == []


class Radio:
    """UeRadio's part of the state: srsue's RRC state."""

    def fault_state(self) -> dict[str, Any]:
        return {"rrc_state": {"0": "connected"}}


class FakeEnb:
    """The eNB agent's typed client: srsenb's state, its pid and starts; configure starts it when not running."""

    def __init__(self):
        self.state, self.pid, self.restarts = "running", 4242, 1
        self.configured: list[Any] = []
        self.gains: list[tuple[int, float]] = []

    def status(self):
        return SimpleNamespace(state=self.state, pid=self.pid, restarts=self.restarts)

    def configure(self, params):
        self.configured.append(params)
        restarted = self.state != "running"
        if restarted:
            self.state, self.pid, self.restarts = "running", self.pid + 1, self.restarts + 1
        return SimpleNamespace(restarted=restarted, restart_reasons=["srsenb was not running: killed by SIGKILL"]
                               if restarted else [], pid=self.pid)

    def cell_gain(self, cell_id: int, gain_db: float):
        self.gains.append((cell_id, gain_db))


class FakeLab(StackFaults, Radio):
    """The mixin on a stand-in lab with one UE: `ip` calls recorded and answered from `rules`."""

    core_ns = "zz-core"

    def __init__(self, flavour: str = "srsepc"):
        self.core_flavour = flavour
        self._ues = [SimpleNamespace(index=0)]
        self.calls: list[list[str]] = []
        self.events: list[dict[str, Any]] = []
        self.rules = RULES_CLEAN
        self.enb = FakeEnb()
        self._enb_params = "the run's srsenb configuration"
        self._enb_restarts = 1
        self._cell_att_db = 5.0

    def _enb(self) -> FakeEnb:
        return self.enb

    def renew_cell_gain(self) -> None:
        self.enb.cell_gain(1, -self._cell_att_db)

    def _ip(self, argv: list[str], what: str) -> str:
        self.calls.append(argv)
        if argv[:3] == ["ip", "rule", "add"] and "blackhole" in argv:
            rules = json.loads(self.rules)
            self.rules = json.dumps([{"priority": CUT_PREF, "dst": argv[6], "action": "blackhole"}, *rules])
        elif argv[:3] == ["ip", "rule", "del"] and "blackhole" in argv:
            self.rules = json.dumps([r for r in json.loads(self.rules) if r.get("dst") != argv[6]])
        return {"show": self.rules}.get(argv[-1], LINK_UP if "link" in argv else "")

    def note_event(self, event: dict[str, Any]) -> None:
        self.events.append(event)

    def ues_reaching_server(self) -> dict[str, bool]:
        return {"0": True}


def test_an_s1_cut_adds_both_rules_and_its_end_removes_them_and_the_state_says_so():
    lab = FakeLab()
    reply = lab.inject_fault(FaultStep(kind="s1_cut", active=True))
    assert reply | {"ip_s": []} == {"ok": True, "s1_up": False, "cut_udp_2152_to": ["127.0.1.1", "127.0.1.100"],
                                   "ip_s": []} and len(reply["ip_s"]) == 2
    assert [c for c in lab.calls if "blackhole" in c] == [cut_rule_argv("add", "127.0.1.1"),
                                                          cut_rule_argv("add", "127.0.1.100")]
    lab.calls.clear()
    assert lab.inject_fault(FaultStep(kind="s1_cut", active=False))["s1_up"] is True
    assert [c for c in lab.calls if "blackhole" in c] == [cut_rule_argv("del", "127.0.1.1"),
                                                          cut_rule_argv("del", "127.0.1.100")]
    # an end with nothing in place removes nothing (the start failed, or finish() ends it again)
    lab.calls.clear()
    lab.inject_fault(FaultStep(kind="s1_cut", active=False))
    assert not [c for c in lab.calls if "blackhole" in c]
    assert [e["event"] for e in lab.events] == ["s1_down", "s1_up", "s1_up"]
    assert lab.fault_state() == {"rrc_state": {"0": "connected"}, "sgi_up": True, "s1_cut_rules": [], "s1_up": True,
                                 "ue_reaches_server": {"0": True}}


def test_the_state_reports_rules_left_in_place_as_s1_down():
    lab = FakeLab()
    lab.rules = RULES_CUT
    state = lab.fault_state()
    assert state["s1_up"] is False and state["s1_cut_rules"] == ["127.0.1.1", "127.0.1.100"], state


@pytest.mark.parametrize("daemon", ["mme", "sgw", "upf", "hss"])
def test_core_daemon_names_srsepc_only_on_this_lab(daemon):
    with pytest.raises(InputError) as err:
        FakeLab().inject_fault(FaultStep(kind="core_daemon", active=True, daemon=daemon))
    assert err.value.field == "daemon" and err.value.allowed == ["srsepc"] and repr(daemon) in str(err.value)


def test_core_daemon_srsepc_needs_the_srsepc_core():
    with pytest.raises(InputError, match="this run's core is open5gs"):
        FakeLab("open5gs").inject_fault(FaultStep(kind="core_daemon", active=True, daemon="srsepc"))


def test_the_lab_names_the_faults_it_injects_and_refuses_the_others():
    assert SrsranZmqLab.fault_kinds == {"radio_outage", "sgi_cut", "s1_cut", "core_daemon", "enb_restart"}
    with pytest.raises(CellabError, match="its own: sgi_cut, s1_cut, core_daemon, enb_restart"):
        FakeLab().inject_fault(FaultStep(kind="ue_pause", active=True))


def _kill_recorded(monkeypatch, comm: str = "srsenb") -> list[tuple[int, int]]:
    killed: list[tuple[int, int]] = []
    monkeypatch.setattr(zmqlab_faults, "_comm", lambda pid: comm)
    monkeypatch.setattr(zmqlab_faults.os, "kill", lambda pid, sig: killed.append((pid, sig)))
    return killed


def test_an_enb_restart_kills_the_agents_srsenb_and_its_end_starts_it_again_with_the_runs_configuration(monkeypatch):
    lab = FakeLab()
    killed = _kill_recorded(monkeypatch)
    lab.enb.status = lambda: SimpleNamespace(state="crashed" if killed else "running", pid=4242, restarts=1)
    reply = lab.inject_fault(FaultStep(kind="enb_restart", active=True))
    assert reply == {"ok": True, "killed_pid": 4242} and killed == [(4242, zmqlab_faults.signal.SIGKILL)]
    assert "srsenb was restarted" in (lab.enb_restart_reason() or "")
    del lab.enb.status  # the stand-in's own again
    lab.enb.state = "crashed"
    reply = lab.inject_fault(FaultStep(kind="enb_restart", active=False))
    assert reply["restarted"] is True and reply["pid"] == 4243 and "SIGKILL" in reply["restart_reasons"][0], reply
    assert lab.enb.configured == ["the run's srsenb configuration"]
    assert lab._enb_restarts == 2  # the fault's start of srsenb is not a crash of the run
    assert lab.enb.gains == [(1, -5.0)]  # the new srsenb gets the run's cell gain again
    assert [e["event"] for e in lab.events] == ["enb_down", "enb_up"]


def test_an_enb_restart_kills_nothing_but_srsenb(monkeypatch):
    lab = FakeLab()
    killed = _kill_recorded(monkeypatch, comm="bash")
    with pytest.raises(CellabError, match="no running srsenb to kill"):
        lab.inject_fault(FaultStep(kind="enb_restart", active=True))
    lab.enb.state = "crashed"
    with pytest.raises(CellabError, match="no running srsenb to kill"):
        lab.inject_fault(FaultStep(kind="enb_restart", active=True))
    assert killed == [] and lab.enb_restart_reason() is None


def test_after_srsenbs_restart_a_ue_not_back_is_named_and_a_configure_that_found_them_back_settles_it():
    lab = FakeLab()
    lab._enb_restarted_at = 1.0
    lab.ues_reaching_server = lambda: {"0": False}  # type: ignore[method-assign]
    state = lab.fault_state()
    assert state["not_back"] == ["UE 0 did not come back"] and state["enb_running"] is True, state
    assert state["s1_up"] is True and "s1_down_why" not in state, state
    assert lab.lost_ues_fault() == ("UE 0 did not come back: no ping to the server (srsenb was restarted under the "
                                    "running UEs (enb_restart fault))")
    lab.ues_reaching_server = lambda: {"0": True}  # type: ignore[method-assign]
    assert lab.lost_ues_fault() is None and lab.fault_state()["not_back"] == []
    lab.enb_restart_settled()
    assert lab.enb_restart_reason() is None and "not_back" not in lab.fault_state()


def test_after_srsepcs_restart_s1_is_down_and_the_lost_ue_is_named():
    lab = FakeLab()
    lab._s1_lost_at = 1.0
    lab.ues_reaching_server = lambda: {"0": False}  # type: ignore[method-assign]
    state = lab.fault_state()
    assert state["s1_up"] is False and state["not_back"] == ["UE 0 did not come back"], state
    assert "UE 0 did not come back" in (lab.lost_ues_fault() or "")
    assert "srsepc was restarted" in (lab.s1_lost_reason() or "")
    lab.s1_restored()
    assert lab.s1_lost_reason() is None and lab.lost_ues_fault() is None


def _load(tmp_path, faults: str):
    path = tmp_path / "c.yaml"
    path.write_text("name: f\nlab: srsran-zmq\nfactors: {faults: [none, " + ", ".join(
        line.split(":")[0].strip() for line in faults.splitlines()) + "]}\nfaults:\n" + faults
        + "\nworkload: {tool: iperf3, duration_s: 10}\n")
    return load_campaign(path)


def test_validate_takes_s1_cuts_and_srsepc_and_srsenb_restarts_on_this_lab_and_refuses_the_rest(tmp_path, monkeypatch):
    monkeypatch.setenv("CELLAB_ZMQ_CORE", "srsepc")  # the runs set no core: srsepc is theirs (test_zmqlab_core_daemons)
    campaign = _load(tmp_path, "  s1: [{kind: s1_cut, at_s: 3, duration_s: 2}]\n"
                               "  epc: [{kind: core_daemon, daemon: srsepc, at_s: 3, duration_s: 2}]\n"
                               "  enb: [{kind: enb_restart, at_s: 3, duration_s: 2}]")
    assert [f.kind for f in campaign.faults["s1"] + campaign.faults["epc"] + campaign.faults["enb"]] == [
        "s1_cut", "core_daemon", "enb_restart"]
    with pytest.raises((InputError, InputErrors)) as err:
        _load(tmp_path, "  pause: [{kind: ue_pause, at_s: 3, duration_s: 2}]")
    assert "faults.pause[0].kind: lab srsran-zmq cannot inject ue_pause" in str(err.value)
