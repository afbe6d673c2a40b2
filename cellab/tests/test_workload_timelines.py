"""Issue 40: iperf3 runs get timelines as probe runs do (docs/metrics.md `timeline`): per UE throughput (iperf3's
intervals), RTT (ping -D, on the controller's clock) and the attenuation on the UE's own channel; the report
draws them (a line per UE in the attenuation, rate and RTT rows)."""

from __future__ import annotations

import json
import textwrap

import pytest

from cellab.report.timeline import timeline, timeline_data
from cellab.results.metrics import multi_ue_metrics
from cellab.results.workload_timelines import (attenuation_timeline, iperf3_throughput_timeline,
                                               ping_rtt_timeline)
from cellab.testkit.helpers import only_folder, result_rows, run_cellab

T0 = 1_700_000_000.0


def test_iperf3_intervals_ping_lines_and_each_channel(tmp_path):
    doc = {"intervals": [{"sum": {"start": float(i), "end": i + 1.0, "bits_per_second": 1e6 * (i + 1)}}
                         for i in range(3)]}
    (tmp_path / "i.json").write_text(json.dumps(doc))
    assert iperf3_throughput_timeline(tmp_path / "i.json")["throughput_bps"] == {
        "t_s": [0.5, 1.5, 2.5], "v": [1e6, 2e6, 3e6]}  # each second's rate at its middle
    (tmp_path / "bad.json").write_text("{not json")
    assert iperf3_throughput_timeline(tmp_path / "bad.json") == {}
    # the UE's clock 0.5 s ahead of the controller's: ping's stamps move back by it
    (tmp_path / "ping.txt").write_text(
        "PING 10.0.0.1 (10.0.0.1) 56(84) bytes of data.\n"
        f"[{T0 + 1.7:.6f}] 64 bytes from 10.0.0.1: icmp_seq=2 ttl=64 time=31.5 ms\n"
        f"[{T0 + 1.5:.6f}] 64 bytes from 10.0.0.1: icmp_seq=1 ttl=64 time=30.0 ms\n")
    rtt = ping_rtt_timeline(tmp_path / "ping.txt", T0, offset_s=0.5)["rtt_ms"]
    assert rtt["t_s"] == pytest.approx([1.0, 1.2]) and rtt["v"] == [30.0, 31.5]
    log = tmp_path / "att.jsonl"
    rows = [{"event": "start", "t0_wall_s": T0}] + [
        {"planned_s": t, "applied_s": t, "channel": ch, "db": db} for t, ch, db in ((0, 1, 10), (0, 2, 30), (1, 2, 35))]
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert attenuation_timeline(log, T0, 0.0, channel=2)["attenuation_db"]["v"] == [30.0, 35.0]
    assert attenuation_timeline(log, T0, 0.0)["attenuation_db"]["v"] == [10.0]


def test_a_run_with_several_ues_keeps_each_ues_lines_and_the_report_draws_them():
    line = {"t_s": [0.0, 1.0], "v": [1.0, 2.0]}
    per_ue = {name: {"throughput_bps": 1e6, "rtt_mean_ms": 30.0,
                     "timeline": {"throughput_bps": line, "rtt_ms": line, "attenuation_db": line}}
              for name in ("phone", "ue1")}
    series = multi_ue_metrics(per_ue)["timeline"]
    assert set(series) == {f"{s}.{u}" for s in ("throughput_bps", "rtt_ms", "attenuation_db")
                           for u in ("phone", "ue1")}
    data = timeline_data(series)
    assert set(data.rtt_per_ue) == set(data.atten_per_ue) == set(data.per_ue) == {"phone", "ue1"}
    png, svg = timeline("two UEs", series)
    assert png.startswith(b"\x89PNG") and svg.count(b"<path") > 6


WALK = "channels: [1, 2]\nupdate_interval_s: 0.25\nsegments:\n  - {kind: ramp, from_db: 20, to_db: 40, duration_s: 2}\n"


def test_an_iperf3_run_with_two_ues_has_throughput_rtt_and_attenuation_per_ue(require_root, netns_prefix,
                                                                             tmp_path):
    """Two UEs on the virtual lab, iperf3 with ping, a ramp on both channels: each UE's timeline has all three
    lines on the workload's axis, and the report's timeline is drawn."""
    (tmp_path / "walk.yaml").write_text(WALK)
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent("""
        name: iperf3-lines
        lab: virtual
        fixed: {ues: 2, schedule: walk, attenuation_db: 20}
        schedules: {walk: {file: walk.yaml}}
        workload: {tool: iperf3, duration_s: 3, ping_interval_ms: 200}
        timeouts: {run_s: 60, request_s: 10}
        retry: {max_attempts: 2, backoff_s: 0.1, max_late_tti_fraction: null}
    """))
    out = tmp_path / "out"
    result = run_cellab("run", str(path), "--out", str(out), "--prefix", netns_prefix)
    assert result.returncode == 0, result.stdout + result.stderr
    folder = only_folder(out)
    (run_id, status, *_), = result_rows(folder)
    assert status == "ok"
    series = json.loads((folder / "runs" / run_id / "metrics.json").read_text())["timeline"]
    ues = sorted(k.split(".", 1)[1] for k in series if k.startswith("throughput_bps."))
    assert len(ues) == 2, sorted(series)
    for ue in ues:
        rate, rtt, atten = (series[f"{s}.{ue}"] for s in ("throughput_bps", "rtt_ms", "attenuation_db"))
        assert len(rate["v"]) >= 2 and max(rate["v"]) > 0  # iperf3's 1 s intervals
        assert len(rtt["v"]) >= 5 and all(0 < v < 2000 for v in rtt["v"])  # ping every 200 ms for 3 s
        assert -1.0 < rtt["t_s"][0] < 1.5 and rtt["t_s"][-1] < 5.0  # on the workload's axis
        assert min(atten["v"]) == pytest.approx(20, abs=0.5) and max(atten["v"]) >= 39.5
    assert "Timelines per run" in (folder / "report.html").read_text()
