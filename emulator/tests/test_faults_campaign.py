"""Faults as a factor of a campaign on the virtual lab (issue 28's Show, short): a 0.6 s radio outage and a
0.5 s S1 cut inside 5 s Cubic downloads (after the
outage TCP waits for its backed-off retransmission timer: CI saw no recovery to 90 % within 3 s). The recovery figures come from the cell's own events and TTI log
(not from the plan): the outage's radio link failure T310 after the cell lost the link and the re-attach
reest_ms after it came back; the S1 cut without either; the report's recovery table and the fault marks on
the timelines. Root: namespaces, the attenuator bridge."""

from __future__ import annotations

import json
import sqlite3
import textwrap

from cellab.faults.recovery import read_cell_events
from cellab.testkit.helpers import only_folder, run_cellab

CAMPAIGN = textwrap.dedent("""
    name: faults-short
    lab: virtual
    factors:
      faults: [outage, s1-cut]
    faults:
      outage: [{kind: radio_outage, at_s: 1.0, duration_s: 0.6}]
      s1-cut: [{kind: s1_cut, at_s: 1.0, duration_s: 0.5}]
    fixed: {n_prb: 25, core_delay_ms: 10, attenuation_db: 20}
    workload: {tool: probe, duration_s: 5}
    measurements: [throughput, rtt, pcap]
    timeouts: {run_s: 60, request_s: 20}
    retry: {max_attempts: 3, backoff_s: 1}
""")


def test_faults_as_a_factor_recover_on_the_runs_timeline(require_root, netns_prefix, tmp_path):
    path = tmp_path / "faults.yaml"
    path.write_text(CAMPAIGN)
    out = tmp_path / "out"
    result = run_cellab("run", str(path), "--out", str(out), "--prefix", netns_prefix)
    assert result.returncode == 0, result.stdout + result.stderr
    folder = only_folder(out)
    with sqlite3.connect(folder / "results.sqlite") as db:
        rows = {json.loads(factors)["faults"]: (run_id, status)
                for run_id, status, factors in db.execute("SELECT run_id, status, factors FROM runs")}
    assert {k: v[1] for k, v in rows.items()} == {"outage": "ok", "s1-cut": "ok"}

    # the outage: times from the cell's events, the RLF T310 (200 ms) after the first out-of-sync frame,
    # re-established reest_ms (150) after the first in-sync frame once the attenuation came back
    run_dir = folder / "runs" / rows["outage"][0]
    report = json.loads((run_dir / "faults.json").read_text())
    (fault,) = report["recovery"]
    assert fault["times_from"] == "cell"
    events = {e["event"]: e for e in read_cell_events(run_dir / "cell.log")}
    marks = [e for e in read_cell_events(run_dir / "cell.log") if e["event"] == "attenuation"]
    lost, back = marks[-2]["tti"], marks[-1]["tti"]
    assert marks[-2]["attenuation_db"] == 95.0 and marks[-1]["attenuation_db"] == 20.0
    assert events["rlf"]["tti"] - events["t310_start"]["tti"] == 200
    assert events["t310_start"]["tti"] - lost < 10
    assert events["reest_complete"]["tti"] - events["reest_start"]["tti"] == 150
    assert 0 <= events["reest_start"]["tti"] - back < 10
    # on the run's timeline: the measured end is the cell's, the re-attach 150..160 ms after it
    assert abs((fault["end_s"] - fault["start_s"]) - (back - lost) / 1000) < 0.002
    assert 0.149 <= fault["reattach_after_end_s"] <= 0.161, fault
    assert fault["reattach_by"] == "reest"
    # T310 can start in the outage's own TTI; 200 TTIs on the cell's clock are 200 ms of wall to within the TTIs'
    # own timing (a clean-clone CI run: 0.199995 s), so a microsecond bound was too tight
    assert fault["rlf_s"] - fault["start_s"] >= 0.2 - 1e-4, fault
    # throughput came back after the re-attach, and the stall covers at least the outage and the procedure
    assert fault["throughput_back_s"] is not None and fault["throughput_back_s"] >= fault["reattach_s"] - 0.1
    assert fault["longest_stall_s"] >= fault["reattach_s"] - fault["start_s"] - 0.05
    # the user plane restored (the first byte delivered after the end) after the re-attach, before throughput was back
    assert fault["reattach_s"] - 0.01 <= fault["user_plane_restored_s"] <= fault["throughput_back_s"] + 0.1, fault
    assert report["final_state"]["rrc_state"] == {"0": "connected"}

    # the S1 cut: no RLF, packets lost at the cut, back after it
    run_dir = folder / "runs" / rows["s1-cut"][0]
    report = json.loads((run_dir / "faults.json").read_text())
    (fault,) = report["recovery"]
    assert fault["times_from"] == "cell" and fault["rlf_s"] is None
    assert abs((fault["end_s"] - fault["start_s"]) - 0.5) < 0.1
    assert fault["lost_bytes"] > 0
    assert report["final_state"]["s1_up"] is True

    # the report: the recovery table and the fault marks' legend on the timelines
    html = (folder / "report.html").read_text()
    assert "Faults and recovery" in html and "Recovery per fault plan and scheme" in html
    assert "re-attach" in html and "dashed green" in html
    # each UE's outage and return on one time axis (issue 41), from the runs' fault events
    assert "each UE&#39;s outage and return" in html or "each UE's outage and return" in html
    assert (folder / "report" / "fault-outages.svg").is_file()
    events = json.loads((folder / "runs" / rows["outage"][0] / "metrics.json").read_text())["fault_events"]
    assert [e["event"] for e in events][:2] == ["fault_start", "out_of_sync"]
    assert {"rlf", "reattach", "fault_end"} <= {e["event"] for e in events}
