"""A restarted MME's recovery row from a lab's own events (srsran-zmq, issue 41): S1 back at the eNB's S1 Setup, each
UE's fresh attach (`reattach_by` "attach") and its first packet through the core to the server, per UE, and the same
times again on the run's stack clock (srsRAN over ZMQ runs slower than real time: its timers count stack time)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cellab.faults.recovery import not_recovered
from cellab.faults.spec import FaultSpec
from cellab.results.metrics import fault_run_metrics

T0 = 1_790_000_000.0


def _clock(path, speed: float):
    """A stack clock at `speed` of real time from T0 - 1 s for 60 s (the broker's file format)."""
    header = {"format": "cellab-stack-clock", "version": 1, "direction": "dl", "sample_rate_hz": 5760000,
              "samples_per_tti": 5760, "clock": "CLOCK_REALTIME", "run_id": "r", "first_tti": 0}
    times = T0 - 1.0 + np.arange(int(60 * 1000 * speed)) / (1000.0 * speed)
    path.write_bytes(json.dumps(header).encode() + b"\n" + np.round(times * 1e9).astype("<i8").tobytes())
    return path


def _rows(tmp_path, lines, clock_speed: float | None = None):
    (tmp_path / "lab_events.jsonl").write_text("".join(json.dumps(
        {"event": e, **({"ue": ue} if ue is not None else {}), "t_s": T0 + t}) + "\n" for e, ue, t in lines))
    played = [{"fault": 0, "action": "start", "asked_s": 5.0, "applied_s": 5.03},
              {"fault": 0, "action": "end", "asked_s": 7.0, "applied_s": 9.0}]
    artifacts = {"lab-events": tmp_path / "lab_events.jsonl"}
    if clock_speed is not None:
        artifacts["stack-clock-dl"] = _clock(tmp_path / "stack-clock-dl.bin", clock_speed)
    return fault_run_metrics([FaultSpec(kind="core_daemon", daemon="srsepc", at_s=5.0, duration_s=2.0)], played,
                             artifacts, None, T0, 90.0, None)


# what srsran-zmq logged around srsEPC's kill at 5 s with two UEs (its lab_events.jsonl, seconds from the workload's
# start): srsenb's S1 lost and set up again (its log), its restart, each UE's attach and its ping to the server
EVENTS = [("s1_lost", None, 5.05), ("core_down", None, 5.06), ("core_up", None, 9.0), ("s1_setup", None, 16.7),
          ("radio_restart", None, 36.9), ("ue_attached", 1, 50.4), ("ue_attached", 0, 51.9),
          ("ue_reaches_server", 0, 52.2), ("ue_reaches_server", 1, 52.6)]


def test_s1_back_each_ues_fresh_attach_and_first_packet_make_the_row(tmp_path):
    (row,) = _rows(tmp_path, EVENTS)
    assert row["s1_back_s"] == pytest.approx(16.7, abs=1e-3) and row["daemon"] == "srsepc"
    assert (row["reattach_s"], row["reattach_by"]) == (pytest.approx(51.9, abs=1e-3), "attach")
    assert row["reattach_after_end_s"] == pytest.approx(42.9, abs=1e-2)  # from the MME's start again (9.0 s)
    assert row["traffic_back_s"] == pytest.approx(52.2, abs=1e-3) and row["rlf_s"] is None
    (other,) = row["other_ues"]
    assert other["ue"] == 1 and other["reattach_s"] == pytest.approx(50.4, abs=1e-3), other
    assert other["traffic_back_s"] == pytest.approx(52.6, abs=1e-3) and "s1_back_s" not in other
    assert "s1_back_stack_s" not in row  # no stack clock in this run's artifacts


def test_the_rows_times_read_again_on_the_stack_clock(tmp_path):
    (row,) = _rows(tmp_path, EVENTS, clock_speed=0.4)  # the stack at 0.4 of real time
    assert row["s1_back_stack_s"] == pytest.approx((16.7 - 5.03) * 0.4, abs=2e-3)  # from the fault's start
    assert row["reattach_stack_s"] == pytest.approx((51.9 - 5.03) * 0.4, abs=2e-3)
    assert row["traffic_back_stack_s"] == pytest.approx((52.2 - 5.03) * 0.4, abs=2e-3)
    assert row["other_ues"][0]["reattach_stack_s"] == pytest.approx((50.4 - 5.03) * 0.4, abs=2e-3)


def test_a_ue_that_never_attached_again_has_no_return_and_fails_the_run(tmp_path):
    (row,) = _rows(tmp_path, EVENTS[:5])
    assert row["s1_back_s"] == pytest.approx(16.7, abs=1e-3) and "reattach_s" not in row
    assert "traffic_back_s" not in row
    why = not_recovered([row], {"ue_reaches_server": {"0": False}, "s1_up": True})
    assert why == "UE 0 did not come back: no ping to the server at the end", why
