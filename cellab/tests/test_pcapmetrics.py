"""cellab-flowstat and cellab.results.pcapmetrics: synthetic captures with known content (our own pcap writer),
damaged and foreign files, and one real capture (iperf3 over loopback in a namespace) checked against
iperf3's own report and tshark."""

from __future__ import annotations

import json
import signal
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from cellab.errors import InputError
from cellab.paths import BUILD_BIN, PROJECT_ROOT
from cellab.results.pcapmetrics import pcap_metrics, run_flowstat

FLOWSTAT = BUILD_BIN / "cellab-flowstat"
FIN, SYN, RST, ACK = 0x01, 0x02, 0x04, 0x10
LINK_EN10MB, LINK_RAW, LINK_SLL, LINK_SLL2, LINK_USER0 = 1, 101, 113, 276, 147
MS = 1000   # times below are integer microseconds


@pytest.fixture(scope="module", autouse=True)
def flowstat_built() -> None:
    subprocess.run(["make", "-s", str(FLOWSTAT)], cwd=PROJECT_ROOT, check=True, capture_output=True, timeout=300)


# ---- a pcap writer: classic pcap, microsecond or nanosecond timestamps, any link type ----

def ip_packet(src: str, dst: str, sport: int, dport: int, seq: int, ack: int, flags: int, payload_bytes: int,
              options: bytes = b"") -> bytes:
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq % 2**32, ack % 2**32, (5 + len(options) // 4) << 4, flags,
                      65535, 0, 0) + options + bytes(payload_bytes)
    if ":" in src:
        header = struct.pack("!IHBB", 6 << 28, len(tcp), 6, 64)
        return header + socket.inet_pton(socket.AF_INET6, src) + socket.inet_pton(socket.AF_INET6, dst) + tcp
    return struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0x4000, 64, 6, 0,
                       socket.inet_aton(src), socket.inet_aton(dst)) + tcp


def link_frame(linktype: int, packet: bytes) -> bytes:
    ethertype = 0x86DD if packet[0] >> 4 == 6 else 0x0800
    if linktype == LINK_EN10MB:
        return bytes.fromhex("020000000001020000000002") + struct.pack("!H", ethertype) + packet
    if linktype == LINK_SLL:   # packet type, ARPHRD_ETHER, address length, address (8), protocol
        return struct.pack("!HHH8sH", 4, 1, 6, bytes(8), ethertype) + packet
    if linktype == LINK_SLL2:  # protocol, reserved, ifindex, ARPHRD_ETHER, packet type, address length, address
        return struct.pack("!HHIHBB8s", ethertype, 0, 2, 1, 4, 6, bytes(8)) + packet
    return packet   # LINKTYPE_RAW (TUN devices), and foreign link types in the tests below


def sack_permitted() -> bytes:
    return bytes([1, 1, 4, 2])


def sack_blocks(blocks: list[tuple[int, int]]) -> bytes:
    return bytes([1, 1, 5, 2 + 8 * len(blocks)]) + b"".join(struct.pack("!II", a % 2**32, b % 2**32) for a, b in blocks)


@dataclass
class Capture:
    linktype: int = LINK_RAW
    nanos: bool = False
    snaplen: int = 65535
    packets: list[tuple[int, bytes]] = field(default_factory=list)

    def add(self, t_us: int, packet: bytes) -> None:
        self.packets.append((t_us, packet))

    def to_bytes(self) -> bytes:
        magic = 0xA1B23C4D if self.nanos else 0xA1B2C3D4
        out = [struct.pack("<IHHiIII", magic, 2, 4, 0, 0, self.snaplen, self.linktype)]
        base_s = 1_700_000_000
        for t_us, packet in sorted(self.packets, key=lambda p: p[0]):   # stable: same-time order kept
            frame = link_frame(self.linktype, packet)
            kept = frame[: self.snaplen]
            frac = (t_us % 1_000_000) * (1000 if self.nanos else 1)
            out.append(struct.pack("<IIII", base_s + t_us // 1_000_000, frac, len(kept), len(frame)) + kept)
        return b"".join(out)

    def write(self, path: Path) -> Path:
        path.write_bytes(self.to_bytes())
        return path


@dataclass
class Conn:
    """One scripted connection, data from client to server; sequence numbers as byte offsets."""

    cap: Capture
    client: tuple[str, int] = ("10.0.0.2", 40000)
    server: tuple[str, int] = ("10.0.0.1", 5201)
    isn_c: int = 1_000_000
    isn_s: int = 7_000_000
    sack: bool = False

    def _send(self, t_us: int, to_server: bool, seq: int, ack: int, flags: int, n: int, options: bytes = b"") -> None:
        (src, sport), (dst, dport) = (self.client, self.server) if to_server else (self.server, self.client)
        self.cap.add(t_us, ip_packet(src, dst, sport, dport, seq, ack, flags, n, options))

    def handshake(self, t_us: int) -> None:
        opt = sack_permitted() if self.sack else b""
        self._send(t_us, True, self.isn_c, 0, SYN, 0, opt)
        self._send(t_us + 10 * MS, False, self.isn_s, self.isn_c + 1, SYN | ACK, 0, opt)
        self._send(t_us + 15 * MS, True, self.isn_c + 1, self.isn_s + 1, ACK, 0)

    def data(self, t_us: int, offset: int, n: int = 1000) -> None:
        self._send(t_us, True, self.isn_c + 1 + offset, self.isn_s + 1, ACK, n)

    def ack(self, t_us: int, acked: int, sacked: list[tuple[int, int]] = ()) -> None:
        opt = sack_blocks([(self.isn_c + 1 + a, self.isn_c + 1 + b) for a, b in sacked]) if sacked else b""
        self._send(t_us, False, self.isn_s + 1, self.isn_c + 1 + acked, ACK, 0, opt)

    def close(self, t_us: int, sent: int) -> None:
        self._send(t_us, True, self.isn_c + 1 + sent, self.isn_s + 1, FIN | ACK, 0)
        self._send(t_us + 500, False, self.isn_s + 1, self.isn_c + 2 + sent, FIN | ACK, 0)
        self._send(t_us + 1 * MS, True, self.isn_c + 2 + sent, self.isn_s + 2, ACK, 0)


def basic_flow(conn: Conn, segment_bytes: int = 1000) -> None:
    """SYN at 0; 10 segments at 20..29 ms; segment i acked alone 30+i ms later (ACKs 2 ms apart); FIN at 200 ms."""
    conn.handshake(0)
    for i in range(10):
        conn.data(20 * MS + i * MS, i * segment_bytes, segment_bytes)
        conn.ack(20 * MS + i * MS + (30 + i) * MS, (i + 1) * segment_bytes)
    conn.close(200 * MS, 10 * segment_bytes)


def lossy_flow(conn: Conn) -> None:
    """Segment 3 (bytes 3000-4000) is lost after the capture point and resent at 60 ms; all acked at 90 ms."""
    conn.handshake(0)
    for i in range(10):
        conn.data(20 * MS + i * MS, i * 1000)
    for i in range(3):
        conn.ack(50 * MS + i * MS, (i + 1) * 1000)
    for i in range(4, 10):   # duplicate ACKs, with SACK blocks when the flow has SACK
        conn.ack(50 * MS + i * MS, 3000, [(4000, (i + 1) * 1000)] if conn.sack else [])
    conn.data(60 * MS, 3000)
    conn.ack(90 * MS, 10_000)
    conn.close(100 * MS, 10_000)


def only_flow(doc: dict) -> dict:
    assert len(doc["flows"]) == 1, doc["flows"]
    return doc["flows"][0]


# ---- exact results on synthetic captures ----

def test_basic_flow_bytes_rtt_fct_and_ack_gaps(tmp_path):
    cap = Capture()
    basic_flow(Conn(cap))
    doc = run_flowstat(cap.write(tmp_path / "basic.pcap"))
    f = only_flow(doc)
    rtts = [30.0 + i for i in range(10)]
    assert doc["packets"] == 26 and doc["warnings"] == []
    assert f["flow"] == "10.0.0.2:40000>10.0.0.1:5201"
    assert (f["bytes"], f["payload_bytes"], f["data_segments"], f["retransmits"]) == (10_000, 10_000, 10, 0)
    assert f["loss_rate"] == 0 and f["syn"] and f["fin"] and f["complete"] and not f["sack"]
    assert f["first_data_s"] == pytest.approx(0.020) and f["last_data_s"] == pytest.approx(0.029)
    assert f["throughput_bps"] == pytest.approx(10_000 * 8 / 0.009)
    assert f["fct_s"] == pytest.approx(0.200)   # SYN at 0 to the sender's FIN at 200 ms
    rtt = f["rtt"]
    assert rtt["samples"] == 10 and rtt["series"]["rtt_ms"] == pytest.approx(rtts)
    assert rtt["mean_ms"] == pytest.approx(34.5) and rtt["min_ms"] == pytest.approx(30) and rtt["max_ms"] == pytest.approx(39)
    assert rtt["p95_ms"] == pytest.approx(np.percentile(rtts, 95)) and rtt["jitter_ms"] == pytest.approx(1.0)
    assert rtt["series"]["t_s"] == pytest.approx([0.050 + 0.002 * i for i in range(10)])
    gaps = f["ack_gaps"]
    assert gaps["count"] == 9 and gaps["samples_ms"] == pytest.approx([2.0] * 9)
    assert gaps["hist"]["counts"][gaps["hist"]["lower_edges_ms"].index(2)] == 9


def test_metrics_use_the_documented_names(tmp_path):
    cap = Capture()
    basic_flow(Conn(cap))
    m = pcap_metrics(cap.write(tmp_path / "basic.pcap"), interval_ms=5)
    assert m["bytes_received"] == 10_000 and m["throughput_bps"] == pytest.approx(10_000 * 8 / 0.009)
    assert m["rtt_mean_ms"] == pytest.approx(34.5) and m["rtt_jitter_ms"] == pytest.approx(1.0)
    assert m["rtt_p95_ms"] == pytest.approx(38.55) and m["rtt_source"] == "pcap"
    assert m["rtt_series_ms"] == pytest.approx([30.0 + i for i in range(10)])
    assert m["retransmits"] == 0 and m["loss_rate"] == 0 and m["fct_mean_s"] == pytest.approx(0.2)
    assert "jain_fairness" not in m   # one flow
    # 5 segments in [20, 25) ms and 5 in [25, 30) ms: 5000 bytes per 5 ms each
    assert m["timeline"]["throughput_bps"]["t_s"] == pytest.approx([0.020, 0.025])
    assert m["timeline"]["throughput_bps"]["v"] == pytest.approx([8e6, 8e6])
    assert m["timeline"]["rtt_ms"]["v"] == pytest.approx(m["rtt_series_ms"])
    assert m["ack_gap_ms"] == pytest.approx([2.0] * 9)
    assert m["flows"] == [{"flow": "10.0.0.2:40000>10.0.0.1:5201", "bytes": 10_000, "retransmits": 0, "loss_rate": 0,
                           "throughput_bps": pytest.approx(10_000 * 8 / 0.009), "rtt_mean_ms": pytest.approx(34.5),
                           "rtt_p95_ms": pytest.approx(38.55), "fct_s": pytest.approx(0.2)}]


def test_retransmission_without_sack_follows_karn(tmp_path):
    cap = Capture()
    lossy_flow(Conn(cap))
    f = only_flow(run_flowstat(cap.write(tmp_path / "lossy.pcap")))
    assert (f["bytes"], f["payload_bytes"], f["data_segments"], f["retransmits"]) == (10_000, 11_000, 11, 1)
    assert f["loss_rate"] == pytest.approx(1 / 11)
    # segment 3 (resent) gives no sample; 4..9 wait for the cumulative ACK at 90 ms
    assert f["rtt"]["series"]["rtt_ms"] == pytest.approx([30, 30, 30, 66, 65, 64, 63, 62, 61])
    assert f["ack_gaps"]["samples_ms"] == pytest.approx([1, 1, 2, 1, 1, 1, 1, 1, 31])
    assert f["fct_s"] == pytest.approx(0.100)


def test_sack_blocks_give_the_first_ack_covering_a_segment(tmp_path):
    cap = Capture()
    lossy_flow(Conn(cap, sack=True))
    f = only_flow(run_flowstat(cap.write(tmp_path / "sack.pcap")))
    assert f["sack"] and f["retransmits"] == 1 and f["bytes"] == 10_000
    # every segment but the resent one is SACKed 30 ms after it left: nine samples of 30 ms
    assert f["rtt"]["series"]["rtt_ms"] == pytest.approx([30.0] * 9)
    assert f["rtt"]["jitter_ms"] == pytest.approx(0.0)


def test_sequence_wraparound_mid_flow_capture(tmp_path):
    cap = Capture()
    conn = Conn(cap, isn_c=2**32 - 2500)   # byte 2499 is the last before the wrap: segment 2 straddles it
    for i in range(5):
        conn.data(20 * MS + i * MS, i * 1000)
    conn.ack(50 * MS, 1000)
    conn.ack(51 * MS, 2000)
    conn.ack(53 * MS, 2000)
    conn.ack(54 * MS, 2000)
    conn.data(60 * MS, 2000)
    conn.ack(90 * MS, 5000)
    conn.close(100 * MS, 5000)
    f = only_flow(run_flowstat(cap.write(tmp_path / "wrap.pcap")))
    assert (f["bytes"], f["payload_bytes"], f["retransmits"]) == (5000, 6000, 1)
    assert f["rtt"]["series"]["rtt_ms"] == pytest.approx([30, 30, 67, 66])
    assert not f["syn"] and f["fct_s"] == pytest.approx(0.080)   # no SYN seen: from the first data


@pytest.mark.parametrize("linktype", [LINK_EN10MB, LINK_SLL, LINK_SLL2, LINK_RAW])
@pytest.mark.parametrize("ipv6", [False, True], ids=["ipv4", "ipv6"])
def test_link_types_and_ip_versions_agree(tmp_path, linktype, ipv6):
    cap = Capture(linktype=linktype, nanos=ipv6)   # nanosecond timestamps on half of them
    ends = (("fd00::2", 40000), ("fd00::1", 5201)) if ipv6 else (("10.0.0.2", 40000), ("10.0.0.1", 5201))
    basic_flow(Conn(cap, client=ends[0], server=ends[1]))
    f = only_flow(run_flowstat(cap.write(tmp_path / "link.pcap")))
    assert f["flow"] == ("[fd00::2]:40000>[fd00::1]:5201" if ipv6 else "10.0.0.2:40000>10.0.0.1:5201")
    assert f["ip_version"] == (6 if ipv6 else 4)
    assert (f["bytes"], f["retransmits"], f["rtt"]["samples"]) == (10_000, 0, 10)
    assert f["rtt"]["mean_ms"] == pytest.approx(34.5) and f["fct_s"] == pytest.approx(0.2)


def test_headers_only_capture_counts_payload_from_ip_length(tmp_path):
    cap = Capture(linktype=LINK_EN10MB, snaplen=14 + 20 + 20)
    basic_flow(Conn(cap))
    doc = run_flowstat(cap.write(tmp_path / "snap.pcap"))
    assert only_flow(doc)["bytes"] == 10_000 and doc["warnings"] == []


def test_two_flows_fairness(tmp_path):
    cap = Capture()
    basic_flow(Conn(cap))
    basic_flow(Conn(cap, client=("10.0.0.3", 40001)), segment_bytes=500)   # same times, half the bytes
    m = pcap_metrics(cap.write(tmp_path / "two.pcap"))
    assert [f["bytes"] for f in m["flows"]] == [10_000, 5_000]
    assert m["jain_fairness"] == pytest.approx(0.9)   # (1 + 0.5)^2 / (2 * (1 + 0.25))
    assert m["bytes_received"] == 15_000 and m["rtt_samples"] == 20


def test_reused_five_tuple_is_a_new_flow(tmp_path):
    cap = Capture()
    basic_flow(Conn(cap))
    second = Conn(cap, isn_c=55_000_000)
    second.handshake(300 * MS)
    second.data(320 * MS, 0, 700)
    second.ack(330 * MS, 700)
    doc = run_flowstat(cap.write(tmp_path / "reuse.pcap"))
    assert [f["bytes"] for f in doc["flows"]] == [10_000, 700]
    assert doc["flows"][1]["rtt"]["series"]["rtt_ms"] == pytest.approx([10.0])


def test_small_flows_can_be_left_out_of_the_aggregates(tmp_path):
    cap = Capture()
    basic_flow(Conn(cap))
    basic_flow(Conn(cap, client=("10.0.0.3", 40001)), segment_bytes=10)   # a control connection
    m = pcap_metrics(cap.write(tmp_path / "control.pcap"), min_flow_bytes=1000)
    assert [f["bytes"] for f in m["flows"]] == [10_000] and m["bytes_received"] == 10_000
    assert "jain_fairness" not in m and m["rtt_samples"] == 10


# ---- damaged and foreign input ----

@pytest.mark.parametrize("cut_bytes", [7, 45], ids=["in-data", "in-record-header"])
def test_truncated_capture_is_a_warning(tmp_path, cut_bytes):
    cap = Capture()
    basic_flow(Conn(cap))
    path = tmp_path / "cut.pcap"
    path.write_bytes(cap.to_bytes()[:-cut_bytes])   # the last record: the client's final ACK
    doc = run_flowstat(path)
    assert doc["packets"] == 25
    assert len(doc["warnings"]) == 1 and "truncated" in doc["warnings"][0] and str(path) in doc["warnings"][0]
    assert only_flow(doc)["bytes"] == 10_000
    assert pcap_metrics(path)["pcap_warnings"] == doc["warnings"]


def test_non_pcap_file_exits_2_naming_the_file(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("this is not a capture\n" * 10)
    done = subprocess.run([str(FLOWSTAT), str(path)], capture_output=True, text=True)
    assert done.returncode == 2 and str(path) in done.stderr and done.stdout == ""
    with pytest.raises(InputError, match="notes.txt"):
        pcap_metrics(path)


def test_missing_file_and_unsupported_link_type(tmp_path):
    with pytest.raises(InputError, match="absent.pcap"):
        pcap_metrics(tmp_path / "absent.pcap")
    cap = Capture(linktype=LINK_USER0)
    basic_flow(Conn(cap))
    with pytest.raises(InputError, match=r"user\.pcap.*link type"):
        pcap_metrics(cap.write(tmp_path / "user.pcap"))


def test_out_file_and_bad_options(tmp_path):
    cap = Capture()
    basic_flow(Conn(cap))
    pcap = cap.write(tmp_path / "basic.pcap")
    out = tmp_path / "flows.json"
    subprocess.run([str(FLOWSTAT), str(pcap), "--out", str(out)], check=True)
    assert json.loads(out.read_text())["flows"][0]["bytes"] == 10_000
    bad = subprocess.run([str(FLOWSTAT), str(pcap), "--interval-ms", "0"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--interval-ms" in bad.stderr


# ---- a real capture: iperf3 over loopback in a fresh namespace ----

@pytest.fixture
def loopback_ns(require_root, netns_prefix) -> Iterator[list[str]]:
    name = f"{netns_prefix}-pcap"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        yield ["ip", "netns", "exec", name]
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


def lossy_loopback(inns: list[str]) -> None:
    """MSS-sized segments as on a NIC, and a short tbf queue that drops some so that TCP resends."""
    subprocess.run(inns + ["ip", "link", "set", "lo", "up", "mtu", "1500"], check=True)
    subprocess.run(inns + ["ethtool", "-K", "lo", "tso", "off", "gso", "off", "gro", "off"], capture_output=True)
    subprocess.run(inns + ["tc", "qdisc", "add", "dev", "lo", "root", "tbf", "rate", "200mbit", "burst", "16kb",
                           "limit", "16kb"], check=True)


def wait_listening(inns: list[str], port: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if f":{port} " in subprocess.run(inns + ["ss", "-ltnH"], capture_output=True, text=True).stdout:
            return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port}")


def capture_iperf3(inns: list[str], pcap: Path) -> dict:
    """tcpdump on lo while iperf3 sends 4 MiB; the iperf3 server's JSON report. A 16 MiB capture buffer: on
    a loaded host the default one drops packets and the byte count would miss them."""
    dump = subprocess.Popen(inns + ["tcpdump", "-i", "lo", "-s", "128", "-B", "16384", "--immediate-mode", "-U", "-w", str(pcap), "tcp"],
                            stderr=subprocess.PIPE, text=True)
    server = subprocess.Popen(inns + ["iperf3", "-s", "-1", "-p", "5201", "-J"], stdout=subprocess.PIPE, text=True)
    try:
        assert "listening on" in dump.stderr.readline()
        wait_listening(inns, 5201)
        subprocess.run(inns + ["iperf3", "-c", "127.0.0.1", "-p", "5201", "-n", "4M", "-b", "100M", "-l", "16K"],
                       check=True, capture_output=True, timeout=60)
        report = json.loads(server.communicate(timeout=30)[0])
        time.sleep(0.3)   # the last ACKs and FINs
    finally:
        for proc in (server, dump):
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                proc.wait(timeout=10)
    return report


def tshark_data_direction(pcap: Path, sport: int, dport: int) -> tuple[int, int]:
    """(sum of tcp.len, segments tshark calls retransmission or out-of-order) from sport to dport."""
    out = subprocess.run(["tshark", "-r", str(pcap), "-T", "fields", "-E", "separator=,", "-e", "tcp.srcport",
                          "-e", "tcp.dstport", "-e", "tcp.len", "-e", "tcp.analysis.retransmission",
                          "-e", "tcp.analysis.out_of_order"], capture_output=True, text=True, check=True).stdout
    total = resent = 0
    for line in out.splitlines():
        src, dst, length, retrans, ooo = line.split(",")
        if (int(src), int(dst)) == (sport, dport):
            total += int(length)
            resent += bool(retrans or ooo)   # a hole filled after a loss before the capture: "out of order"
    return total, resent


def test_real_capture_agrees_with_iperf3_and_tshark(loopback_ns, tmp_path, require_program):
    for program in ("tcpdump", "iperf3", "tshark", "ethtool"):
        require_program(program)
    lossy_loopback(loopback_ns)
    pcap = tmp_path / "lo.pcap"
    report = capture_iperf3(loopback_ns, pcap)
    doc = run_flowstat(pcap, min_flow_bytes=100_000)
    data = max(doc["flows"], key=lambda f: f["bytes"])
    received = report["end"]["sum_received"]["bytes"]
    assert abs(data["bytes"] - received) <= 0.01 * received, (data["bytes"], received)
    assert data["dport"] == 5201 and data["rtt"]["samples"] > 100
    tshark_bytes, tshark_resent = tshark_data_direction(pcap, data["sport"], data["dport"])
    assert data["payload_bytes"] == tshark_bytes
    assert data["retransmits"] > 0, "the tbf queue dropped nothing: the comparison below would be empty"
    assert abs(data["retransmits"] - tshark_resent) <= max(3, 0.05 * tshark_resent), (data["retransmits"], tshark_resent)
    m = pcap_metrics(pcap, min_flow_bytes=100_000)
    assert m["bytes_received"] == data["bytes"] and m["retransmits"] == data["retransmits"]
