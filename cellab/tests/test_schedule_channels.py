"""Issue 40: a schedule moves the channels its file names, and no other. Before, a run's schedule for channel 1
was moved onto every UE's channel (a pedestrian walk meant for the phone walked both UEs); now a file whose
channels are not the campaign's UEs' is refused at validate, naming both, and a run moves only its channels."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from cellab.campaign.load import load_campaign
from cellab.errors import InputErrors
from cellab.testkit.helpers import only_folder, result_rows, run_cellab

WALK = "channels: [{ch}]\nupdate_interval_s: 0.25\nsegments:\n  - {{kind: ramp, from_db: 20, to_db: 40, duration_s: 2}}\n"


def _campaign(tmp_path: Path, fixed: str, channel: int) -> Path:
    (tmp_path / "walk.yaml").write_text(WALK.format(ch=channel))
    path = tmp_path / "c.yaml"
    path.write_text(f"name: c\nlab: virtual\nfixed: {fixed}\nschedules: {{walk: {{file: walk.yaml}}}}\n"
                    "workload: {duration_s: 2}\n")
    return path


@pytest.mark.parametrize("fixed, channel, field, says", [
    ("{ues: 2, schedule: walk}", 3, "fixed.schedule",
     "schedule 'walk' moves channel 3 (its file's channels), but the campaign's UEs are #0 on channel 1, #1 on channel 2"),
    ("{ues: [{name: a}, {name: b, schedule: walk}]}", 1, "fixed.ues[1].schedule",
     "schedule 'walk' moves channel 1 (its file's channels), but UE b is on channel 2"),
])
def test_validate_refuses_a_schedule_off_the_ues_channels(tmp_path, fixed, channel, field, says):
    with pytest.raises(InputErrors) as caught:
        load_campaign(_campaign(tmp_path, fixed, channel))
    said = str(caught.value)
    assert f"{field}: {says}" in said, said


@pytest.mark.parametrize("fixed, channel", [("{ues: 2, schedule: walk}", 1), ("{ues: 2, schedule: walk}", 2),
                                            ("{ues: [{name: a}, {name: b, schedule: walk}]}", 2)])
def test_validate_takes_a_schedule_on_a_ues_channel(tmp_path, fixed, channel):
    load_campaign(_campaign(tmp_path, fixed, channel))


def test_a_schedule_for_channel_1_leaves_the_other_ue_flat(require_root, netns_prefix, tmp_path):
    """Two UEs at 30 dB, the run's schedule a ramp on channel 1: the player's log has points on channel 1 only,
    and the cell's own view of UE 1 (channel 2) keeps 30 dB throughout the run while UE 0's moves."""
    (tmp_path / "walk.yaml").write_text(WALK.format(ch=1))
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent("""
        name: chan
        lab: virtual
        fixed: {ues: 2, schedule: walk, attenuation_db: 30}
        schedules: {walk: {file: walk.yaml}}
        workload: {duration_s: 3, ping_interval_ms: null}
        timeouts: {run_s: 60, request_s: 10}
        retry: {max_attempts: 2, backoff_s: 0.1, max_late_tti_fraction: null}
    """))
    out = tmp_path / "out"
    result = run_cellab("run", str(path), "--out", str(out), "--prefix", netns_prefix, "--no-report")
    assert result.returncode == 0, result.stdout + result.stderr
    folder = only_folder(out)
    (run_id, status, *_), = result_rows(folder)
    assert status == "ok"
    run_dir = folder / "runs" / run_id
    played = [json.loads(line) for line in (run_dir / "attenuation.jsonl").read_text().splitlines()]
    points = [p for p in played if "planned_s" in p]
    assert points and {p["channel"] for p in points} == {1}, played
    assert max(p["db"] for p in points) >= 39.5
    cell = [json.loads(line) for line in (run_dir / "telemetry" / "cell.jsonl").read_text().splitlines()]
    seen = {ue: [c["attenuation_db"] for c in cell if c.get("ue") == ue and "attenuation_db" in c] for ue in (0, 1)}
    assert len(seen[1]) >= 10 and set(seen[1]) == {30.0}, seen[1]  # the other channel never moved
    assert max(seen[0]) >= 39.5, seen[0]
