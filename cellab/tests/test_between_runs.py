"""Issue 40: the attenuation between runs is the campaign's choice (`between_runs.attenuation`). Before, a schedule
the run's end stopped sent the box to its safe state (max_db), so every scheduled run began at max_db (a phone
detaches there); with `hold` the next run begins at the level the last one ended on, with a level at that level."""

from __future__ import annotations

import json
import sqlite3
import textwrap

import pytest

from cellab.campaign.load import load_campaign
from cellab.errors import InputErrors
from cellab.testkit.helpers import only_folder, result_rows, run_cellab

# nothing in the run's first second (the level it begins with shows), then 20 dB, 40 dB, and 40 dB far past the
# 3 s workload: the run's end stops it at 40 dB
WALK = "t_s,channel,db\n1.0,1,20\n2.0,1,40\n60,1,40\n"


def _campaign(tmp_path, between: str):
    (tmp_path / "walk.csv").write_text(WALK)
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent(f"""
        name: between
        lab: virtual
        repeat: 2
        between_runs: {{attenuation: {between}}}
        fixed: {{schedule: walk}}
        schedules: {{walk: {{file: walk.csv}}}}
        workload: {{duration_s: 3, ping_interval_ms: null}}
        timeouts: {{run_s: 60, request_s: 10}}
        retry: {{max_attempts: 1, backoff_s: 0.1, max_late_tti_fraction: null}}
    """))
    return path


@pytest.mark.parametrize("between, says", [("200", "between_runs.attenuation: 200.0 dB is beyond the attenuator vlab-atten"),
                                           ("maybe", "between_runs.attenuation")])
def test_a_level_off_the_box_is_refused(tmp_path, between, says):
    with pytest.raises(InputErrors) as caught:
        load_campaign(_campaign(tmp_path, between))
    assert says in str(caught.value), str(caught.value)


# hold is shown on the phone (ue-agents/tests/test_android_between_runs.py) and safe is every campaign's end: both
# here in make bench BENCH=extended (12 s of exclusive lab time each), a named level in make test
@pytest.mark.parametrize("between, first_db", [pytest.param("hold", 40.0, marks=pytest.mark.extended), ("33", 33.0),
                                               pytest.param("safe", 0.0, marks=pytest.mark.extended)])
def test_the_next_run_begins_where_the_campaign_says(require_root, netns_prefix, tmp_path, between, first_db):
    out = tmp_path / "out"
    result = run_cellab("run", str(_campaign(tmp_path, between)), "--out", str(out), "--prefix", netns_prefix,
                        "--no-report")
    assert result.returncode == 0, result.stdout + result.stderr
    folder = only_folder(out)
    rows = result_rows(folder)
    assert [r[1] for r in rows] == ["ok", "ok"], rows
    second = folder / "runs" / rows[1][0] / "telemetry" / "cell.jsonl"
    cell = [json.loads(line) for line in second.read_text().splitlines()]
    start = json.loads((folder / "runs" / rows[1][0] / "manifest.json").read_text())["workload_started_at"]
    before = [c["attenuation_db"] for c in cell if c.get("ue") == 0 and "attenuation_db" in c and c["t_s"] < start + 0.9]
    # the safe state: the box at max_db between the runs; the virtual cell restarts per run at the run's own
    # static attenuation_db (0 dB), as a phone re-attaching would begin the run from scratch
    assert before and set(before) == {first_db}, before
    with sqlite3.connect(folder / "results.sqlite") as db:
        metrics = json.loads(db.execute("SELECT metrics FROM runs WHERE run_id = ?", (rows[1][0],)).fetchone()[0])
    if between != "safe":  # the held level, read back, then the virtual UE's signal taken after it (safe: none set)
        start = metrics["first_sample"]
        assert start["confirmed_db"] == {"1": first_db} and start["stale"] == [] and "ue0" in start["fresh"], start
