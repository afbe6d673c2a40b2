"""cellab-send over loopback: the flow protocol of docs/flow-protocol.md, its logs and its errors."""

from __future__ import annotations

import itertools
import json
import socket
import struct
import subprocess
import threading
import time

import pytest
from cellab.server import flowclient
from cellab.server.sender import Sender, SenderConfig


@pytest.fixture
def sender(tmp_path, programs):
    s = Sender(SenderConfig(bind="127.0.0.1", port=0, sample_ms=10), tmp_path / "logs")
    s.start()
    yield s
    s.stop()


def raw_flow(port: int, request: bytes, read_limit: int = 1 << 20) -> tuple[bytes, bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request)
        data = b""
        while len(data) < read_limit:
            part = s.recv(65536)
            if not part:
                break
            data += part
    return data[:16], data[16:]


def test_n_byte_flow_is_exact_and_logged(sender):
    r = flowclient.fetch("127.0.0.1", sender.port, amount=3_000_001, cc_name="reno", flow_tag=77)
    assert r.status == 0
    assert r.bytes_received == 3_000_001
    time.sleep(0.2)
    summary = next(x for x in sender.summaries() if x["flow_id"] == r.flow_id)
    assert summary["cc"] == "reno"
    assert summary["flow_tag"] == 77
    assert summary["bytes_sent"] == 3_000_001
    assert summary["end"] == "done"
    samples = sender.samples(r.flow_id)
    assert samples, "no TCP_INFO samples"
    keys = {"rtt_us", "cwnd_pkts", "delivery_rate_bps", "total_retrans", "rwnd_limited_us",
            "sndbuf_limited_us", "busy_us", "bytes_acked"}
    assert keys <= samples[0].keys()
    assert samples[-1]["bytes_acked"] >= 3_000_001


def test_timed_flow_lasts_its_time_and_samples_at_the_interval(sender):
    r = flowclient.fetch("127.0.0.1", sender.port, mode=flowclient.MODE_TIME_MS, amount=600, cc_name="cubic")
    assert r.status == 0 and r.bytes_received > 0
    assert 0.55 <= r.fct_s <= 2.0
    samples = sender.samples(r.flow_id)
    gaps = [b["elapsed_ms"] - a["elapsed_ms"] for a, b in itertools.pairwise(samples[:-1])]
    assert len(samples) >= 40, len(samples)
    assert 8.0 <= sorted(gaps)[len(gaps) // 2] <= 15.0  # 10 ms interval (median)


def test_until_close_flow_ends_when_the_receiver_closes(sender):
    with socket.create_connection(("127.0.0.1", sender.port), timeout=5) as s:
        s.sendall(flowclient.encode_request(flowclient.MODE_UNTIL_CLOSE, 0, "cubic"))
        got = 0
        while got < 2_000_000:
            got += len(s.recv(65536))
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not sender.summaries():
        time.sleep(0.05)
    summary = sender.summaries()[-1]
    assert summary["mode"] == 3 and summary["status"] == 0 and summary["bytes_sent"] >= 2_000_000


def test_payload_blocks_carry_send_timestamps(sender):
    before_ns = time.time_ns()
    head, payload = raw_flow(sender.port, flowclient.encode_request(1, 10 * 1024 + 100, "cubic"))
    after_ns = time.time_ns()
    assert head[:4] == b"CLB1" and struct.unpack("<H", head[4:6])[0] == 0
    assert len(payload) == 10 * 1024 + 100
    for off in range(0, len(payload), 1024):
        stamp = struct.unpack("<Q", payload[off:off + 8].ljust(8, b"\0"))[0] if off + 8 <= len(payload) else None
        if stamp is not None:
            assert before_ns <= stamp <= after_ns
        assert payload[off + 8:off + 1024].strip(b"\0") == b""


@pytest.mark.parametrize("mutate, reason", [
    (lambda r: b"XXXX" + r[4:], "magic"),
    (lambda r: r[:4] + struct.pack("<H", 2) + r[6:], "version"),
    (lambda r: r[:6] + struct.pack("<H", 9) + r[8:], "mode"),
    (lambda r: r[:8] + struct.pack("<Q", 0) + r[16:], "amount"),
    (lambda r: r[:16] + b"cu\x01bic".ljust(16, b"\0") + r[32:], "cc_name"),
])
def test_bad_requests_get_status_1(sender, mutate, reason):
    good = flowclient.encode_request(1, 1000, "cubic")
    head, payload = raw_flow(sender.port, mutate(good))
    assert head[:4] == b"CLB1", reason
    assert struct.unpack("<H", head[4:6])[0] == 1, reason
    assert payload == b""


def test_unknown_congestion_control_gets_status_2(sender):
    r = flowclient.fetch("127.0.0.1", sender.port, amount=1000, cc_name="no_such_cc")
    assert r.status == 2 and r.bytes_received == 0


def test_concurrent_flows_each_get_their_log(sender):
    results: list[flowclient.FlowResult] = []

    def one(tag: int) -> None:
        results.append(flowclient.fetch("127.0.0.1", sender.port, amount=2_000_000, cc_name="cubic", flow_tag=tag))

    threads = [threading.Thread(target=one, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(r.bytes_received for r in results) == [2_000_000] * 4
    assert len({r.flow_id for r in results}) == 4
    time.sleep(0.2)
    assert {x["flow_tag"] for x in sender.summaries()} >= {0, 1, 2, 3}
    for r in results:
        assert sender.samples(r.flow_id)


def test_bad_command_line_is_rejected(programs, tmp_path):
    send = str(programs["cellab-send"])
    for args, needle in [(["--port", "70000"], "--port"), (["--cc", "no_such_cc"], "not available"),
                         (["--sample-ms", "-1"], "--sample-ms"), (["--bind", "nowhere"], "--bind")]:
        out = subprocess.run([send, "serve", "--log-dir", str(tmp_path), *args], capture_output=True, text=True,
                             timeout=10, check=False)
        assert out.returncode == 2, args
        assert needle in out.stderr, (args, out.stderr)


def test_stop_writes_the_summary_of_a_running_flow(programs, tmp_path):
    s = Sender(SenderConfig(bind="127.0.0.1", port=0), tmp_path / "logs")
    s.start()
    box: list[object] = []
    t = threading.Thread(target=lambda: box.append(
        flowclient.fetch("127.0.0.1", s.port, mode=flowclient.MODE_UNTIL_CLOSE, amount=0, timeout_s=20)))
    t.start()
    time.sleep(0.5)
    info = s.stop()
    t.join(timeout=20)
    assert info.get("still_active") == 0
    rows = s.summaries()
    assert rows and rows[-1]["end"] == "sender_stopped"
    assert json.dumps(rows)  # plain JSON


def test_without_log_dir_the_logs_go_to_a_new_temp_folder_not_the_cwd(programs, tmp_path, monkeypatch):
    """Callers that omit --log-dir used to leave flows.jsonl in their working directory (a checkout)."""
    cwd, tmp = tmp_path / "cwd", tmp_path / "tmp"
    cwd.mkdir()
    tmp.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("TMPDIR", str(tmp))
    s = Sender(SenderConfig(bind="127.0.0.1", port=0, sample_ms=0), None)
    s.start()
    try:
        r = flowclient.fetch("127.0.0.1", s.port, amount=10_000)
    finally:
        s.stop()
    assert r.status == 0
    assert s.log_dir is not None and s.log_dir.parent == tmp and s.log_dir.name.startswith("cellab-send-")
    assert [row["flow_id"] for row in s.summaries()] == [r.flow_id]
    assert not list(cwd.iterdir())
