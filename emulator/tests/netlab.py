"""Test helpers: programs in namespaces (argv lists only), iperf3, ping, and a tcpdump-based ACK capture."""

from __future__ import annotations

import json
import re
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np


def in_ns(netns: str, *argv: str) -> list[str]:
    return ["ip", "netns", "exec", netns, *argv]


def iperf3_download(srv_ns: str, srv_addr: str, ue_ns: str, seconds: float, port: int = 5301,
                    cc: str = "cubic") -> dict:
    """A TCP download (server -> UE) with iperf3 -R; returns iperf3's JSON."""
    server = subprocess.Popen(in_ns(srv_ns, "iperf3", "-s", "-1", "-B", srv_addr, "-p", str(port)),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        out = subprocess.run(in_ns(ue_ns, "iperf3", "-c", srv_addr, "-p", str(port), "-R", "-t", str(seconds),
                                   "-C", cc, "-J"), capture_output=True, text=True, timeout=seconds + 20, check=False)
        return json.loads(out.stdout)
    finally:
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def start_iperf3_download(srv_ns: str, srv_addr: str, ue_ns: str, seconds: float, port: int = 5302,
                          udp_bps: int | None = None, length: int = 1400,
                          upload: bool = False, cc: str | None = None) -> tuple[subprocess.Popen, subprocess.Popen]:
    server = subprocess.Popen(in_ns(srv_ns, "iperf3", "-s", "-1", "-B", srv_addr, "-p", str(port)),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    argv = ["iperf3", "-c", srv_addr, "-p", str(port), "-t", str(seconds), "-J"] + ([] if upload else ["-R"])
    if udp_bps:
        argv += ["-u", "-b", str(udp_bps), "-l", str(length)]
    if cc:
        argv += ["-C", cc]  # the namespaces' default may be another (the host's, e.g. bbr)
    client = subprocess.Popen(in_ns(ue_ns, *argv), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return server, client


def finish(*procs: subprocess.Popen, timeout: float = 20) -> None:
    for p in procs:
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def ping_rtts_ms(ue_ns: str, dst: str, count: int, interval_s: float, size: int = 56) -> np.ndarray:
    out = subprocess.run(in_ns(ue_ns, "ping", "-n", "-c", str(count), "-i", str(interval_s), "-s", str(size), dst),
                         capture_output=True, text=True, timeout=count * interval_s + 30, check=False)
    return np.array([float(m) for m in re.findall(r"time=([\d.]+) ms", out.stdout)])


class Capture:
    """tcpdump on an interface inside a namespace (kernel per-packet timestamps), read back as pcap."""

    def __init__(self, netns: str, ifname: str, bpf: str, path: Path):
        self.path = path
        self.proc = subprocess.Popen(in_ns(netns, "tcpdump", "-i", ifname, "-n", "-s", "96", "-U", "-w", str(path),
                                           bpf), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 5
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)

    def stop(self) -> np.ndarray:
        """Packet times in seconds."""
        self.proc.terminate()
        finish(self.proc, timeout=5)
        return read_pcap_times(self.path)


def read_pcap_times(path: Path) -> np.ndarray:
    data = path.read_bytes()
    if len(data) < 24:
        return np.array([])
    magic = struct.unpack("<I", data[:4])[0]
    nano = magic == 0xA1B23C4D
    off, times = 24, []
    while off + 16 <= len(data):
        sec, frac, incl, _orig = struct.unpack("<IIII", data[off:off + 16])
        times.append(sec + frac / (1e9 if nano else 1e6))
        off += 16 + incl
    return np.array(times)


def burst_gaps_ms(times_s: np.ndarray, burst_gap_ms: float = 2.0) -> tuple[np.ndarray, float]:
    """Gaps between bursts (packets less than burst_gap_ms apart form one burst) and packets per burst."""
    if len(times_s) < 2:
        return np.array([]), 0.0
    d = np.diff(np.sort(times_s)) * 1000.0
    gaps = d[d >= burst_gap_ms]
    return gaps, len(times_s) / (len(gaps) + 1)


def udp_pings(srv_ns: str, srv_addr: str, ue_ns: str, count: int, min_gap_s: float, max_gap_s: float,
              seed: int = 1, port: int = 5400) -> tuple[np.ndarray, np.ndarray]:
    """`count` UDP echoes sent at random gaps in [min_gap_s, max_gap_s] from the UE: their send times
    (CLOCK_MONOTONIC ns) and RTTs (ms).

    Both ends run SCHED_FIFO (chrt) so that on a busy host a late wake-up of the measuring processes
    does not pass for the cell's delay."""
    script = str(Path(__file__).with_name("udp_echo.py"))
    rt = ["chrt", "-f", "20"]
    budget = count * (max_gap_s + 1.0) + 5
    server = subprocess.Popen(in_ns(srv_ns, *rt, sys.executable, script, "serve", srv_addr, str(port), str(budget)),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        out = subprocess.run(in_ns(ue_ns, *rt, sys.executable, script, "ping", srv_addr, str(port), str(count),
                                   str(min_gap_s), str(max_gap_s), str(seed)),
                             capture_output=True, text=True, timeout=budget, check=False)
        rows = [line.split() for line in out.stdout.splitlines() if line.strip()]
        return np.array([int(r[0]) for r in rows], dtype=np.int64), np.array([float(r[1]) for r in rows])
    finally:
        server.kill()
        server.wait()


def udp_ping_rtts_ms(srv_ns: str, srv_addr: str, ue_ns: str, count: int, min_gap_s: float, max_gap_s: float,
                     seed: int = 1, port: int = 5400) -> np.ndarray:
    """RTTs (ms) of udp_pings."""
    return udp_pings(srv_ns, srv_addr, ue_ns, count, min_gap_s, max_gap_s, seed, port)[1]


def pings_the_cell_kept(lab, count: int, min_gap_s: float, max_gap_s: float, need: int, window_ms: float,
                        seed: int = 1, late_ms: float = 2.0, tries: int = 4) -> tuple[np.ndarray, int]:
    """RTTs (ms) of UDP echoes from UE 0 that no TTI run more than late_ms late could have delayed, as the
    cell's `stalls` log tells: on a busy host those are delayed by the host, not by the model (and a
    max-based statistic would pick them). A ping is left out when a stall falls within window_ms of its send
    time, whatever its RTT: judged by its own flight, a long ping would be left out more often than a short
    one and the kept RTTs would lean short. Pings are sent in rounds of `count` until `need` are kept, at
    most `tries` rounds; fails naming how many the host spoiled. Returns the first `need` kept RTTs and the
    left-out count."""
    topo = lab.topology()
    kept: list[float] = []
    spoiled = 0
    for attempt in range(tries):
        since_ns = time.monotonic_ns()
        sent_ns, rtt_ms = udp_pings(lab.srv_ns, topo.server.address, topo.ues[0].netns, count, min_gap_s,
                                    max_gap_s, seed=seed + 1000 * attempt)
        with lab.control() as ctl:
            log = ctl.stalls(since_ns)
        assert log["complete"], "the cell's stall log overflowed during the pings: the host is far too busy"
        stalls = np.array([s for s in log["stalls"] if s[1] > late_ms * 1000.0], dtype=np.int64).reshape(-1, 2)
        # a TTI due at d and run L late delays what crosses the cell in [d, d + L]; margin: one TTI each side
        starts = stalls[:, 0] - 1_000_000
        ends = stalls[:, 0] + stalls[:, 1] * 1000 + 1_000_000
        flight_end = sent_ns + int(window_ms * 1e6)
        hit = np.array([bool(((starts <= e) & (ends >= s)).any()) for s, e in zip(sent_ns, flight_end, strict=True)],
                       dtype=bool)
        kept += rtt_ms[~hit].tolist()
        spoiled += int(hit.sum())
        if len(kept) >= need:
            return np.array(kept[:need]), spoiled
        print(f"the host may have delayed {int(hit.sum())} of {len(rtt_ms)} pings ({len(stalls)} TTIs over "
              f"{late_ms} ms late); {len(kept)} of {need} kept so far")
    raise AssertionError(f"the host delayed too many pings: {len(kept)} of the {need} needed kept after {tries} "
                         f"rounds ({spoiled} spoiled by TTIs over {late_ms} ms late)")


def bunch_start_spacing_ms(times_s: np.ndarray, join_ms: float) -> np.ndarray:
    """Spacing of bunch starts, a bunch being packets (and pieces) less than join_ms apart."""
    t = np.sort(times_s) * 1000.0
    if len(t) < 2:
        return np.array([])
    starts = t[np.r_[True, np.diff(t) >= join_ms]]
    return np.diff(starts)


def ping_during_download(srv_ns: str, srv_addr: str, ue_ns: str, seconds: float, ping_from_s: float,
                         count: int, interval_s: float) -> tuple[np.ndarray, dict]:
    """Ping RTTs (ms) from the UE while a Cubic download (iperf3 -R) of `seconds` runs; the pings start
    ping_from_s into it (Cubic has filled the queue by then). Returns the RTTs and iperf3's JSON."""
    server, client = start_iperf3_download(srv_ns, srv_addr, ue_ns, seconds, cc="cubic")
    try:
        time.sleep(ping_from_s)
        rtts = ping_rtts_ms(ue_ns, srv_addr, count=count, interval_s=interval_s)
        out, _ = client.communicate(timeout=seconds + 20)
        return rtts, json.loads(out)
    finally:
        finish(client, server)
