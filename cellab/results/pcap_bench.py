"""Benchmark: cellab-flowstat against tshark extracting the same per-packet TCP fields, on a synthetic
1,000,000-packet capture (bulk TCP flows with 1 % resent segments), both timed in this run.

    python -m cellab.bench pcap      (after `make build`)
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cellab.paths import find_program

N_PACKETS = 1_000_000
N_FLOWS = 16
MSS_BYTES = 1448
FLOW_RATE_BPS = 60e6            # each flow; 16 flows fill about 1 Gbit/s
BASE_RTT_S = 0.020
RESENT_FRACTION = 0.01
TARGET_SPEEDUP = 5.0
TSHARK_FIELDS = ["frame.time_epoch", "ip.src", "ip.dst", "tcp.srcport", "tcp.dstport", "tcp.seq", "tcp.ack", "tcp.len"]

# One Ethernet frame cut to its IPv4 and TCP headers (tcpdump -s 54), after its pcap record header.
RECORD = np.dtype([
    ("ts_sec", "<u4"), ("ts_usec", "<u4"), ("caplen", "<u4"), ("wirelen", "<u4"),
    ("eth_dst", "V6"), ("eth_src", "V6"), ("eth_type", ">u2"),
    ("ver_ihl", "u1"), ("tos", "u1"), ("ip_len", ">u2"), ("ip_id", ">u2"), ("frag", ">u2"), ("ttl", "u1"),
    ("proto", "u1"), ("ip_sum", ">u2"), ("src", ">u4"), ("dst", ">u4"),
    ("sport", ">u2"), ("dport", ">u2"), ("seq", ">u4"), ("ack", ">u4"), ("data_off", "u1"), ("flags", "u1"),
    ("window", ">u2"), ("tcp_sum", ">u2"), ("urgent", ">u2"),
])
HEADERS_BYTES = 14 + 20 + 20
TCP_ACK, TCP_PSH = 0x10, 0x08


@dataclass
class Packets:
    """Columns of the synthetic capture, one row per packet."""

    t_us: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    sport: np.ndarray
    dport: np.ndarray
    seq: np.ndarray
    ack: np.ndarray
    payload_bytes: np.ndarray
    resent: np.ndarray   # True on a retransmitted copy

    @staticmethod
    def concat(parts: list[Packets]) -> Packets:
        return Packets(*(np.concatenate([getattr(p, name) for p in parts]) for name in Packets.__dataclass_fields__))

    def take(self, index: np.ndarray) -> Packets:
        return Packets(*(getattr(self, name)[index] for name in Packets.__dataclass_fields__))


def flow_packets(rng: np.random.Generator, flow: int, n_segments: int) -> Packets:
    """A bulk upload: MSS segments at a steady rate, one ACK per two segments one RTT later, 1 % resent."""
    gap_us = MSS_BYTES * 8 / FLOW_RATE_BPS * 1e6
    isn = 2**32 - 5_000_000 if flow == 0 else int(rng.integers(0, 2**32))   # flow 0 wraps its sequence space
    k = np.arange(n_segments)
    t_data = 1_000 * flow + k * gap_us
    seq = (isn + 1 + k * MSS_BYTES) % 2**32
    pairs = np.arange(n_segments // 2)
    rtt_us = (BASE_RTT_S + 0.002 * flow / N_FLOWS + 0.005 * np.sin(pairs / 500.0)) * 1e6
    t_ack = t_data[2 * pairs + 1] + rtt_us
    acked = (isn + 1 + (2 * pairs + 2) * MSS_BYTES) % 2**32
    lost = np.sort(rng.choice(n_segments, size=int(RESENT_FRACTION * n_segments), replace=False))
    t_resent = t_data[lost] + BASE_RTT_S * 1e6 + 1_000   # after the duplicate ACKs came back
    client, server = 0x0A000002 + flow, 0x0A000001
    n_data, n_ack, n_resent = n_segments, len(pairs), len(lost)

    def by_direction(upstream: int, downstream: int) -> np.ndarray:   # rows: data, then ACKs, then resent data
        return np.concatenate([np.full(n_data, upstream), np.full(n_ack, downstream), np.full(n_resent, upstream)])

    return Packets(
        t_us=np.concatenate([t_data, t_ack, t_resent]).astype(np.int64),
        src=by_direction(client, server),
        dst=by_direction(server, client),
        sport=by_direction(40000 + flow, 5201),
        dport=by_direction(5201, 40000 + flow),
        seq=np.concatenate([seq, np.full(n_ack, 1000), seq[lost]]),
        ack=np.concatenate([np.full(n_data, 1001), acked, np.full(n_resent, 1001)]),
        payload_bytes=np.concatenate([np.full(n_data, MSS_BYTES), np.zeros(n_ack, int), np.full(n_resent, MSS_BYTES)]),
        resent=np.concatenate([np.zeros(n_data + n_ack, bool), np.ones(n_resent, bool)]),
    )


def synthetic_packets(n_packets: int, seed: int = 1) -> Packets:
    rng = np.random.default_rng(seed)
    per_flow_segments = int(n_packets / N_FLOWS / (1.5 + RESENT_FRACTION)) + 1000   # a margin, cut below
    merged = Packets.concat([flow_packets(rng, f, per_flow_segments) for f in range(N_FLOWS)])
    order = np.argsort(merged.t_us, kind="stable")[:n_packets]
    return merged.take(order)


def write_pcap(p: Packets, path: Path) -> None:
    rec = np.zeros(len(p.t_us), dtype=RECORD)
    t_us = p.t_us + 1_700_000_000 * 1_000_000
    rec["ts_sec"], rec["ts_usec"] = t_us // 1_000_000, t_us % 1_000_000
    rec["caplen"] = HEADERS_BYTES
    rec["wirelen"] = HEADERS_BYTES + p.payload_bytes
    rec["eth_type"] = 0x0800
    rec["ver_ihl"], rec["ttl"], rec["proto"], rec["frag"] = 0x45, 64, 6, 0x4000
    rec["ip_len"] = 40 + p.payload_bytes
    rec["src"], rec["dst"], rec["sport"], rec["dport"] = p.src, p.dst, p.sport, p.dport
    rec["seq"], rec["ack"] = p.seq, p.ack
    rec["data_off"] = 5 << 4
    rec["flags"] = np.where(p.payload_bytes > 0, TCP_ACK | TCP_PSH, TCP_ACK)
    rec["window"] = 65535
    header = np.array([0xA1B2C3D4, 2 | 4 << 16, 0, 0, HEADERS_BYTES, 1], dtype="<u4")   # pcap 2.4, Ethernet
    with path.open("wb") as out:
        out.write(header.tobytes())
        out.write(rec.tobytes())


def timed(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.perf_counter() - started


def check_against_truth(doc: dict, p: Packets) -> str:
    """flowstat's totals against what was generated: resent copies and payload bytes."""
    resent = int(p.resent.sum())
    payload = int(p.payload_bytes.sum())
    got_resent = sum(f["retransmits"] for f in doc["flows"])
    got_payload = sum(f["payload_bytes"] for f in doc["flows"])
    ok = doc["packets"] == len(p.t_us) and got_resent == resent and got_payload == payload
    return (f"check: {'ok' if ok else 'MISMATCH'}: {got_resent:,} retransmissions ({resent:,} generated), "
            f"{got_payload:,} payload bytes ({payload:,}), {len(doc['flows'])} flows")


def main() -> None:
    flowstat = str(find_program("cellab-flowstat"))
    tshark = str(find_program("tshark"))
    with tempfile.TemporaryDirectory(prefix="cellab-pcap-bench-") as tmp:
        pcap, out = Path(tmp) / "synthetic.pcap", Path(tmp) / "flows.json"
        started = time.perf_counter()
        packets = synthetic_packets(N_PACKETS)
        write_pcap(packets, pcap)
        span_s = (packets.t_us[-1] - packets.t_us[0]) / 1e6
        print(f"capture: {N_PACKETS:,} packets, {N_FLOWS} TCP flows over {span_s:.1f} s, "
              f"{pcap.stat().st_size / 1e6:.0f} MB (generated with numpy in {time.perf_counter() - started:.1f} s)")
        flowstat_s = min(timed([flowstat, str(pcap), "--out", str(out)]) for _ in range(3))
        print(check_against_truth(json.loads(out.read_text()), packets))
        fields = [arg for name in TSHARK_FIELDS for arg in ("-e", name)]
        tshark_s = timed([tshark, "-r", str(pcap), "-T", "fields", *fields])
    ratio = tshark_s / flowstat_s
    print(f"cellab-flowstat (full analysis, best of 3): {flowstat_s:7.2f} s  {N_PACKETS / flowstat_s / 1e6:6.2f} M packets/s")
    print(f"tshark -T fields ({len(TSHARK_FIELDS)} fields):          {tshark_s:7.2f} s  "
          f"{N_PACKETS / tshark_s / 1e6:6.2f} M packets/s")
    print(f"ratio: cellab-flowstat is {ratio:.1f}x faster than tshark (target >= {TARGET_SPEEDUP:.0f}x): "
          f"{'met' if ratio >= TARGET_SPEEDUP else 'NOT met'}")


if __name__ == "__main__":
    main()
