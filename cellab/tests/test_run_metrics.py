"""Probe-workload metrics from artifacts written here by hand: every number checked against its input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cellab.errors import InputError
from cellab.results.metrics import (attenuation_timeline, probe_metrics, sender_metrics)
from cellab.testkit.helpers import write_probe_summary as write_summary
from cellab.campaign.traces import sample_commercial_trace, sample_drive_log, trace_from_probe_log, write_mahimahi

pytestmark = pytest.mark.shares_cpu  # wired labs, no module: beside other tests (conftest.py)

T0 = 1_700_000_000.0


def test_probe_summary_gives_fct_fairness_and_sr(tmp_path):
    m = probe_metrics(write_summary(tmp_path / "s.json", [10e6, 10e6], [5000, 5000]))
    assert m["throughput_bps"] == 20e6 and m["bytes_received"] == 3000
    assert m["fct_mean_s"] == pytest.approx(0.75)  # 0.5 s and 1.0 s
    assert m["jain_fairness"] == pytest.approx(1.0)
    assert m["sr_estimate_ms"] == 20.0 and m["sr_regime"] == "sr-limited"
    unfair = probe_metrics(write_summary(tmp_path / "u.json", [30e6, 10e6], [None, None]))
    assert unfair["jain_fairness"] == pytest.approx(40**2 / (2 * (30**2 + 10**2)))
    assert "fct_mean_s" not in unfair  # timed flows have no completion time
    none = probe_metrics(write_summary(tmp_path / "n.json", [5e6], [None], {"regime": "undetermined", "period_ms": None}))
    assert "sr_estimate_ms" not in none and none["sr_regime"] == "unknown"


def test_attenuation_timeline_uses_the_player_clock(tmp_path):
    log = tmp_path / "att.jsonl"
    rows = [{"event": "start", "t0_wall_s": T0 + 0.5}] + [
        {"planned_s": t, "applied_s": t + 0.001, "channel": 1, "db": db, "readback_db": db} for t, db in ((0, 10), (1, 30))]
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    series = attenuation_timeline(log, T0, offset_s=0.25)["attenuation_db"]
    assert series["t_s"] == pytest.approx([0.251, 1.251])  # agent clock 0.25 s ahead of the controller
    assert series["v"] == [10.0, 30.0]


def test_sender_rtt_skips_samples_before_the_first_ack(tmp_path):
    (tmp_path / "flows.jsonl").write_text(json.dumps({"flow_id": 1, "total_retrans": 3}) + "\n")
    samples = [{"t_ns": int((T0 + i * 0.01) * 1e9), "rtt_us": 40000 if i == 0 else 20000 + 1000 * i,
                "bytes_acked": 0 if i == 0 else 100 * i} for i in range(11)]
    (tmp_path / "flow-1.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    m = sender_metrics(tmp_path, T0, 0.0)
    assert m["retransmits"] == 3 and m["rtt_samples"] == 10
    assert m["rtt_min_ms"] == 21.0 and m["rtt_max_ms"] == 30.0 and m["rtt_mean_ms"] == pytest.approx(25.5)
    assert m["rtt_jitter_ms"] == pytest.approx(1.0)


def test_trace_from_probe_log_keeps_the_rate(tmp_path):
    log = tmp_path / "rec.csv"
    # 3000 bytes every ms for 2 s: 24 Mbit/s, two opportunities per ms
    log.write_text("ms,flow,bytes\n" + "".join(f"{1000 + i},0,3000\n" for i in range(2000)))
    ops = trace_from_probe_log(log)
    assert len(ops) == 4000 and ops[0] == 1 and ops[-1] == 2000
    packets = tmp_path / "pk.csv"
    packets.write_text("# cellab-probe events v1\nt_ns,flow,dir,seq,ack,len\n" + "".join(
        f"{i * 1_000_000},0,{d},0,0,{1500 if d == 0 else 0}\n" for i in range(100) for d in (0, 1)))
    assert trace_from_probe_log(packets) == list(range(1, 101))
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match="neither probe log"):
        trace_from_probe_log(bad)
    with pytest.raises(InputError, match="nonzero amount of time"):
        write_mahimahi(tmp_path / "x.down", [])


def test_samples_are_seeded_and_plausible():
    drive = sample_drive_log()
    assert drive == sample_drive_log()
    rsrp = np.array([r for _, r in drive])
    assert -124 <= rsrp.min() and rsrp.max() <= -70 and rsrp.std() > 5
    trace = sample_commercial_trace(drive)
    mbit = len(trace) * 1500 * 8 / trace[-1] / 1000
    assert 5 < mbit < 80 and trace == sorted(trace)


def raw_ipv4_tcp(seq: int, payload: int, sport: int = 5301, dport: int = 40000) -> bytes:
    import struct
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, 0, 5 << 4, 0x18, 65535, 0, 0) + b"x" * payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0, 64, 6, 0, bytes(4), bytes(4))
    return ip + tcp


def test_one_way_delay_pairs_first_sightings_by_sequence(tmp_path):
    import struct

    from cellab.results.owd import one_way_delay_ms

    pcap = tmp_path / "s.pcap"
    records = b""
    # seq 1000 at 1.000 s, its retransmission at 1.100 s (ignored), seq 2000 at 1.010 s, an ACK-only segment
    for t_us, seq, size in ((1_000_000, 1000, 1000), (1_100_000, 1000, 1000), (1_010_000, 2000, 1000), (1_020_000, 3000, 0)):
        frame = raw_ipv4_tcp(seq, size)
        records += struct.pack("<IIII", t_us // 1_000_000, t_us % 1_000_000, len(frame), len(frame)) + frame
    pcap.write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 101) + records)
    log = tmp_path / "p.csv"
    log.write_text("# cellab-probe events v1\nt_ns,flow,dir,seq,ack,len\n"
                   "1030000000,0,0,1000,0,1000\n1040000000,0,1,0,2000,0\n1150000000,0,0,1000,0,1000\n"
                   "1045000000,0,0,2000,0,1000\n")
    owd = one_way_delay_ms(pcap, log, 5301, ue_minus_server_s=0.005)
    assert owd.tolist() == pytest.approx([25.0, 30.0])  # 30 and 35 ms minus the UE clock's 5 ms lead
    pcap.write_bytes(b"not a capture at all, sorry")
    with pytest.raises(InputError, match="not a pcap file"):
        one_way_delay_ms(pcap, log, 5301, 0.0)


def test_an_iperf3_run_with_a_capture_gets_loss_pcap_rtt_and_timelines(require_root, netns_prefix, tmp_path):
    """An iperf3 run measured like the others: its server capture gives loss, RTT at the capture point and the
    throughput/RTT timelines the report draws (the control connection left out)."""
    import json
    import textwrap

    from cellab.testkit.helpers import only_folder, result_rows, run_cellab

    campaign = tmp_path / "c.yaml"
    campaign.write_text(textwrap.dedent("""
        name: iperf3-pcap
        lab: wired
        fixed: {rate_mbit: 10, buffer_bytes: 60000}
        workload: {tool: iperf3, duration_s: 3}
        measurements: [throughput, rtt, pcap]
        timeouts: {run_s: 60, request_s: 15}
    """))
    done = run_cellab("run", str(campaign), "--out", str(tmp_path / "out"), "--prefix", netns_prefix)
    assert done.returncode == 0, done.stdout + done.stderr
    folder = only_folder(tmp_path / "out")
    ((run_id, *_),) = result_rows(folder)
    metrics = json.loads((folder / "runs" / run_id / "metrics.json").read_text())
    assert 0 <= metrics["loss_rate"] < 0.2 and metrics["pcap_rtt_mean_ms"] > 0
    series = metrics["timeline"]["throughput_bps"]
    busy = sorted(v for v in series["v"] if v > 0)
    assert len(series["t_s"]) >= 20 and 7e6 < busy[len(busy) // 2] < 11e6  # 100 ms bins of a 10 Mbit/s bottleneck
    assert metrics["timeline"]["rtt_ms"]["v"]
    assert "Timelines per run" in (folder / "report.html").read_text()
