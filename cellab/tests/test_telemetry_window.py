"""A run's telemetry is filed by each sample's own time: nothing from before its workload, a report that
arrives late still in its own run, nothing after the run's window."""

from __future__ import annotations

import json
import time

from cellab.run.telemetry import TelemetryRecorder


def _rows(folder):
    return [json.loads(line) for line in (folder / "telemetry" / "enb1.jsonl").read_text().splitlines()]


def test_samples_are_filed_by_their_own_time_not_by_arrival(tmp_path):
    recorder = TelemetryRecorder()
    offset_s = 0.25  # the agent's clock runs 0.25 s ahead of the controller's
    recorder.start(tmp_path, {"enb1": offset_s})
    opened = time.time()
    # the previous run's last report period, arriving now (srsenb reports up to ~3 s late)
    recorder.on_sample("enb1", "ue_metrics", {"t_s": opened - 2.0 + offset_s, "dl_cqi": 15})
    recorder.on_sample("enb1", "ue_metrics", {"t_s": opened + 0.5 + offset_s, "dl_cqi": 5})
    recorder.on_sample("enb1", "ue_metrics", {"agent_time_s": opened + 0.6 + offset_s, "dl_cqi": 6})  # no own time
    closed = opened + 1.0
    recorder.close_window(closed)
    recorder.on_sample("enb1", "ue_metrics", {"t_s": closed - 0.1 + offset_s, "dl_cqi": 7})  # late, but this run's
    recorder.on_sample("enb1", "ue_metrics", {"t_s": closed + 0.9 + offset_s, "dl_cqi": 9})  # the next run's
    recorder.stop()
    rows = _rows(tmp_path)
    assert [r["dl_cqi"] for r in rows] == [5, 6, 7]
    assert rows[0]["t_s"] == opened + 0.5  # on the controller's clock
    assert all(r["topic"] == "ue_metrics" for r in rows)
    assert recorder.dropped == 2
    recorder.on_sample("enb1", "ue_metrics", {"t_s": time.time(), "dl_cqi": 3})  # between runs: not kept
    assert [r["dl_cqi"] for r in _rows(tmp_path)] == [5, 6, 7]
