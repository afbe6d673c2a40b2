"""One-way delay server → UE: each data segment's first sighting in the server's capture, paired by
sequence number with its arrival in the probe's per-packet log. Only meaningful where both clocks are
one (the embedded labs) or their offset is measured (the run's clock offsets are applied)."""

from __future__ import annotations

import csv
import struct
from pathlib import Path

import numpy as np

from cellab.errors import InputError

# link type -> bytes before the IP header (pcap-linktype registry)
LINK_HEADER_BYTES = {1: 14, 101: 0, 12: 0, 228: 0, 113: 16, 276: 20}
MAGIC_US, MAGIC_NS = 0xA1B2C3D4, 0xA1B23C4D


def data_send_times(pcap: Path, src_port: int) -> dict[int, int]:
    """seq -> capture time (ns) of the first IPv4 TCP segment with payload sent from src_port."""
    raw = Path(pcap).read_bytes()
    if len(raw) < 24:
        raise InputError(pcap, "header", "too short for a pcap file")
    magic = struct.unpack_from("<I", raw)[0]
    endian = "<" if magic in (MAGIC_US, MAGIC_NS) else ">"
    magic = struct.unpack_from(endian + "I", raw)[0]
    if magic not in (MAGIC_US, MAGIC_NS):
        raise InputError(pcap, "magic", "not a pcap file (pcapng is not read here)")
    frac_ns = 1 if magic == MAGIC_NS else 1000
    link = struct.unpack_from(endian + "I", raw, 20)[0] & 0xFFFF
    if link not in LINK_HEADER_BYTES:
        raise InputError(pcap, "link type", f"{link} not supported", sorted(LINK_HEADER_BYTES))
    skip = LINK_HEADER_BYTES[link]
    record = struct.Struct(endian + "IIII")
    sent: dict[int, int] = {}
    off = 24
    while off + 16 <= len(raw):
        sec, frac, caplen, _ = record.unpack_from(raw, off)
        ip = off + 16 + skip
        off += 16 + caplen
        if off > len(raw) or caplen < skip + 40 or raw[ip] >> 4 != 4 or raw[ip + 9] != 6:
            continue
        ihl = (raw[ip] & 0x0F) * 4
        total = struct.unpack_from("!H", raw, ip + 2)[0]
        tcp = ip + ihl
        sport, _, seq = struct.unpack_from("!HHI", raw, tcp)
        payload = total - ihl - (raw[tcp + 12] >> 4) * 4
        if sport == src_port and payload > 0 and seq not in sent:
            sent[seq] = sec * 1_000_000_000 + frac * frac_ns
    return sent


def one_way_delay_ms(server_pcap: Path, probe_packets: Path, src_port: int, ue_minus_server_s: float) -> np.ndarray:
    """Delays of the segments seen at both ends, in ms, in arrival order."""
    sent = data_send_times(server_pcap, src_port)
    with Path(probe_packets).open(newline="") as fh:
        rows = csv.DictReader(line for line in fh if not line.startswith("#"))
        delays = []
        seen: set[int] = set()
        for row in rows:
            if row["dir"] != "0" or int(row["len"]) == 0:
                continue
            seq = int(row["seq"])
            if seq in sent and seq not in seen:
                seen.add(seq)
                delays.append((int(row["t_ns"]) - sent[seq]) / 1e6 - ue_minus_server_s * 1000.0)
    return np.asarray(delays)
