"""Recovery figures as timeline events (issue 41) and the faults section's figure: each UE's outage and return on
one time axis, from recovery rows (a UE's own fault, and a fault of the whole cell with its other UEs)."""

from __future__ import annotations

from cellab.faults.timeline import fault_events
from cellab.report.fault_plot import outage_rows, outages
from cellab.report.plots import render

ROWS = [
    {"fault": 0, "kind": "radio_outage", "ue": 0, "start_s": 3.0, "end_s": 23.0, "rlf_s": 4.1, "reattach_s": 24.1,
     "user_plane_restored_s": 28.4, "throughput_back_s": 30.3, "out_of_sync_s": None},
    {"fault": 1, "kind": "enb_restart", "ue": 0, "start_s": 27.0, "end_s": 31.5, "rlf_s": 27.2, "reattach_s": 31.6,
     "throughput_back_s": float("nan"),
     "other_ues": [{"ue": 1, "rlf_s": 27.2, "reattach_s": 31.7, "user_plane_restored_s": 32.0}]},
    {"fault": 2, "kind": "core_daemon", "ue": 0, "start_s": 40.0, "end_s": 43.0, "daemon_listening_s": 43.1,
     "rlf_s": None, "other_ues": [{"ue": 1, "rlf_s": None}]},
]


def test_each_recovery_figure_is_an_event_of_its_ue_on_the_runs_timeline():
    events = fault_events(ROWS)
    said = [(e["t_s"], e["event"], e["ue"], e["fault"]) for e in events]
    assert said[:6] == [(3.0, "fault_start", 0, 0), (4.1, "rlf", 0, 0), (23.0, "fault_end", 0, 0),
                        (24.1, "reattach", 0, 0), (27.0, "fault_start", 0, 1), (27.0, "fault_start", 1, 1)]
    assert (28.4, "user_plane_restored", 0, 0) in said and (30.3, "throughput_back", 0, 0) in said
    # the whole cell's fault: its window on every UE it hit, each UE's own return; no event for a missing figure
    assert (31.5, "fault_end", 1, 1) in said and (31.7, "reattach", 1, 1) in said and (32.0, "user_plane_restored",
                                                                                        1, 1) in said
    assert not [e for e in events if e["event"] in ("out_of_sync", "throughput_back") and e["fault"] == 1]
    assert [e["t_s"] for e in events] == sorted(e["t_s"] for e in events)
    # a killed core daemon's return (the core agent's): the fault's own, on each UE it hit
    assert [(e["t_s"], e["ue"]) for e in events if e["event"] == "daemon_back"] == [(43.1, 0), (43.1, 1)]

    rows = outage_rows(events)
    assert rows[0]["windows"] == [(3.0, 23.0, "radio_outage"), (27.0, 31.5, "enb_restart"),
                                  (40.0, 43.0, "core_daemon")] and rows[1]["daemon_back"] == [43.1]
    assert rows[1]["windows"] == [(27.0, 31.5, "enb_restart"), (40.0, 43.0, "core_daemon")]
    assert rows[1]["reattach"] == [31.7]
    png, svg = render(outages([("#1 cubic rf", events), ("#2 cubic none-yet", [])]))
    assert png.startswith(b"\x89PNG") and b"radio link failure" in svg and b"UE 1" in svg
    assert b"core daemon listening again" in svg
