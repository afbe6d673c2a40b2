"""Issue 40 on the fake adb farm (`cellab run --lab virtual-android`, one of the README's lab kinds: a virtual
phone behind the real adb client, driven by the Android agent, its 1 Hz signal log among the UE's artifacts): with
`between_runs.attenuation: hold` the next run's first phone sample is at the held level, not at the box's max_db,
and it was taken after the attenuator read that level back (cellab.run.first_sample)."""

from __future__ import annotations

import json
import shutil
import socket
import sqlite3
import textwrap

import pytest

from cellab.testkit.helpers import only_folder, run_cellab

# the run's own 0 dB for its first second, then 20 dB, then 40 dB held past the 3 s workload: the run ends at 40 dB
WALK = "t_s,channel,db\n1.0,1,20\n2.0,1,40\n60,1,40\n"
CAMPAIGN = textwrap.dedent("""
    name: android-hold
    repeat: 2
    between_runs: {attenuation: hold}
    fixed: {schedule: walk}
    schedules: {walk: {file: walk.csv}}
    workload: {duration_s: 3, ping_interval_ms: null}
    timeouts: {run_s: 90, request_s: 20}
    retry: {max_attempts: 1, backoff_s: 0.1, max_late_tti_fraction: null}
""")


def _signal(folder, run_id):
    lines = (folder / "runs" / run_id / "telemetry" / "ue0.jsonl").read_text().splitlines()
    return [row["rsrp_dbm"] for row in map(json.loads, lines) if row.get("topic") == "signal"]


def test_the_next_runs_first_phone_sample_is_at_the_held_level(require_root, netns_prefix, tmp_path):
    if shutil.which("adb") is None:
        pytest.fail("adb is missing: `make setup` installs it")
    (tmp_path / "walk.csv").write_text(WALK)
    path = tmp_path / "c.yaml"
    path.write_text(CAMPAIGN)
    out = tmp_path / "out"
    result = run_cellab("run", str(path), "--lab", "virtual-android", "--out", str(out), "--prefix", netns_prefix,
                        "--no-report")
    assert result.returncode == 0, result.stdout + result.stderr
    # each agent's connection said by `cellab run` (role, name, host, key fingerprint)
    assert f"agent ue0 connected: role ue, host {socket.gethostname()} (127.0.0.1), key " in result.stderr, \
        result.stderr
    folder = only_folder(out)
    with sqlite3.connect(folder / "results.sqlite") as db:
        rows = db.execute("SELECT run_id, status, metrics FROM runs ORDER BY idx").fetchall()
        stale = db.execute("SELECT run_id, detail FROM run_flags WHERE flag = 'stale-telemetry'").fetchall()
    assert [r[1] for r in rows] == ["ok", "ok"], rows
    first, second = (json.loads(r[2])["first_sample"] for r in rows)
    # run 1 begins at its own 0 dB; run 2 at the 40 dB run 1 ended on, each read back before the phone's sample
    assert first["confirmed_db"] == {"1": 0.0} and second["confirmed_db"] == {"1": 40.0}, (first, second)
    # nothing the start waited for ran out, and the jump heuristic takes run 1's schedule from the 0 dB it began at
    assert first["stale"] == second["stale"] == [] and stale == [], stale
    at_0_db, at_40_db = first["fresh"]["ue0"]["rsrp_dbm"], second["fresh"]["ue0"]["rsrp_dbm"]
    assert second["fresh"]["ue0"]["after_confirmed_s"] >= -0.05
    assert 35 <= at_0_db - at_40_db <= 45, (at_0_db, at_40_db)  # 40 dB more in front of the phone
    # the run's own telemetry: its first phone sample is at the held level (max_db would be 20 dB lower still)
    run1, run2 = _signal(folder, rows[0][0]), _signal(folder, rows[1][0])
    assert run2 and abs(run2[0] - at_40_db) <= 3, (run2, at_40_db)
    assert run1 and abs(run1[-1] - at_40_db) <= 3, (run1, at_40_db)
    for run_id, *_ in rows:  # the Android agent's 1 Hz signal log (the phone's dumpsys) is a UE artifact
        assert list((folder / "runs" / run_id / "ues" / "ue0").glob("*-signal.jsonl")), run_id
