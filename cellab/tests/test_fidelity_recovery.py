"""The fidelity bench's recovery case (cellab.fidelity.recovery) without a lab: its campaign validates on both
labs in the full and quick grids and not in the test grid, its values come from stored metrics rows (the
virtual cell's and srsran-zmq's `faults` rows) and the server's capture, and a value one lab lacks is not
measured with its reason."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from cellab.campaign.load import load_campaign, plan
from cellab.fidelity import cases as fidelity
from cellab.fidelity.cases import CaseValues, compare, fidelity_rows
from cellab.fidelity.recovery import recovery_values, throughput_back_s

# a srsran-zmq run's faults row as the runner stores it (times from srsue's RRC log and the broker's attenuation;
# no throughput figures on that lab)
ZMQ_ROW = {"fault": 0, "kind": "radio_outage", "ue": 0, "planned_at_s": 3.0, "planned_duration_s": 3.0,
           "start_s": 3.02, "end_s": 6.03, "times_from": "lab", "rlf_s": 4.17, "out_of_sync_s": 3.95,
           "reattach_s": 7.35, "reattach_by": "reest", "reattach_after_end_s": 1.32}
MANIFEST = {"workload_started_at": 1000.0, "workload": {"duration_s": 12.0}, "lab_timing": {"stack_speed": 0.55}}


@pytest.mark.parametrize("lab", ["virtual", "srsran-zmq"])
@pytest.mark.parametrize("grid", ["full", "quick"])
def test_the_recovery_campaign_validates_in_the_full_and_quick_grids(tmp_path, lab, grid):
    campaign = fidelity.build_plan(lab, fidelity.GRIDS[grid]).campaigns["recovery"]
    path = tmp_path / "recovery.yaml"
    path.write_text(yaml.safe_dump(campaign, sort_keys=False))
    runs = plan(load_campaign(path), path)  # the lab's fault kinds, the outage inside the workload
    assert [r.factors["case"] for r in runs] == ["recovery-25prb"] * fidelity.GRIDS[grid].repeats
    assert {r.params["faults"] for r in runs} == {"outage-3s"} and runs[0].params["cc"] == "cubic"
    (outage,) = campaign["faults"]["outage-3s"]
    assert (outage["kind"], outage["at_s"], outage["duration_s"]) == ("radio_outage", 3.0, 3.0)
    assert "pcap" in campaign["measurements"] and "min_stack_speed" not in campaign["retry"]  # judged by the clock
    assert "recovery-25prb" in fidelity.case_names(fidelity.GRIDS[grid])


def test_the_test_grid_has_no_recovery_case():
    assert "recovery" not in fidelity.build_plan("virtual", fidelity.TEST).campaigns
    assert not [c for c in fidelity.case_names(fidelity.TEST) if c.startswith("recovery-")]


def test_values_from_a_stored_srsran_zmq_row_without_a_capture(tmp_path):
    values = recovery_values({"faults": [ZMQ_ROW]}, tmp_path, MANIFEST)
    assert values.error is None
    assert values.values == pytest.approx({"rlf_delay_s": 1.15, "reattach_after_end_s": 1.32})
    assert values.missing == {"throughput_back_after_end_s": "no server capture with the workload's start time"}
    assert "stack at 0.55 of real time" in values.detail["rlf_delay_s"]
    assert "T310 started at +0.93 s" in values.detail["rlf_delay_s"]


def test_a_run_without_an_rlf_or_an_outage_row_says_so(tmp_path):
    no_rlf = recovery_values({"faults": [ZMQ_ROW | {"rlf_s": None, "reattach_after_end_s": None}]}, tmp_path,
                             MANIFEST)
    assert no_rlf.values == {} and no_rlf.missing["rlf_delay_s"] == "no radio link failure in the lab's events"
    assert recovery_values({"faults": []}, tmp_path, MANIFEST).error == "no radio_outage row in the run's metrics"
    unended = recovery_values({"faults": [ZMQ_ROW | {"end_s": None}]}, tmp_path, MANIFEST)
    assert unended.error == "the outage's end is not in the lab's events"


def _sent(back_at_s: float | None, span_s: float = 12.0) -> tuple[np.ndarray, np.ndarray]:
    """10 Mbit/s in 10 ms bins, nothing from 3 s until back_at_s (None: never back)."""
    t = np.arange(0.0, span_s, 0.01)
    on = (t < 3.0) | (t >= back_at_s if back_at_s is not None else False)
    return t, np.where(on, 10e6 * 0.01 / 8, 0.0)


def test_throughput_back_is_the_first_bin_after_the_end_from_which_300_ms_carry_90_percent():
    assert throughput_back_s(_sent(7.5), 3.0, 6.0, 12.0) == pytest.approx(7.5)
    assert throughput_back_s(_sent(5.0), 3.0, 6.0, 12.0) == pytest.approx(6.0)  # counted from the end only
    assert throughput_back_s(_sent(None), 3.0, 6.0, 12.0) is None
    assert throughput_back_s((np.array([9.0]), np.array([1e5])), 3.0, 6.0, 12.0) is None  # no level before


def test_the_capture_is_read_on_the_workloads_clock(tmp_path, monkeypatch):
    """flowstat's times start at the capture's first packet; the workload's at manifest workload_started_at."""
    t = [round(x, 2) for x in np.arange(0.0, 11.0, 0.01)]
    bps = [0.0 if 3.5 <= x < 7.8 else 10e6 for x in t]  # the capture started 0.5 s before the workload
    doc = {"start_epoch_s": 999.5, "flows": [
        {"counted": True, "throughput_series": {"interval_s": 0.01, "t_s": t, "bps": bps}},
        {"counted": False, "throughput_series": {"interval_s": 0.01, "t_s": [5.0], "bps": [1e9]}}]}
    monkeypatch.setattr("cellab.results.pcapmetrics.run_flowstat", lambda *a, **k: doc)
    (tmp_path / "server.pcap").write_bytes(b"")
    virtual_row = ZMQ_ROW | {"times_from": "cell", "start_s": 3.0, "end_s": 6.0, "recovery_s": 1.4}
    values = recovery_values({"faults": [virtual_row]}, tmp_path, MANIFEST)
    assert values.values["throughput_back_after_end_s"] == pytest.approx(1.3)
    assert values.detail["throughput_back_after_end_s"] == "server capture; the cell's TTI log: 1.40 s"
    doc["flows"] = doc["flows"][1:]
    assert "no download flow" in recovery_values({"faults": [virtual_row]}, tmp_path, MANIFEST).missing[
        "throughput_back_after_end_s"]


@pytest.mark.parametrize("metric, real, virtual, verdict", [
    ("rlf_delay_s", 0.45, 0.20, "PASS"),
    ("rlf_delay_s", 1.15, 0.20, "FAIL"),
    ("reattach_after_end_s", 1.10, 0.15, "PASS"),
    ("reattach_after_end_s", 1.32, 0.15, "FAIL"),
    ("throughput_back_after_end_s", 2.0, 0.6, "PASS"),
    ("throughput_back_after_end_s", 3.6, 0.5, "FAIL"),
])
def test_recovery_tolerances_are_absolute_seconds(metric, real, virtual, verdict):
    row = compare("recovery-25prb", metric, real, virtual, deviations=())
    assert row.verdict == verdict and row.tolerance.endswith(" s"), row


def test_a_quantity_one_lab_cannot_measure_is_not_measured_with_its_reason(tmp_path):
    real = {"recovery-25prb": [recovery_values({"faults": [ZMQ_ROW | {"rlf_s": 3.4}]}, tmp_path, MANIFEST)
                               for _ in range(3)]}
    virtual = {"recovery-25prb": [CaseValues({"rlf_delay_s": 0.2, "reattach_after_end_s": 0.15,
                                              "throughput_back_after_end_s": 0.5}) for _ in range(3)]}
    rows = {r.metric: r for r in fidelity_rows(["recovery-25prb"], real, virtual, deviations=())}
    assert list(rows) == ["RLF after start (s)", "re-attach after end (s)",
                          "rate back after end (s)"]
    assert rows["RLF after start (s)"].verdict == "PASS"
    assert rows["re-attach after end (s)"].verdict == "FAIL"
    assert rows["rate back after end (s)"].verdict == (
        "not measured: srsran-zmq: no server capture with the workload's start time")


def test_the_bench_can_run_the_recovery_case_alone():
    from cellab.fidelity.bench import only_cases

    built = only_cases(fidelity.build_plan("srsran-zmq", fidelity.QUICK, capabilities=({"n_prb"}, 1, 30.0)),
                       "recovery-*")
    assert list(built.campaigns) == ["recovery"] and built.missing_cases == {}
    assert list(built.campaigns["recovery"]["factors"]["case"]) == ["recovery-25prb"]
