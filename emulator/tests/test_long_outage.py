"""A UE out for a minute is not an agent lost (issue 41): a 60 s ue_pause of one UE of two on the virtual lab, inside
a 66 s download to each. The paused UE's processes are frozen, its agent is not: it keeps its heartbeats and says
its UE is paused (its `ue_state` telemetry, sent while the UE was frozen), so the campaign never declares it lost
and the run is ok; the other UE's download goes on without a stall (it has the cell to itself meanwhile). `make test`
pauses 15 s (three times the bus's 5 s liveness bound), `make bench BENCH=extended` the whole minute.
Root: namespaces, the cgroup v2 freezer."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

from cellab.emulator.ttilog import read_ttilog
from cellab.testkit.helpers import only_folder, result_rows, run_cellab

PAUSE_AT_S = 3.0


def campaign(pause_s: float) -> str:
    return textwrap.dedent(f"""
        name: long-outage
        lab: virtual
        factors:
          faults: [pause]
        faults:
          pause: [{{kind: ue_pause, ue: 1, at_s: {PAUSE_AT_S}, duration_s: {pause_s}}}]
        fixed: {{n_prb: 25, core_delay_ms: 10, attenuation_db: 20, ues: 2}}
        workload: {{tool: probe, duration_s: {pause_s + 6:g}}}
        timeouts: {{run_s: 200, request_s: 20}}
        retry: {{max_attempts: 1, backoff_s: 1, max_late_tti_fraction: null}}  # one attempt: the pause is the test
    """)


@pytest.mark.timeout(400)
@pytest.mark.parametrize("pause_s", [15.0, pytest.param(60.0, marks=pytest.mark.extended)])
def test_a_long_pause_of_one_ue_keeps_its_agent_and_leaves_the_other_ue_undisturbed(require_root, netns_prefix,
                                                                                    tmp_path, pause_s):
    path = tmp_path / "long.yaml"
    path.write_text(campaign(pause_s))
    out = tmp_path / "out"
    result = run_cellab("run", str(path), "--out", str(out), "--prefix", netns_prefix, "--no-report", timeout_s=380)
    said = result.stdout + result.stderr
    assert result.returncode == 0, said
    assert "agent_lost" not in said and "ue1 lost" not in said, said  # the controller never gave the agent up
    folder = only_folder(out)
    ((run_id, status, *_),) = result_rows(folder)
    assert status == "ok"
    run_dir = folder / "runs" / run_id
    faults = json.loads((run_dir / "faults.json").read_text())
    (row,) = faults["recovery"]
    assert row["times_from"] == "cell" and abs(row["end_s"] - row["start_s"] - pause_s) < 0.5, row
    assert faults["final_state"]["ue_paused"] == []

    # the paused UE's agent said so during the pause, on its own (it was not frozen), and said it was back
    t0 = json.loads((run_dir / "manifest.json").read_text())["workload_started_at"]
    states = [(r["t_s"] - t0, r["state"]) for r in map(json.loads, (run_dir / "telemetry" / "ue1.jsonl")
                                                       .read_text().splitlines()) if r["topic"] == "ue_state"]
    (paused_at,) = [t for t, s in states if s == "paused"]
    back_at = next(t for t, s in states if s == "in" and t > paused_at)
    assert row["start_s"] - 0.1 < paused_at < row["start_s"] + 1.5, states  # within a heartbeat of the freeze
    assert row["end_s"] - 0.1 < back_at < row["end_s"] + 1.5, states

    # the other UE: no stall over 1 s during the pause, and at least its pre-pause rate (the cell was its alone)
    log = read_ttilog(run_dir / "cell_tti.bin")
    mark = json.loads((run_dir / "manifest.json").read_text())["cell_clock_mark"]
    rec = log.ue(0)
    t = mark["t_s"] + (rec["tti"] - mark["tti"]) / 1000 - t0
    sent = t[rec["dl_delivered_bytes"] > 0]
    during = sent[(sent > row["start_s"]) & (sent < row["end_s"])]
    assert during.size and np.diff(np.concatenate([[row["start_s"]], during, [row["end_s"]]])).max() < 1.0

    def rate(lo: float, hi: float) -> float:
        sel = (t >= lo) & (t < hi)
        return float(rec["dl_delivered_bytes"][sel].sum()) * 8 / (hi - lo)

    assert rate(row["start_s"] + 1, row["end_s"]) >= 0.9 * rate(1.0, row["start_s"]), (
        rate(1.0, row["start_s"]), rate(row["start_s"] + 1, row["end_s"]))
