"""A ping over UDP with randomised send times (run inside a namespace with `ip netns exec`).

    udp_echo.py serve ADDR PORT SECONDS
    udp_echo.py ping ADDR PORT COUNT MIN_GAP_S MAX_GAP_S SEED     -> per echo: send time (CLOCK_MONOTONIC ns), RTT ms
    udp_echo.py flow ADDR PORT SECONDS GAP_S     -> a packet every GAP_S, never waiting for echoes: per line
                                                    "sent SEQ NS" or "echo SEQ NS" (CLOCK_MONOTONIC ns)

Send times are drawn at random so the pings sample every phase of the SR period and of the TTI clock
(Linux ping's fixed interval locks onto the TTI phase). 56 bytes of payload: 84-byte IP packets, as ping.
"""

from __future__ import annotations

import random
import select
import socket
import sys
import time


def serve(addr: str, port: int, seconds: float) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((addr, port))
    sock.settimeout(0.2)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            data, peer = sock.recvfrom(2048)
        except TimeoutError:
            continue
        sock.sendto(data, peer)


def ping(addr: str, port: int, count: int, min_gap_s: float, max_gap_s: float, seed: int) -> None:
    rng = random.Random(seed)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(1.0)
    for seq in range(count):
        time.sleep(rng.uniform(min_gap_s, max_gap_s))
        payload = seq.to_bytes(4, "big") + bytes(52)
        t0 = time.monotonic()
        sent_ns = time.monotonic_ns()
        sock.sendto(payload, (addr, port))
        try:
            while True:
                data, _ = sock.recvfrom(2048)
                if data[:4] == payload[:4]:
                    break
        except TimeoutError:
            continue
        print(f"{sent_ns} {(time.monotonic() - t0) * 1000:.3f}", flush=True)


def flow(addr: str, port: int, seconds: float, gap_s: float) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setblocking(False)
    start = time.monotonic()
    seq = 0
    while time.monotonic() < start + seconds:
        sock.sendto(seq.to_bytes(4, "big") + bytes(52), (addr, port))
        print(f"sent {seq} {time.monotonic_ns()}", flush=True)
        seq += 1
        until = start + seq * gap_s
        while (left := until - time.monotonic()) > 0:
            if select.select([sock], [], [], left)[0]:
                data, _ = sock.recvfrom(2048)
                print(f"echo {int.from_bytes(data[:4], 'big')} {time.monotonic_ns()}", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "flow":
        flow(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]))
    elif sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    else:
        ping(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6]),
             int(sys.argv[7]))
