"""The probe's estimators on synthetic timing with known ground truth (cellab-probe analyze --events/--pcap).

probe_synth models an ACK-clocked sender, a rate-limited downlink and an uplink that is SR-limited,
granted from buffer-status reports (srsENB under load) or immediate; no namespaces, no root.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from cellab.ue.probe_synth import SynthConfig, shift, simulate, write_events, write_pcap
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cellab.paths import BUILD_BIN, PROJECT_ROOT

PROBE = BUILD_BIN / "cellab-probe"
PERIODS_MS = [5, 10, 20, 40, 80]


@pytest.fixture(scope="module", autouse=True)
def probe_bin() -> None:
    subprocess.run(["make", "-s", str(PROBE)], cwd=PROJECT_ROOT, check=True, capture_output=True, timeout=300)


def analyze(*args: str) -> tuple[int, dict]:
    proc = subprocess.run([str(PROBE), "analyze", *args], capture_output=True, text=True, timeout=60, check=False)
    return proc.returncode, json.loads(proc.stdout)


@pytest.mark.parametrize("period_ms", PERIODS_MS)
def test_sr_strict_uplink_gives_the_configured_period(tmp_path, period_ms):
    rows = simulate(SynthConfig(sr_period_ms=period_ms, ul_policy="sr-strict", duration_s=2.0))
    rc, summary = analyze("--events", str(write_events(rows, tmp_path / "ev.csv")))
    sr = summary["sr_estimate"]
    assert rc == 0 and summary["status"] == "ok"
    assert sr["regime"] == "sr-limited" and sr["period_ms"] == period_ms, sr
    assert sr["flow_burst_period_ms"] == period_ms


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(period_ms=st.sampled_from(PERIODS_MS), policy=st.sampled_from(["sr-strict", "bsr", "none"]),
       one_way_ms=st.floats(3, 30), rate_mbit=st.floats(8, 60), seed=st.integers(0, 10_000))
def test_never_a_confident_wrong_period(tmp_path, period_ms, policy, one_way_ms, rate_mbit, seed):
    rows = simulate(SynthConfig(sr_period_ms=period_ms, ul_policy=policy, one_way_ms=one_way_ms,
                                rate_mbit=rate_mbit, seed=seed, duration_s=1.5))
    _, summary = analyze("--events", str(write_events(rows, tmp_path / f"ev{seed}.csv")))
    sr = summary["sr_estimate"]
    assert sr["regime"] in ("sr-limited", "not-sr-limited", "undetermined")
    if sr["period_ms"] is not None and sr["confidence"] in ("high", "medium"):
        assert policy == "sr-strict" and sr["period_ms"] == period_ms, sr
    if policy != "sr-strict":
        assert sr["regime"] != "sr-limited", sr


def test_pcap_and_event_log_give_the_same_estimates(tmp_path):
    rows = simulate(SynthConfig(sr_period_ms=40, ul_policy="sr-strict", duration_s=2.0))
    _, from_events = analyze("--events", str(write_events(rows, tmp_path / "ev.csv")))
    _, from_pcap = analyze("--pcap", str(write_pcap(rows, tmp_path / "x.pcap")))
    assert from_pcap["status"] == "ok" and from_pcap["timestamps"] == "pcap-ns"
    assert from_pcap["flows"][0]["local"] == "10.0.0.2:40000"  # the data receiver, found by direction
    for key in ("regime", "period_ms", "tsr_ms", "mp_rtt_ms", "n_rtt_samples"):
        assert from_pcap["sr_estimate"][key] == from_events["sr_estimate"][key]
    assert from_pcap["flows"][0]["bytes"] == from_events["flows"][0]["bytes"]


@pytest.mark.parametrize("server_isn", [0x10000000, 0x9E6C1F3A, 0xFFFF8000])
def test_capture_with_handshake_and_teardown_times_every_packet(tmp_path, server_isn):
    # A capture started before the flow holds our SYN, whose ack field is 0: with the sender's ISN in
    # the upper half (or the stream wrapping 2^32) it once made every later ACK look old, and offline
    # analysis timed nothing. The sender's pure ACK of our FIN must not time the last RTT's packets.
    rows = shift(simulate(SynthConfig(sr_period_ms=20, ul_policy="sr-strict", duration_s=2.0)), 1_000_000_000)
    _, from_events = analyze("--events", str(write_events(rows, tmp_path / "ev.csv")))
    _, from_pcap = analyze("--pcap", str(write_pcap(rows, tmp_path / "hs.pcap", handshake=True,
                                                    server_isn=server_isn, ue_isn=0xC0000000)))
    assert from_pcap["status"] == "ok" and from_pcap["sr_estimate"]["n_rtt_samples"] >= 30
    for key in ("period_ms", "tsr_ms", "mp_rtt_ms", "ap_rtt_ms", "n_rtt_samples"):
        assert from_pcap["sr_estimate"][key] == from_events["sr_estimate"][key], key
    pf, ef = from_pcap["flows"][0], from_events["flows"][0]
    assert pf["rtt"] == ef["rtt"] and pf["exll"]["frames"] == ef["exll"]["frames"]
    assert pf["bytes"] == ef["bytes"]


def test_truncated_pcap_keeps_what_was_read(tmp_path):
    rows = simulate(SynthConfig(sr_period_ms=20, ul_policy="sr-strict", duration_s=2.0))
    full = write_pcap(rows, tmp_path / "full.pcap").read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(full[: len(full) // 2 + 7])  # ends inside a record
    rc, summary = analyze("--pcap", str(cut), "--summary", "-")
    assert rc == 1 and summary["status"] == "partial"
    assert "capture ends early" in summary["errors"][0] and str(cut) in summary["errors"][0]
    assert summary["missing"] == ["packets after the damaged end of the capture"]
    assert 0 < summary["flows"][0]["bytes"] < sum(r[4] for r in rows)
    assert summary["sr_estimate"]["period_ms"] == 20


@pytest.mark.parametrize("content, message", [
    (b"", "not a readable capture"),
    (b"this is not a pcap at all, just text\n" * 3, "not a readable capture"),
])
def test_unreadable_pcap_is_a_clear_error(tmp_path, content, message):
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(content)
    rc, summary = analyze("--pcap", str(bad))
    assert rc == 1 and summary["status"] == "error" and message in summary["errors"][0]
    assert summary["flows"] == []


def test_malformed_event_log_names_the_line(tmp_path):
    rows = simulate(SynthConfig(sr_period_ms=20, duration_s=1.0))
    path = write_events(rows, tmp_path / "ev.csv")
    lines = path.read_text().splitlines()
    lines.insert(200, "12,0,7,not,a,row")
    path.write_text("\n".join(lines) + "\n")
    rc, summary = analyze("--events", str(path))
    assert rc == 1 and summary["status"] == "partial"
    assert "line 201" in summary["errors"][0] and "expected t_ns,flow" in summary["errors"][0]
    assert summary["flows"][0]["packets"] > 0  # what came before the bad line is kept


def test_no_sr_wait_is_not_called_sr_limited(tmp_path):
    rows = simulate(SynthConfig(ul_policy="none", one_way_ms=5, rate_mbit=50, duration_s=1.5))
    _, summary = analyze("--events", str(write_events(rows, tmp_path / "ev.csv")))
    assert summary["sr_estimate"]["regime"] == "not-sr-limited"
    assert summary["sr_estimate"]["period_ms"] is None


def test_exll_measures_the_link(tmp_path):
    """F / MTE follow the bottleneck rate; observation ends once the window passes the pipe."""
    rows = simulate(SynthConfig(ul_policy="none", one_way_ms=10, rate_mbit=20, duration_s=2.0))
    _, summary = analyze("--events", str(write_events(rows, tmp_path / "ev.csv")))
    exll = summary["flows"][0]["exll"]
    assert exll["mte_bps"] == pytest.approx(20e6, rel=0.1)
    assert exll["left_observation"] and exll["t_exit_ms"] < 1000
    assert summary["flows"][0]["rtt"]["min_ms"] == pytest.approx(20.6, abs=1.5)  # 2 x 10 ms + serialisation
