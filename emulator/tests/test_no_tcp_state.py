"""The virtual lab carries no TCP state from one run to the next: its namespaces keep no TCP metrics (a closed
connection's ssthresh and RTT, which the kernel would use to start the next connection to the same address), so a
run's flows start as a fresh session's do, whatever ran before them.

Measured before (issue 39): in a shoot-out session the server's cache held an entry for the UE at the start of
every run after the first (cwnd 76-396 packets, RTT 227-445 ms, from whichever runs came before)."""

from __future__ import annotations

import subprocess

from netlab import finish, in_ns, start_iperf3_download


def _tcp_metrics(ns: str) -> str:
    return subprocess.run(in_ns(ns, "ip", "tcp_metrics", "show"), capture_output=True, text=True,
                          check=True).stdout.strip()


def test_a_closed_connection_leaves_no_tcp_metrics_for_the_next(vlab):
    lab = vlab()
    topo = lab.topology()
    namespaces = [topo.server.netns, *(ue.netns for ue in topo.ues)]
    for ns in namespaces:
        done = subprocess.run(in_ns(ns, "sysctl", "-n", "net.ipv4.tcp_no_metrics_save"), capture_output=True,
                              text=True, check=True)
        assert done.stdout.strip() == "1", ns
    for _ in range(2):  # a transfer that ends, then another to the same address
        server, client = start_iperf3_download(topo.server.netns, topo.server.address, topo.ues[0].netns, 1,
                                               cc="cubic")
        out, _ = client.communicate(timeout=30)
        finish(server)
        assert client.returncode == 0 and '"bits_per_second"' in out
        for ns in namespaces:
            assert _tcp_metrics(ns) == "", (ns, _tcp_metrics(ns))
