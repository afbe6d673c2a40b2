"""Synthetic receiver-side timing for the probe's estimators: an ACK-clocked sender, a rate-limited
downlink, and an uplink that is either SR-limited (every ACK waits for the next SR occasion) or
granted from buffer-status reports (srsENB under continuous uplink). Writes the probe's event log
(`cellab-probe analyze --events`), so tests can feed the C estimators known ground truth.

This is a model for tests, not an emulator: no HARQ, no radio; just the timing structure ExLL reads.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

MSS_BYTES = 1448


@dataclass(frozen=True)
class SynthConfig:
    sr_period_ms: int = 20
    ul_policy: Literal["sr-strict", "bsr", "none"] = "sr-strict"
    rate_mbit: float = 20.0
    one_way_ms: float = 15.0      # server -> UE propagation (the same back)
    grant_delay_ms: float = 4.0   # SR occasion -> uplink transmission
    bsr_grant_ms: float = 8.0     # "bsr": grant spacing while the UE keeps reporting data
    sr_offset_ms: float = 3.0
    cwnd_max_pkts: int = 400
    duration_s: float = 3.0
    ts_offset: int = 123456
    seed: int = 1


def _next_occasion(t_ms: float, period_ms: float, offset_ms: float) -> float:
    k = -(-(t_ms - offset_ms) // period_ms)  # ceil
    return offset_ms + k * period_ms


def simulate(cfg: SynthConfig) -> list[tuple[int, int, int, int, int, int, int, int]]:
    """Event rows (t_ns, dir, seq, ack, len, tsval, tsecr, has_ts) as the receiver would capture them."""
    rng = random.Random(cfg.seed)
    ser_ms = MSS_BYTES * 8 / (cfg.rate_mbit * 1e3)
    rows: list[tuple[int, int, int, int, int, int, int, int]] = []
    events: list[tuple[float, int, str, tuple[int, ...]]] = []
    order = 0

    def push(t: float, kind: str, data: tuple[int, ...]) -> None:
        nonlocal order
        order += 1
        heapq.heappush(events, (t, order, kind, data))

    link_free_ms = 0.0
    snd_nxt = 0
    cwnd = 10
    acked = 0
    ts_recent = 0
    rcv_nxt = 0
    unacked_pkts = 0
    ul_grant_until = -1.0  # "bsr": the UE is in granted mode until this time
    next_grant_ms = 0.0

    def send_data(now_ms: float) -> None:
        nonlocal snd_nxt, link_free_ms
        while snd_nxt - acked < cwnd * MSS_BYTES:
            start = max(now_ms + 0.05, link_free_ms)  # 50 µs to the bottleneck
            link_free_ms = start + ser_ms
            tsval = (int(now_ms) + cfg.ts_offset) & 0xFFFFFFFF
            push(link_free_ms + cfg.one_way_ms, "data", (snd_nxt, tsval, ts_recent))
            snd_nxt += MSS_BYTES

    def uplink_departure(now_ms: float) -> float:
        nonlocal ul_grant_until, next_grant_ms
        if cfg.ul_policy == "none":
            return now_ms
        if cfg.ul_policy == "bsr" and now_ms <= ul_grant_until:
            # granted from BSRs: the next grant slot, every bsr_grant_ms
            while next_grant_ms < now_ms:
                next_grant_ms += cfg.bsr_grant_ms
            ul_grant_until = next_grant_ms + 2 * cfg.bsr_grant_ms
            return next_grant_ms
        occ = _next_occasion(now_ms, cfg.sr_period_ms, cfg.sr_offset_ms)
        dep = occ + cfg.grant_delay_ms
        if cfg.ul_policy == "bsr":
            next_grant_ms = dep
            ul_grant_until = dep + 2 * cfg.bsr_grant_ms
        return dep

    send_data(0.0)
    end_ms = cfg.duration_s * 1000
    while events:
        t, _, kind, data = heapq.heappop(events)
        if t > end_ms:
            break
        if kind == "data":
            seq, tsval, tsecr = data
            rows.append((int(t * 1e6), 0, seq, 0, MSS_BYTES, tsval, tsecr, 1))
            if seq == rcv_nxt:
                rcv_nxt += MSS_BYTES
            unacked_pkts += 1
            if unacked_pkts >= 2:  # delayed ACK: one per two segments
                unacked_pkts = 0
                t_ack = t + rng.uniform(0.005, 0.03)
                my_ts = int(t_ack) & 0xFFFFFFFF
                rows.append((int(t_ack * 1e6), 1, 0, rcv_nxt, 0, my_ts, tsval, 1))
                push(uplink_departure(t_ack) + cfg.one_way_ms, "ack", (rcv_nxt, my_ts))
        else:
            ack, ts = data
            if ack > acked:
                newly = (ack - acked) // MSS_BYTES
                acked = ack
                ts_recent = ts
                cwnd = min(cfg.cwnd_max_pkts, cwnd + newly)  # slow start up to the cap
                send_data(t)
    rows.sort(key=lambda r: r[0])
    return rows


def shift(rows: list[tuple[int, int, int, int, int, int, int, int]], dt_ns: int
          ) -> list[tuple[int, int, int, int, int, int, int, int]]:
    """The rows dt_ns later (room before them for a handshake)."""
    return [(r[0] + dt_ns, *r[1:]) for r in rows]


def write_events(rows: list[tuple[int, int, int, int, int, int, int, int]], path: Path, flow: int = 0) -> Path:
    with open(path, "w") as out:
        out.write("# cellab-probe events v1\nt_ns,flow,dir,seq,ack,len,win,has_ts,tsval,tsecr\n")
        out.writelines(f"{t_ns},{flow},{direction},{seq & 0xFFFFFFFF},{ack & 0xFFFFFFFF},{length},0,{has_ts},"
                      f"{tsval},{tsecr}\n" for t_ns, direction, seq, ack, length, tsval, tsecr, has_ts in rows)
    return path


def write_pcap(rows: list[tuple[int, int, int, int, int, int, int, int]], path: Path,
               server: tuple[str, int] = ("10.0.0.1", 5301), ue: tuple[str, int] = ("10.0.0.2", 40000),
               handshake: bool = False, server_isn: int = 0, ue_isn: int = 0) -> Path:
    """The same timing as a nanosecond pcap of raw IPv4 (headers only: the probe reads lengths from IP).

    handshake: also the connection's SYN, SYN-ACK and ACK before the rows and the teardown after them
    (the sender's FIN, our ACK and FIN, the sender's pure ACK 30 ms later), as a capture started before
    the flow sees it; sequence numbers then start at the ISNs (a real sender's is >= 2^31 half the time).
    The rows must then start at least 60 ms after time 0 (see shift()).
    """
    import ipaddress
    import struct

    srv_ip = ipaddress.IPv4Address(server[0]).packed
    ue_ip = ipaddress.IPv4Address(ue[0]).packed
    snaplen = 64
    # (t_ns, direction, seq, ack, length, tsval, tsecr, flags), sequence numbers absolute
    segs: list[tuple[int, int, int, int, int, int, int, int]] = []
    srv_base, ue_base = (server_isn + 1, ue_isn + 1) if handshake else (0, 0)
    for t_ns, direction, seq, ack, length, tsval, tsecr, _ in rows:
        flags = 0x10 | (0x08 if length else 0)
        if direction == 0:
            segs.append((t_ns, 0, srv_base + seq, ue_base, length, tsval, tsecr, flags))
        else:
            segs.append((t_ns, 1, ue_base, srv_base + ack, length, tsval, tsecr, flags))
    if handshake and rows:
        t0, t1 = rows[0][0], rows[-1][0]
        first_srv_ts = next(r[5] for r in rows if r[1] == 0)
        srv_end = max(srv_base + r[2] + r[4] for r in rows if r[1] == 0)
        last_srv_ts = max(r[5] for r in rows if r[1] == 0)
        ms = 1_000_000
        segs[:0] = [(t0 - 60 * ms, 1, ue_isn, 0, 0, 0, 0, 0x02),  # SYN: the ack field is 0
                    (t0 - 30 * ms, 0, server_isn, ue_base, 0, first_srv_ts, 0, 0x12),
                    (t0 - 30 * ms + 20_000, 1, ue_base, srv_base, 0, 0, first_srv_ts, 0x10)]
        my_ts = max(r[5] for r in rows if r[1] == 1) + 1
        segs += [(t1 + ms, 0, srv_end, ue_base, 0, last_srv_ts, my_ts - 1, 0x11),
                 (t1 + ms + 20_000, 1, ue_base, srv_end + 1, 0, my_ts, last_srv_ts, 0x10),
                 (t1 + ms + 40_000, 1, ue_base, srv_end + 1, 0, my_ts, last_srv_ts, 0x11),
                 (t1 + 31 * ms, 0, srv_end + 1, ue_base + 1, 0, last_srv_ts + 30, my_ts, 0x10)]
    with open(path, "wb") as out:
        # magic for nanosecond timestamps, version 2.4, LINKTYPE_RAW (101)
        out.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, snaplen, 101))
        for t_ns, direction, seq, ack, length, tsval, tsecr, flags in segs:
            src, dst, sport, dport = (srv_ip, ue_ip, server[1], ue[1]) if direction == 0 else \
                (ue_ip, srv_ip, ue[1], server[1])
            tcp_len = 32
            options = struct.pack("!BBBBII", 1, 1, 8, 10, tsval & 0xFFFFFFFF, tsecr & 0xFFFFFFFF)
            tcp = struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF,
                              (tcp_len // 4) << 4, flags, 1000, 0, 0) + options
            ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + tcp_len + length, 0, 0x4000, 64, 6, 0, src, dst)
            frame = ip + tcp
            out.write(struct.pack("<IIII", t_ns // 1_000_000_000, t_ns % 1_000_000_000, len(frame),
                                  20 + tcp_len + length))
            out.write(frame)
    return path
