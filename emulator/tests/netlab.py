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


def udp_ping_rtts_ms(srv_ns: str, srv_addr: str, ue_ns: str, count: int, min_gap_s: float, max_gap_s: float,
                     seed: int = 1, port: int = 5400) -> np.ndarray:
    """RTTs (ms) of `count` UDP echoes sent at random gaps in [min_gap_s, max_gap_s] from the UE.

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
        return np.array([float(x) for x in out.stdout.split()])
    finally:
        server.kill()
        server.wait()


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
