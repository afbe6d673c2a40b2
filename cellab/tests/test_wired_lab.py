"""The wired lab: comes up, carries real TCP through its bottleneck, goes down cleanly, also after a crash."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from pyroute2 import netns

from cellab.labs.wired import WiredLab
from cellab.testkit.helpers import pid_in_netns

pytestmark = pytest.mark.shares_cpu  # wired labs, no module: beside other tests (conftest.py)


def ns_with(prefix):
    return [n for n in netns.listnetns() if n.startswith(prefix + "-")]


def test_up_shapes_traffic_and_down_cleans(require_root, netns_prefix):
    lab = WiredLab(netns_prefix, rate_mbit=8, buffer_bytes=40_000)
    try:
        topo = lab.up()
        assert sorted(ns_with(netns_prefix)) == sorted([f"{netns_prefix}-srv", f"{netns_prefix}-rtr", f"{netns_prefix}-ue0"])
        server = subprocess.Popen(["ip", "netns", "exec", topo.server.netns, "iperf3", "-s", "-1", "-p", "5201"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        out = subprocess.run(["ip", "netns", "exec", topo.ues[0].netns, "iperf3", "-c", topo.server.address, "-R",
                              "-t", "3", "-J"], capture_output=True, text=True, timeout=30)
        server.wait(10)
        rate = json.loads(out.stdout)["end"]["sum_received"]["bits_per_second"]
        assert 5e6 < rate <= 8.2e6, rate  # the tbf rate, not the veth's
        lab.configure({"rate_mbit": 2})
        qdisc = subprocess.run(["ip", "netns", "exec", topo.extra["router_netns"], "tc", "qdisc", "show", "dev", "rtr-u"],
                               capture_output=True, text=True).stdout
        assert "tbf" in qdisc and "2Mbit" in qdisc
    finally:
        lab.down()
    assert ns_with(netns_prefix) == []
    lab.down()  # idempotent


def test_up_removes_leftovers_of_a_crash(require_root, netns_prefix):
    netns.create(f"{netns_prefix}-srv")  # as if a crashed run left it behind, with a process inside
    sleeper = subprocess.Popen(["ip", "netns", "exec", f"{netns_prefix}-srv", "sleep", "600"])
    deadline = time.monotonic() + 10  # inside the namespace before up() looks (CI's busy host was slower)
    while pid_in_netns(f"{netns_prefix}-srv", "sleep") != sleeper.pid and time.monotonic() < deadline:
        time.sleep(0.02)
    lab = WiredLab(netns_prefix)
    try:
        lab.up()
        assert sleeper.wait(5) is not None  # the leftover's process was killed
        assert len(ns_with(netns_prefix)) == 3
    finally:
        lab.down()
    assert ns_with(netns_prefix) == []
