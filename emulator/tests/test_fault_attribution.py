"""Two faults close together on one UE (the virtual lab, short): a 0.2 s outage, shorter than T310 (no radio link
failure), then 0.4 s after it a 1.5 s outage that does fail the link. T310 is 1 s here (srsenb's SIB2 says 200 ms)
so that each outage is 0.5 s or more from it: a loaded host's late attenuator commands stretch an outage by some
100 ms, and with 200 ms the short one once became a radio link failure of its own. The first fault's recovery row searches only
up to the second's start: the radio link failure the cell logged belongs to the second row, not the first.
Root: namespaces, the attenuator bridge."""

from __future__ import annotations

import json
import textwrap

from cellab.faults.recovery import read_cell_events
from cellab.testkit.helpers import only_folder, result_rows, run_cellab

T310_MS = 1000
SHORT_AT_S, SHORT_S = 1.0, 0.2  # this one only goes out of sync
LONG_AT_S, LONG_S = 1.6, 1.5

CAMPAIGN = textwrap.dedent(f"""
    name: fault-attribution
    lab: virtual
    factors: {{faults: [two]}}
    faults:
      two:
        - {{kind: radio_outage, at_s: {SHORT_AT_S}, duration_s: {SHORT_S}}}
        - {{kind: radio_outage, at_s: {LONG_AT_S}, duration_s: {LONG_S}}}
    fixed: {{n_prb: 25, core_delay_ms: 10, attenuation_db: 20, t310_ms: {T310_MS}}}
    workload: {{tool: probe, duration_s: 5}}
    timeouts: {{run_s: 60, request_s: 20}}
    retry: {{max_attempts: 1, backoff_s: 0}}
""")


def test_the_first_faults_row_does_not_take_the_next_faults_radio_link_failure(require_root, netns_prefix,
                                                                                tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(CAMPAIGN)
    out = tmp_path / "out"
    done = run_cellab("run", str(path), "--out", str(out), "--prefix", netns_prefix)
    folder = only_folder(out)
    ((run_id, status, _, _, error),) = result_rows(folder)
    assert status == "ok", (error, (done.stdout + done.stderr)[-3000:])
    run_dir = folder / "runs" / run_id
    short, long_ = json.loads((run_dir / "faults.json").read_text())["recovery"]
    cell_t0 = short["start_s"]  # the cell's TTI of the first outage is this time on the run's axis
    events = read_cell_events(run_dir / "cell.log")
    lost = next(e["tti"] for e in events if e["event"] == "attenuation" and e["attenuation_db"] >= 94.5)
    (rlf,) = [(e["tti"] - lost) / 1000 + cell_t0 for e in events if e["event"] == "rlf"]  # the cell's one RLF

    # the cell's radio link failure came in the second outage; without the bound the first row would take it
    assert long_["start_s"] < rlf < long_["end_s"], (rlf, long_)
    assert long_["rlf_s"] is not None and abs(long_["rlf_s"] - rlf) < 0.002, long_
    assert long_["reattach_s"] > long_["end_s"] and "cut_by_fault" not in long_, long_
    # the first row: searched up to the second's start, out of sync in its own outage, no radio link failure
    assert short["cut_by_fault"] == 1 and short["searched_until_s"] == long_["start_s"], short
    assert short["rlf_s"] is None and "reattach_s" not in short, short
    assert short["start_s"] <= short["out_of_sync_s"] < short["end_s"] + 0.01, short
    back = short["throughput_back_s"]
    assert back is None or back < long_["start_s"], short
    assert short["longest_stall_s"] <= long_["start_s"] - short["start_s"] + 1e-9, short
