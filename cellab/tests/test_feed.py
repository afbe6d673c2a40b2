"""Telemetry from the files a workload writes (cellab.labs.feed): the newest whole line of each file once a tick, a
line still being written left for the next tick, what is not a sample skipped."""

from __future__ import annotations

import json
import time

from cellab.labs.feed import FileFeed, flow_sample, ping_sample


def test_ping_and_flow_lines_become_samples():
    assert ping_sample("[1795902797.114238] 64 bytes from 10.0.0.1: icmp_seq=1 ttl=64 time=41.5 ms") == \
        {"t_s": 1795902797.114238, "rtt_ms": 41.5}
    assert ping_sample("PING 10.0.0.1 (10.0.0.1) 56(84) bytes of data.") is None
    line = json.dumps({"flow_id": 1, "t_ns": 1795899110216779006, "rtt_us": 39998, "delivery_rate_bps": 8e6})
    assert flow_sample(line) == {"t_s": 1795899110.216779, "flow_id": 1, "rtt_ms": 39.998, "delivery_rate_bps": 8e6}
    assert flow_sample('{"flow_id": 1}') is None and flow_sample("not json") is None


def test_the_feed_publishes_the_newest_whole_line_of_each_file(tmp_path):
    ping = tmp_path / "ping.txt"
    published: list[tuple[str, dict]] = []
    feed = FileFeed(lambda: [ping, tmp_path / "not-yet.txt"], ping_sample, lambda t, d: published.append((t, d)),
                    "ping", interval_s=0.05).start()
    try:
        with open(ping, "w") as out:
            out.write("PING x\n[100.0] 64 bytes: icmp_seq=1 time=10 ms\n[101.0] 64 bytes: icmp_seq=2 time=20 ms\n"
                      "[102.0] 64 bytes: icmp_seq=3 ti")  # a line still being written
            out.flush()
            time.sleep(0.3)
            source = f"{tmp_path.name}/ping.txt"
            assert published == [("ping", {"t_s": 101.0, "rtt_ms": 20.0, "source": source})]  # the newest whole line, once
            out.write("me=30 ms\n")
            out.flush()
            time.sleep(0.3)
    finally:
        feed.stop()
    assert published[-1] == ("ping", {"t_s": 102.0, "rtt_ms": 30.0, "source": source}) and len(published) == 2
