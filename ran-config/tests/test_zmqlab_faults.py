"""Faults inside a run on srsran-zmq (issue 28). A radio outage: the lab's attenuator takes a UE to its maximum
(60 dB: the broker's gain on its downlink, SNR -30 dB against srsue's noise floor) for 3 s of a download and
back; srsue itself declares the radio link failure when T310 expires and comes back through RRC
re-establishment; the recovery figures come from the attenuation the broker applied and srsue's own RRC log, not
from the plan. An SGi cut: the core's link to the server down for 2 s, the UE staying connected. Beside them, a
run without a fault. Skipped, saying why, without the srsRAN bundle or root."""

from __future__ import annotations

import json

import pytest

from .conftest import LOCK_WAIT_S, run_zmq_campaign


@pytest.mark.root
@pytest.mark.extended  # two srsRAN runs (about 1.5 min)
@pytest.mark.timeout(LOCK_WAIT_S + 600)
def test_a_radio_outage_on_the_real_stack_is_an_rlf_and_a_reestablishment_from_srsues_log(bundle, tmp_path):
    folder, runs, log = run_zmq_campaign(bundle, tmp_path, (
        "name: zmq-outage\nlab: srsran-zmq\nrepeat: 1\n"
        "factors: {faults: [none, outage-3s, sgi-cut-2s]}\n"
        "faults: {outage-3s: [{kind: radio_outage, at_s: 3, duration_s: 3}],\n"
        "         sgi-cut-2s: [{kind: sgi_cut, at_s: 3, duration_s: 2}]}\n"
        "fixed: {n_prb: 25, cc: cubic, sr_period_ms: 20}\n"
        "workload: {tool: iperf3, duration_s: 14}\n"
        "timeouts: {run_s: 150, request_s: 10}\n"
        "retry: {max_attempts: 1, backoff_s: 0, min_stack_speed: null}\n"),  # judged: events, not rates
        "zqf", LOCK_WAIT_S)
    rows = {json.loads(factors)["faults"]: (run_id, status, error) for run_id, status, error, factors in runs}
    assert {k: v[1] for k, v in rows.items()} == {"none": "ok", "outage-3s": "ok", "sgi-cut-2s": "ok"}, (rows, log)
    report = json.loads((folder / "runs" / rows["outage-3s"][0] / "faults.json").read_text())
    (fault,) = report["recovery"]
    assert fault["times_from"] == "lab", fault
    # the broker applied the outage within 0.5 s of the plan, for 3 s
    assert abs(fault["start_s"] - 3.0) < 0.5 and abs(fault["end_s"] - fault["start_s"] - 3.0) < 0.5, fault
    # srsue's T310 (200 ms of stack time: up to ~3x that on a slow host) after it lost sync, inside the outage
    assert fault["start_s"] <= fault["out_of_sync_s"] < fault["rlf_s"] < fault["end_s"], fault
    assert fault["rlf_s"] - fault["out_of_sync_s"] >= 0.2 - 1e-3, fault
    # back through re-establishment once the signal returned, well before the workload's end
    assert fault["reattach_by"] == "reest" and 0 < fault["reattach_after_end_s"] < 5, fault
    assert report["final_state"]["rrc_state"] == {"0": "connected"}, report["final_state"]
    print(f"outage {fault['start_s']:.2f}-{fault['end_s']:.2f} s, RLF at {fault['rlf_s']:.2f} s, "
          f"re-established {fault['reattach_after_end_s']:.2f} s after the end")
    # the SGi cut: the link's own times, no radio link failure, the link up again at the end
    report = json.loads((folder / "runs" / rows["sgi-cut-2s"][0] / "faults.json").read_text())
    (cut,) = report["recovery"]
    assert cut["times_from"] == "lab" and cut["rlf_s"] is None, cut
    assert abs(cut["start_s"] - 3.0) < 0.5 and abs(cut["end_s"] - cut["start_s"] - 2.0) < 0.3, cut
    assert report["final_state"]["sgi_up"] is True and report["final_state"]["rrc_state"] == {"0": "connected"}
