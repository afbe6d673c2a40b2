"""core_daemon faults on srsran-zmq, per core (issue 28): srsEPC whole, or one of Open5GS's EPC daemons (hss, pcrf,
sgwc, sgwu, upf, smf, mme). Without srsRAN: `validate` refuses a daemon the run's core does not run, naming the
fault's field, the core and the allowed names; the lab kills through the core agent's typed `kill` and restarts
through its `start` (a stand-in core agent records both); the state and the lab's fault name the daemon when a UE
did not come back; the user plane's return read from SGW-C's / SMF's "PFCP restoration" line. With the real stack
(extended tier, root, the srsRAN and Open5GS bundles and cellab-ferretdb, else skipped saying why): one `cellab run`
killing hss, sgwu and sgwc under a download, then a run without a fault (about 3 min; the MME's restart and its
recovery: test_zmqlab_mme_restart.py)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from cellab.ran.zmqlab import SrsranZmqLab
from cellab.ran.zmqlab_faults import CORE_FAULT_DAEMONS, FAULT_DAEMONS, restorations_in

from cellab.campaign.load import load_campaign
from cellab.errors import CellabError, InputError, InputErrors
from cellab.faults.spec import FaultStep

from .conftest import LOCK_WAIT_S, run_zmq_campaign, skip_without_open5gs
from .test_zmqlab_fault_rules import FakeLab

OPEN5GS_DAEMONS = ["hss", "mme", "pcrf", "sgwc", "sgwu", "smf", "upf"]


def _campaign(tmp_path, faults: str, fixed: str = "core: open5gs", factors: str = ""):
    path = tmp_path / "c.yaml"
    plans = [line.split(":")[0].strip() for line in faults.splitlines()]
    path.write_text(f"name: f\nlab: srsran-zmq\nfactors: {{faults: [none, {', '.join(plans)}]{factors}}}\n"
                    f"fixed: {{{fixed}}}\nfaults:\n{faults}\nworkload: {{tool: iperf3, duration_s: 10}}\n")
    return load_campaign(path)


def _refusal(tmp_path, *args: Any, **kwargs: Any) -> str:
    with pytest.raises((InputError, InputErrors)) as err:
        _campaign(tmp_path, *args, **kwargs)
    return str(err.value)


def test_the_lab_can_kill_srsepc_and_each_open5gs_epc_daemon():
    assert sorted(CORE_FAULT_DAEMONS["open5gs"]) == OPEN5GS_DAEMONS and CORE_FAULT_DAEMONS["srsepc"] == ("srsepc",)
    assert SrsranZmqLab.fault_daemons == frozenset(FAULT_DAEMONS) == {"srsepc", *OPEN5GS_DAEMONS}
    assert SrsranZmqLab.run_fault_daemons({"core": "srsepc"}) == ("core srsepc", frozenset({"srsepc"}))


def test_validate_takes_every_open5gs_daemon_on_an_open5gs_run(tmp_path):
    faults = "\n".join(f"  {d}: [{{kind: core_daemon, daemon: {d}, at_s: 3, duration_s: 2}}]" for d in OPEN5GS_DAEMONS)
    campaign = _campaign(tmp_path, faults)
    assert sorted(f.daemon for plan in campaign.faults.values() for f in plan) == OPEN5GS_DAEMONS


def test_validate_refuses_an_open5gs_daemon_on_srsepc_and_srsepc_on_open5gs_naming_field_core_and_allowed(tmp_path):
    text = _refusal(tmp_path, "  kill-mme: [{kind: core_daemon, daemon: mme, at_s: 3, duration_s: 2}]", "core: srsepc")
    assert "faults.kill-mme[0].daemon: lab srsran-zmq with core srsepc cannot kill mme (allowed: srsepc)" in text, text
    text = _refusal(tmp_path, "  epc: [{kind: core_daemon, daemon: srsepc, at_s: 3, duration_s: 2}]")
    assert ("faults.epc[0].daemon: lab srsran-zmq with core open5gs cannot kill srsepc (allowed: hss, mme, pcrf, "
            "sgwc, sgwu, smf, upf)") in text, text


def test_with_core_as_a_factor_only_the_core_that_lacks_the_daemon_is_named(tmp_path):
    text = _refusal(tmp_path, "  upf: [{kind: s1_cut, at_s: 1, duration_s: 1}, "
                              "{kind: core_daemon, daemon: upf, at_s: 3, duration_s: 2}]",
                    fixed="n_prb: 25", factors=", core: [open5gs, srsepc]")
    assert text.count("faults.upf[1].daemon") == 1 and "with core srsepc cannot kill upf (allowed: srsepc)" in text
    assert "core open5gs" not in text and "faults.upf[0]" not in text, text


def test_a_run_without_core_is_judged_on_the_labs_default_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("CELLAB_ZMQ_CORE", "srsepc")
    text = _refusal(tmp_path, "  hss: [{kind: core_daemon, daemon: hss, at_s: 3, duration_s: 2}]", fixed="n_prb: 25")
    assert "faults.hss[0].daemon: lab srsran-zmq with core srsepc (the default here: no run sets `core`) cannot " \
           "kill hss (allowed: srsepc)" in text, text


def test_a_daemon_no_core_of_this_lab_runs_is_refused_before_the_runs(tmp_path):
    text = _refusal(tmp_path, "  sgw: [{kind: core_daemon, daemon: sgw, at_s: 3, duration_s: 2}]")
    assert "faults.sgw[0].daemon: lab srsran-zmq cannot kill sgw (allowed: hss, mme, pcrf, sgwc, sgwu, smf, " \
           "srsepc, upf)" in text, text


class FakeCore:
    """The core agent's typed client: `kill` and `start` recorded, each daemon's pid and running state."""

    def __init__(self, names: list[str]):
        self.pids = {n: 100 + i for i, n in enumerate(names)}
        self.running = dict.fromkeys(names, True)
        self.calls: list[tuple[str, Any]] = []
        self.restart_fails = False

    def _status(self):
        daemons = [SimpleNamespace(name=n, running=r, pid=self.pids[n]) for n, r in self.running.items()]
        problems = [f"{n} exited (code -9): killed" for n, r in self.running.items() if not r]
        return SimpleNamespace(daemons=daemons, problems=problems, ok=not problems)

    def kill(self, name: str):
        self.calls.append(("kill", name))
        self.running[name] = False
        return SimpleNamespace(pid=self.pids[name], exit_code=-9, waited_s=0.01)

    def start(self, params):
        self.calls.append(("start", params.daemons))
        for name in params.daemons or list(self.running):
            if not self.running[name] and not self.restart_fails:
                self.running[name], self.pids[name] = True, self.pids[name] + 1000
        return self._status()

    def status(self):
        return self._status()


class CoreLab(FakeLab):
    def __init__(self, flavour: str):
        super().__init__(flavour)
        self.core = FakeCore(["epc"] if flavour == "srsepc" else ["db", *CORE_FAULT_DAEMONS["open5gs"]])
        self.reaching = {"0": True}

    def _core(self) -> FakeCore:
        return self.core

    def _core_down(self) -> str | None:
        return "; ".join(f"{self.core_flavour} {n} exited" for n, r in self.core.running.items() if not r) or None

    def ues_reaching_server(self) -> dict[str, bool]:
        return dict(self.reaching)


def _play(lab: CoreLab, daemon: str) -> tuple[dict[str, Any], dict[str, Any]]:
    return (lab.inject_fault(FaultStep(kind="core_daemon", active=True, daemon=daemon)),
            lab.inject_fault(FaultStep(kind="core_daemon", active=False, daemon=daemon)))


def test_an_open5gs_daemon_is_killed_and_restarted_through_the_core_agent_and_a_ue_back_settles_it():
    lab = CoreLab("open5gs")
    lab._core_log = lambda daemon: SMF_LOG  # type: ignore[method-assign]
    killed, started = _play(lab, "upf")
    assert lab.core.calls == [("kill", "upf"), ("start", ["upf"])]
    assert killed == {"ok": True, "daemon": "upf", "killed_pid": 105, "exit_code": -9, "kill_s": 0.01}, killed
    assert started["pid"] == 1105 and started["core_problems"] == [], started
    assert [(e["event"], e["daemon"]) for e in lab.events] == [("core_down", "upf"), ("core_up", "upf")]
    state = lab.fault_state()
    assert state["core_daemon_restarted"] == "upf" and state["core_down"] is None and state["s1_up"] is True, state
    assert state["not_back"] == [] and lab.lost_ues_fault() is None
    lab.enb_restart_settled()  # the next configure found the UE back
    assert lab.core_restart_reason() is None and "not_back" not in lab.fault_state()


# SMF's log around a UPF's restart (Open5GS 2.7.7, measured here): its heartbeat gave up, it re-associated and
# restored the sessions
SMF_LOG = """11/26 22:55:30.708: [smf] INFO: PFCP associated [127.0.0.7]:8805 (../src/src/smf/pfcp-sm.c:189)
11/26 22:56:55.234: [smf] WARNING: No Heartbeat from UPF [127.0.0.7]:8805 (../src/src/smf/pfcp-sm.c:410)
11/26 22:56:55.237: [smf] ERROR: PFCP restoration (../src/src/smf/pfcp-sm.c:199)
11/26 22:57:05.466: [smf] ERROR: No associated GTP transaction (../src/src/smf/pfcp-sm.c:342)
"""


def test_the_user_planes_return_is_read_from_its_control_peers_restoration_line(monkeypatch):
    import time

    assert restorations_in(SMF_LOG, 2026) == [time.mktime((2026, 11, 26, 22, 56, 55, 0, 0, -1)) + 0.237]
    assert restorations_in("PFCP restoration\n[smf] ERROR: PFCP restoration", 2026) == []  # no stamp: not one
    lab = CoreLab("open5gs")
    asked: list[str] = []
    lab._core_log = lambda daemon: asked.append(daemon) or SMF_LOG  # type: ignore[method-assign]
    monkeypatch.setattr(time, "time", lambda: time.mktime((2026, 11, 26, 22, 56, 40, 0, 0, -1)) + 0.96)
    _play(lab, "upf")
    assert lab.fault_state()["user_plane_restored_s"] == 14.28 and asked == ["smf"]
    lab.s1_restored()
    _play(lab, "hss")  # no user plane of its own: nothing read
    assert "user_plane_restored_s" not in lab.fault_state() and asked == ["smf"]


def test_a_ue_not_back_after_an_open5gs_daemons_restart_is_named_with_the_daemon():
    lab = CoreLab("open5gs")
    _play(lab, "sgwu")
    lab.reaching = {"0": False}
    lab._core_log = lambda daemon: "11/26 22:55:30.652: [sgwc] INFO: PFCP associated"  # type: ignore[method-assign]
    state = lab.fault_state()
    assert state["not_back"] == ["UE 0 did not come back after sgwu's restart"] and state["s1_up"] is True, state
    assert state["user_plane_restored_s"] is None  # SGW-C has not restored it (yet)
    assert lab.lost_ues_fault() == ("UE 0 did not come back: no ping to the server (sgwu was restarted under the "
                                    "running UEs (core_daemon fault))")
    lab.s1_restored()  # the stack restarted
    assert lab.lost_ues_fault() is None and "core_daemon_restarted" not in lab.fault_state()


def test_a_daemon_that_does_not_start_again_fails_the_faults_end_naming_it():
    lab = CoreLab("open5gs")
    lab.core.restart_fails = True
    lab.inject_fault(FaultStep(kind="core_daemon", active=True, daemon="hss"))
    with pytest.raises(CellabError, match="hss did not restart: hss exited"):
        lab.inject_fault(FaultStep(kind="core_daemon", active=False, daemon="hss"))
    assert lab.fault_state()["core_down"] == "open5gs hss exited"


@pytest.mark.parametrize(("flavour", "daemon", "allowed"), [
    ("srsepc", "mme", ["srsepc"]), ("open5gs", "srsepc", list(CORE_FAULT_DAEMONS["open5gs"]))])
def test_the_lab_refuses_at_the_fault_a_daemon_the_runs_core_does_not_run(flavour, daemon, allowed):
    lab = CoreLab(flavour)
    with pytest.raises(InputError) as err:
        lab.inject_fault(FaultStep(kind="core_daemon", active=True, daemon=daemon))
    assert err.value.field == "daemon" and err.value.allowed == allowed and f"core is {flavour}" in str(err.value)
    assert lab.core.calls == [] and json.dumps(lab.events) == "[]"


# ---- with the real stack ---------------------------------------------------------------------------------------
MIN_STACK_SPEED = 0.2  # below it the host, not the stack, decides every time measured here
WORKLOAD_S = 20  # SGW-U's sessions come back 10-15 s after the kill (PFCP heartbeat): inside it


def _answers(run_dir: Path) -> list[float]:
    """The workload's ping answers (every 200 ms, `ping -D`), s from the workload's start."""
    t0 = json.loads((run_dir / "manifest.json").read_text())["workload_started_at"]
    return [float(line[1:].split("]", 1)[0]) - t0 for line in next(run_dir.glob("ues/*/*-ping.txt")).read_text()
            .splitlines() if line.startswith("[") and "bytes from" in line]


def _silence(answers: list[float], after_s: float, end_s: float) -> tuple[float, float]:
    """The longest silence of the ping from `after_s` to the workload's end `end_s`: (last answer before it, first
    after it; inf when none came before the end)."""
    marks = [a for a in answers if a >= after_s - 1.0]
    if not marks or marks[-1] < end_s - 1.0:  # silent to the end
        marks.append(float("inf"))
    return max(zip(marks, marks[1:], strict=False), key=lambda p: p[1] - p[0])


@pytest.mark.root
@pytest.mark.extended  # four srsRAN runs on Open5GS, two stack restarts (about 3.5 min)
@pytest.mark.timeout(LOCK_WAIT_S + 900)
def test_open5gs_daemons_killed_under_a_download_hss_unnoticed_sgwu_restored_sgwc_fails_naming_it(
        bundle, tmp_path):
    skip_without_open5gs()
    plans = ("hss", "sgwu", "sgwc")
    folder, runs, log = run_zmq_campaign(bundle, tmp_path, (
        "name: zmq-open5gs-daemons\nlab: srsran-zmq\nrepeat: 1\norder: {mode: sequential}\n"
        f"factors: {{faults: [{', '.join(plans)}, none]}}\nfaults:\n"
        + "".join(f"  {d}: [{{kind: core_daemon, daemon: {d}, at_s: 2, duration_s: 2}}]\n" for d in plans)
        + "fixed: {core: open5gs, n_prb: 25, cc: cubic, sr_period_ms: 20}\n"
        f"workload: {{tool: iperf3, duration_s: {WORKLOAD_S}}}\nmeasurements: [throughput, rtt]\n"
        "timeouts: {run_s: 150, request_s: 10}\n"
        "retry: {max_attempts: 1, backoff_s: 0, min_stack_speed: null}\n"),  # the test reads the speed first
        "zqk", LOCK_WAIT_S)
    _judge(folder, runs, log, plans)


def _judge(folder: Path, runs: list[tuple[str, str, str | None, str]], log: str, plans: tuple[str, ...]) -> None:
    rows = {json.loads(factors)["faults"]: (run_id, status, error or "") for run_id, status, error, factors in runs}
    assert list(rows) == [*plans, "none"], (runs, log)
    run_dirs = {name: folder / "runs" / run_id for name, (run_id, *_) in rows.items()}
    speeds = {name: json.loads((d / "manifest.json").read_text()).get("lab_timing", {}).get("stack_speed")
              for name, d in run_dirs.items() if (d / "manifest.json").is_file()}
    print(f"stack speed per run: {speeds}; status: { {k: v[1] for k, v in rows.items()} }")
    known = [s for s in speeds.values() if isinstance(s, (int, float))]
    if known and min(known) < MIN_STACK_SPEED:
        pytest.skip(f"the stack ran at {min(known):.2f} of real time (< {MIN_STACK_SPEED}): the host, not the "
                    "stack, would decide what this test measures")
    assert {k: v[1] for k, v in rows.items()} == {"hss": "ok", "sgwu": "ok", "sgwc": "failed", "none": "ok"}, \
        (rows, log)
    for name in ("hss", "sgwu"):
        report = json.loads((run_dirs[name] / "faults.json").read_text())
        (kill,) = report["recovery"]
        assert kill["daemon"] == name and kill["end_s"] is not None, kill
        final = report["final_state"]
        assert final["core_daemon_restarted"] == name and final["core_down"] is None, final
        assert final["not_back"] == [] and final["s1_up"] is True and final["rrc_state"] == {"0": "connected"}, final
        last, first = _silence(_answers(run_dirs[name]), kill["start_s"], WORKLOAD_S)
        print(f"{name}: killed {kill['start_s']:.2f} s, started again {kill['end_s']:.2f} s; ping silent "
              f"{last:.2f}-{first:.2f} s")
        if name == "hss":  # the bearer does not use the HSS: the ping never noticed
            assert first - last < 1.5, (last, first)
        else:  # the user plane's sessions died with SGW-U; SGW-C restores them once its PFCP heartbeat gives up
            assert last < kill["start_s"] + 0.5 and kill["end_s"] < first < WORKLOAD_S, (kill, last, first)
            restored_s = kill["start_s"] + final["user_plane_restored_s"]  # SGW-C's "PFCP restoration"
            print(f"sgwu: SGW-C restored the sessions {final['user_plane_restored_s']:.2f} s after the kill")
            assert restored_s - 0.5 < first < restored_s + 1.5, (restored_s, first)
    # SGW-C restarted: SGW-U drops the old association's sessions, nothing restores them: the UE is not back
    assert "UE 0 did not come back" in rows["sgwc"][2] and "sgwc was restarted" in rows["sgwc"][2], rows["sgwc"]
    # the run after it: the stack restarted (its reason names SGW-C) and passes
    configure = json.loads((run_dirs["none"] / "lab_status.json").read_text())["configure"]
    assert configure["restarted"] and "sgwc was restarted" in configure["restart_reasons"][0], configure
    print(f"sgwc: {rows['sgwc'][2][:300]}")
