"""Faults in campaigns (issue 28), without a lab: the `faults` section and the `faults` factor, the errors bad
plans get (each naming the field), the labs that refuse faults they cannot inject, the player's clean-up, and
the recovery figures from a cell's events and per-TTI bytes."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from cellab.campaign.load import load_campaign, plan
from cellab.errors import InputError, InputErrors
from cellab.faults.player import FaultPlayer
from cellab.faults.recovery import not_recovered, recovery_metrics
from cellab.faults.spec import FaultSpec

BASE = """
name: f
lab: {lab}
factors:
  scheme: {{cubic: {{cc: cubic}}, c2tcp: {{cc: c2tcp}}}}
  faults: [none, outage-0.5s, outage-3s, s1-cut-2s]
faults:
{faults}
workload: {{tool: probe, duration_s: 10}}
"""
GOOD = """  outage-0.5s: [{kind: radio_outage, at_s: 4, duration_s: 0.5}]
  outage-3s: [{kind: radio_outage, at_s: 4, duration_s: 3}]
  s1-cut-2s: [{kind: s1_cut, at_s: 4, duration_s: 2}]"""


def _campaign(tmp_path, faults: str = GOOD, lab: str = "virtual"):
    path = tmp_path / "c.yaml"
    path.write_text(BASE.format(faults=faults, lab=lab))
    return load_campaign(path), path


def _error(tmp_path, faults: str, lab: str = "virtual") -> str:
    with pytest.raises((InputError, InputErrors)) as info:
        _campaign(tmp_path, faults, lab)
    return str(info.value)


def test_faults_are_a_factor_none_and_each_plan_in_one_matrix(tmp_path):
    campaign, path = _campaign(tmp_path)
    runs = plan(campaign, path)
    assert len(runs) == 8
    assert sorted({r.params["faults"] for r in runs}) == ["none", "outage-0.5s", "outage-3s", "s1-cut-2s"]
    assert campaign.faults["outage-3s"][0].duration_s == 3


@pytest.mark.parametrize(("faults", "field", "says"), [
    ("  outage-0.5s: [{kind: radio_outage, at_s: 12, duration_s: 0.5}]",
     "faults.outage-0.5s[0].at_s", "12 s is past the workload (workload.duration_s 10)"),
    ("  outage-0.5s: [{kind: radio_outage, at_s: 9, duration_s: 2}]",
     "faults.outage-0.5s[0].duration_s", "the fault ends at 11 s, past the workload"),
    ("  outage-0.5s: [{kind: radio_outage, at_s: 4, duration_s: -0.5}]",
     "faults.outage-0.5s[0].duration_s", "greater than 0"),
    ("  outage-0.5s: [{kind: core_daemon, daemon: amf, at_s: 4, duration_s: 1}]",
     "faults.outage-0.5s[0].daemon", "'amf' is not allowed (allowed: mme, sgw, sgwc, sgwu, smf, upf, hss, pcrf, srsepc)"),
    ("  outage-0.5s: [{kind: radio_outage, at_s: 4, duration_s: 2}, {kind: radio_outage, at_s: 5, duration_s: 1}]",
     "faults.outage-0.5s[1].at_s", "overlaps faults.outage-0.5s[0] on the radio of UE 0 (4..6 s)"),
    ("  outage-0.5s: [{kind: core_daemon, daemon: mme, at_s: 4, duration_s: 1}]",
     "faults.outage-0.5s[0].kind",
     "lab virtual cannot inject core_daemon (allowed: enb_restart, radio_outage, s1_cut, sgi_cut, ue_pause)"),
    ("  outage-0.5s: [{kind: fire, at_s: 4, duration_s: 1}]", "faults.outage-0.5s[0].kind", "radio_outage"),
    ("  outage-0.5s: [{kind: radio_outage, at_s: 4, duration_s: 1, daemon: mme}]",
     "faults.outage-0.5s[0]", "only a core_daemon fault names one"),
])
def test_bad_fault_plans_name_the_field(tmp_path, faults, field, says):
    text = _error(tmp_path, faults + "\n" + "\n".join(GOOD.splitlines()[1:]))
    assert f"{field}: " in text and says in text, text


def test_an_unknown_plan_and_a_plan_named_none_are_refused(tmp_path):
    text = _error(tmp_path, GOOD.replace("s1-cut-2s:", "s1-cut:"))
    assert "factors.faults[3]: unknown fault plan 's1-cut-2s'" in text and "allowed: none, outage-0.5s" in text
    text = _error(tmp_path, GOOD + "\n  none: [{kind: s1_cut, at_s: 1, duration_s: 1}]")
    assert "faults.none: 'none' means no fault" in text


def test_overlap_is_per_box_faults_on_two_boxes_may_overlap(tmp_path):
    both = GOOD.replace("  s1-cut-2s: [{kind: s1_cut, at_s: 4, duration_s: 2}]",
                        "  s1-cut-2s: [{kind: s1_cut, at_s: 4, duration_s: 2}, {kind: radio_outage, at_s: 5, "
                        "duration_s: 1}]")
    campaign, _ = _campaign(tmp_path, both)
    assert len(campaign.faults["s1-cut-2s"]) == 2


@pytest.mark.parametrize(("lab", "outage"), [("wired", False), ("srsran-zmq", True)])
def test_labs_refuse_the_faults_they_cannot_inject_naming_lab_and_fault(tmp_path, lab, outage):
    text = _error(tmp_path, "  outage-0.5s: [{kind: radio_outage, at_s: 4, duration_s: 0.5}]\n"
                            "  outage-3s: [{kind: radio_outage, at_s: 4, duration_s: 3}]\n"
                            "  pause: [{kind: ue_pause, at_s: 4, duration_s: 2}]", lab)
    # srsran-zmq: a radio outage through its attenuator (the broker's gain); no UE host to pause
    assert (f"faults.outage-0.5s[0].kind: lab {lab} cannot inject radio_outage" in text) is not outage, text
    assert f"faults.pause[0].kind: lab {lab} cannot inject ue_pause" in text


def test_srsran_zmq_kills_only_its_cores_daemons_and_says_so_at_validate(tmp_path):
    # sgw is NextEPC's (Open5GS splits it: sgwc, sgwu); each run's core decides further (test_zmqlab_core_daemons)
    text = _error(tmp_path, "  mme-kill: [{kind: core_daemon, daemon: sgw, at_s: 4, duration_s: 2}]", "srsran-zmq")
    assert "faults.mme-kill[0].daemon: lab srsran-zmq cannot kill sgw" in text and "srsepc" in text, text


def test_the_player_ends_every_fault_it_started_even_when_stopped_early():
    calls = []
    faults = [FaultSpec(kind="s1_cut", at_s=0.0, duration_s=30), FaultSpec(kind="radio_outage", at_s=20,
                                                                            duration_s=1)]
    player = FaultPlayer(faults, lambda i, active: calls.append((i, active)) or {"ok": True}, time.time()).start()
    time.sleep(0.2)
    log = player.finish()
    assert calls == [(0, True), (0, False)]  # the second never started, the first was ended at finish
    assert [(row["fault"], row["action"]) for row in log] == [(0, "start"), (0, "end")]


def _events(rows: list[tuple[str, int, dict]]) -> list[dict]:
    return [{"event": name, "tti": tti, "ue": 0, **extra} for name, tti, extra in rows]


def test_recovery_figures_come_from_the_cells_events_and_bytes_not_the_plan():
    # a 10 Mbit/s flow on TTIs 0..5999 (run time = tti / 1000): the link lost at 2.005, back at 2.507 (the plan
    # said 2.0..2.5), RLF at 2.210, re-established at 2.660, full rate again from 2.8
    t = np.arange(6000) / 1000.0
    rate = np.where((t >= 2.005) & (t < 2.8), 0.0, 1250.0)  # bytes per TTI = 10 Mbit/s
    rate[(t >= 2.66) & (t < 2.8)] = 600.0
    drops = np.where((t >= 2.66) & (t < 2.661), 50_000.0, 0.0)
    events = _events([("attenuation", 2005, {"attenuation_db": 95.0}), ("t310_start", 2010, {}),
                      ("rlf", 2210, {}), ("attenuation", 2507, {"attenuation_db": 20.0}),
                      ("reest_start", 2510, {}), ("reest_complete", 2660, {})])
    played = [{"fault": 0, "action": "start", "asked_s": 2.0, "applied_s": 2.001},
              {"fault": 0, "action": "end", "asked_s": 2.5, "applied_s": 2.502}]
    (row,) = recovery_metrics([FaultSpec(kind="radio_outage", at_s=2.0, duration_s=0.5)], played, events,
                              (t, rate), (t, drops), lambda tti: tti / 1000.0, 6.0, 95.0)
    assert row["times_from"] == "cell"
    assert (row["start_s"], row["end_s"]) == (2.005, 2.507)
    assert row["rlf_s"] == 2.21 and row["reattach_s"] == 2.66 and row["reattach_by"] == "reest"
    assert row["reattach_after_end_s"] == pytest.approx(0.153)
    assert row["pre_fault_bps"] == pytest.approx(10e6)
    assert row["throughput_back_s"] == pytest.approx(2.8)
    assert row["recovery_s"] == pytest.approx(2.8 - 2.507)
    assert row["lost_bytes"] == 50_000
    assert row["longest_stall_s"] == pytest.approx(2.66 - 2.005, abs=0.002)
    assert not_recovered([row], {"rrc_state": {"0": "connected"}, "s1_up": True}) is None


def test_on_srsran_zmq_recovery_comes_from_the_attenuation_applied_and_srsues_rrc_events(tmp_path):
    """srsran-zmq keeps no TTI clock: its lab_events.jsonl holds the attenuation the broker applied and srsue's
    RRC events on the wall clock; the workload started at t0."""
    import json

    from cellab.results.metrics import fault_run_metrics

    t0 = 1_790_000_000.0
    rows = [("attenuation", 2.010, {"attenuation_db": 60.0}), ("t310_start", 2.100, {}), ("rlf", 2.503, {}),
            ("attenuation", 5.012, {"attenuation_db": 0.0}), ("reest_start", 5.390, {}),
            ("reest_complete", 5.441, {}), ("rlf", float("nan"), {})]  # a broken line is left out
    (tmp_path / "lab_events.jsonl").write_text("".join(
        json.dumps({"event": name, "ue": 0, "t_s": t0 + t, **extra}) + "\n" for name, t, extra in rows) + "{\n")
    played = [{"fault": 0, "action": "start", "asked_s": 2.0, "applied_s": 2.02},
              {"fault": 0, "action": "end", "asked_s": 5.0, "applied_s": 5.02}]
    (row,) = fault_run_metrics([FaultSpec(kind="radio_outage", at_s=2.0, duration_s=3.0)], played,
                               {"lab-events": tmp_path / "lab_events.jsonl"}, None, t0, 10.0, 60.0)
    assert row["times_from"] == "lab"
    assert (row["start_s"], row["end_s"]) == pytest.approx((2.010, 5.012), abs=1e-3)
    assert row["rlf_s"] == pytest.approx(2.503, abs=1e-3) and row["out_of_sync_s"] == pytest.approx(2.1, abs=1e-3)
    assert row["reattach_by"] == "reest" and row["reattach_after_end_s"] == pytest.approx(0.429, abs=1e-3)
    assert "throughput_back_s" not in row  # no per-TTI bytes on this lab


def test_a_fault_of_the_whole_cell_has_each_ues_own_recovery(tmp_path):
    """An eNB restart hits every UE: UE 0 (the row's) re-attaches 0.4 s after the eNB is back, UE 1 1.2 s after;
    a radio outage of UE 1 stays UE 1's alone. From srsran-zmq's lab events (wall clock, t0 the workload's start)."""
    import json

    from cellab.results.metrics import fault_run_metrics

    t0 = 1_790_000_000.0
    lines = [("enb_down", None, 2.0), ("rlf", 0, 2.2), ("rlf", 1, 2.25), ("enb_up", None, 2.5),
             ("connect_complete", 0, 2.9), ("connect_complete", 1, 3.7),
             ("attenuation", 1, 6.0, {"attenuation_db": 60.0}), ("rlf", 1, 6.4),
             ("attenuation", 1, 7.0, {"attenuation_db": 0.0}), ("reest_complete", 1, 7.3)]
    (tmp_path / "lab_events.jsonl").write_text("".join(json.dumps(
        {"event": line[0], **({"ue": line[1]} if line[1] is not None else {}), "t_s": t0 + line[2],
         **(line[3] if len(line) > 3 else {})}) + "\n" for line in lines))
    faults = [FaultSpec(kind="enb_restart", at_s=2.0, duration_s=0.5),
              FaultSpec(kind="radio_outage", at_s=6.0, duration_s=1.0, ue=1)]
    played = [{"fault": 0, "action": "start", "asked_s": 2.0, "applied_s": 2.0},
              {"fault": 0, "action": "end", "asked_s": 2.5, "applied_s": 2.5},
              {"fault": 1, "action": "start", "asked_s": 6.0, "applied_s": 6.0},
              {"fault": 1, "action": "end", "asked_s": 7.0, "applied_s": 7.0}]
    restart, outage = fault_run_metrics(faults, played, {"lab-events": tmp_path / "lab_events.jsonl"}, None, t0,
                                        10.0, 60.0)
    assert (restart["ue"], restart["start_s"], restart["end_s"]) == (0, pytest.approx(2.0), pytest.approx(2.5))
    assert restart["rlf_s"] == pytest.approx(2.2) and restart["reattach_after_end_s"] == pytest.approx(0.4)
    (other,) = restart["other_ues"]
    assert other["ue"] == 1 and other["rlf_s"] == pytest.approx(2.25) and other["reattach_by"] == "connect"
    assert other["reattach_after_end_s"] == pytest.approx(1.2)
    assert outage["ue"] == 1 and "other_ues" not in outage and outage["rlf_s"] == pytest.approx(6.4)
    assert not_recovered([restart, outage], {"rrc_state": {"0": "connected", "1": "connected"}}, 10.0) is None
    # UE 1's search stops at its own outage (6.0 s), the next fault that hits it
    assert (other["searched_until_s"], other["cut_by_fault"]) == (pytest.approx(6.0), 1)
    assert "cut_by_fault" not in restart  # UE 0: no later fault hits it
    # UE 1 never back (and no later fault): the run names it, though UE 0 (the row's own) came back
    lost = dict(restart, other_ues=[{k: v for k, v in other.items() if k not in ("searched_until_s", "cut_by_fault")}
                                    | {"reattach_s": None}])
    why = not_recovered([lost], {}, 10.0)
    assert why == "fault 0 (enb_restart), UE 1: radio link failure at 2.25 s and no re-attach by the end", why


def test_a_fault_the_lab_did_not_recover_from_is_named_with_its_state():
    events = _events([("attenuation", 1000, {"attenuation_db": 95.0}), ("rlf", 1210, {}),
                      ("attenuation", 1500, {"attenuation_db": 20.0})])
    (row,) = recovery_metrics([FaultSpec(kind="radio_outage", at_s=1.0, duration_s=0.5)], [], events, None, None,
                              lambda tti: tti / 1000.0, 3.0, 95.0)
    why = not_recovered([row], {"rrc_state": {"0": "search"}})
    assert "radio link failure at 1.21 s and no re-attach" in why and "UE 0 ended the run in RRC state search" in why
    # back only after the workload's end: not within the run, whatever the state at collection time
    late = dict(row, reattach_s=3.3, reattach_by="connect")
    why = not_recovered([late], {"rrc_state": {"0": "connected"}, "s1_up": True}, 3.0)
    assert "re-attached only at 3.30 s, after the workload's end (3 s)" in why
    assert not_recovered([late], {"rrc_state": {"0": "connected"}}, 4.0) is None
    # srsran-zmq after an srsEPC restart: S1 down, and the UE named that no longer reaches the server
    why = not_recovered([late], {"s1_up": False, "ue_reaches_server": {"0": False, "1": True}}, 4.0)
    assert "UE 0 did not come back: no ping to the server at the end" in why and "UE 1" not in why, why


def test_the_example_campaign_validates():
    path = Path(__file__).resolve().parents[2] / "runs" / "faults.yaml"
    campaign = load_campaign(path)
    assert set(campaign.factors["faults"]) == {"none", "outage-0.5s", "outage-3s", "s1-cut-2s"}


def test_radio_outages_and_a_schedule_would_both_drive_the_attenuator(tmp_path):
    path = tmp_path / "c.yaml"
    walk = Path(__file__).resolve().parents[2] / "runs" / "schedules" / "pedestrian.yaml"
    path.write_text(BASE.format(faults=GOOD, lab="virtual") + f"schedules: {{walk: {{file: {walk}}}}}\n"
                    "fixed: {schedule: walk}\n")
    with pytest.raises((InputError, InputErrors)) as info:
        load_campaign(path)
    assert "fixed.schedule: a schedule and the radio_outage faults of plan 'outage-0.5s' would both drive" in str(
        info.value), str(info.value)


def test_a_faults_search_stops_at_the_next_fault_that_hits_its_ue_once_it_is_over():
    from cellab.faults.recovery import search_until

    faults = [FaultSpec(kind="radio_outage", ue=0, at_s=2.0, duration_s=20.0),
              FaultSpec(kind="ue_pause", ue=1, at_s=3.0, duration_s=6.0),  # another UE's: never UE 0's bound
              FaultSpec(kind="sgi_cut", at_s=16.0, duration_s=3.0),  # the whole cell, but while UE 0 is still out
              FaultSpec(kind="enb_restart", at_s=24.0, duration_s=4.0)]  # the whole cell, after UE 0's outage
    windows = [(2.1, 22.1, "lab"), (3.0, 9.0, "lab"), (16.0, 19.0, "lab"), (24.2, 28.0, "lab")]
    assert search_until(faults, windows, 0) == (24.2, 3)
    assert search_until(faults, windows, 1) == (16.0, 2)
    assert search_until(faults, windows, 3) == (None, None)
    assert search_until(faults, [(None, None, "injector"), *windows[1:]], 0) == (None, None)  # never started


def test_a_row_cut_by_the_next_fault_before_its_ue_came_back_is_left_to_that_faults_row_and_the_final_state():
    row = {"fault": 0, "kind": "radio_outage", "ue": 0, "start_s": 1.0, "end_s": 2.0, "rlf_s": 1.2,
           "reattach_s": None, "searched_until_s": 2.5, "cut_by_fault": 1}
    assert not_recovered([row], {"rrc_state": {"0": "connected"}}, 10.0) is None
    assert "UE 0 ended the run in RRC state idle" in not_recovered([row], {"rrc_state": {"0": "idle"}}, 10.0)
