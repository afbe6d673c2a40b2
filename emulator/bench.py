"""Benchmark of the virtual cell (`make bench`; as root). One line per measurement:
name, value, baseline measured in the same run, ratio, target.

- forwarding with the radio limit lifted vs a plain TUN-to-TUN copy loop (the physical limit here)
- CPU per forwarded packet
- TTI timing: p99 |delivery time - model time| at 50 Mbit/s (baseline: the same cell at 1 Mbit/s)
- downlink queue: ping RTT during a 10 s Cubic download at 25 PRB, SR 20 ms, core delay 3 ms (issue 20) with
  srsenb's queue (baseline: the 4 MiB byte-limited queue), next to the real srsRAN stack's numbers
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import time
from pathlib import Path

from cellab.paths import find_program

from .vlab import TUN_NAME, VirtualLab, ue_addr

SECONDS = 4
PORT = 5501
QUEUE_CELL = {"n_prb": 25, "sr_period_ms": 20, "core_delay_ms": 3.0}  # issue 20's setup
QUEUE_DOWNLOAD_S = 10
SRSRAN_LOADED = "139/163/198 ms at 16.4 Mbit/s"  # issue 20: the real srsRAN 4G stack over ZMQ, same setup


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _udp_flood(lab: VirtualLab, rate: str, pid: int) -> tuple[float, float, float]:
    """UDP 1500-byte packets server -> UE for SECONDS; (received packets/s, Gbit/s, cell CPU s per packet)."""
    ue_ns = lab.ue_ns(0)
    server = subprocess.Popen(["ip", "netns", "exec", ue_ns, "iperf3", "-s", "-1", "-B", ue_addr(0), "-p", str(PORT)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    cpu0 = _cpu_s(pid)
    out = subprocess.run(["ip", "netns", "exec", lab.srv_ns, "iperf3", "-c", ue_addr(0), "-p", str(PORT), "-u",
                          "-b", rate, "-l", "1472", "-t", str(SECONDS), "-J"],
                         capture_output=True, text=True, timeout=SECONDS + 20, check=False)
    cpu = _cpu_s(pid) - cpu0
    server.wait(timeout=10)
    end = json.loads(out.stdout)["end"]["sum"]
    received = end["packets"] - end["lost_packets"]
    secs = end["seconds"]
    return received / secs, received * 1500 * 8 / secs / 1e9, cpu / max(received, 1)


def _ns(netns: str, *argv: str) -> list[str]:
    return ["ip", "netns", "exec", netns, *argv]


def _pings_ms(ue_ns: str, dst: str, count: int, interval_s: float) -> list[float]:
    out = subprocess.run(_ns(ue_ns, "ping", "-n", "-c", str(count), "-i", str(interval_s), dst),
                         capture_output=True, text=True, timeout=count * interval_s + 30, check=False)
    return [float(m) for m in re.findall(r"time=([\d.]+) ms", out.stdout)]


def _loaded_ping(rlc_queue: str | int) -> tuple[list[float], list[float], float, dict]:
    """Idle pings, then pings during a Cubic download (iperf3 -R, from 1 s into it); and the download's Mbit/s
    and the cell's counters of the UE."""
    lab = VirtualLab("cq" + secrets.token_hex(2), {**QUEUE_CELL, "rlc_queue": rlc_queue})
    topo = lab.up()
    try:
        srv, ue = topo.server.address, topo.ues[0].netns
        idle = _pings_ms(ue, srv, 20, 0.2)
        server = subprocess.Popen(_ns(lab.srv_ns, "iperf3", "-s", "-1", "-B", srv, "-p", str(PORT)),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.3)
        client = subprocess.Popen(_ns(ue, "iperf3", "-c", srv, "-p", str(PORT), "-R", "-C", "cubic", "-t",
                                      str(QUEUE_DOWNLOAD_S), "-J"), stdout=subprocess.PIPE, text=True)
        time.sleep(1.0)
        loaded = _pings_ms(ue, srv, int((QUEUE_DOWNLOAD_S - 1.5) / 0.2), 0.2)
        out, _ = client.communicate(timeout=QUEUE_DOWNLOAD_S + 20)
        server.wait(timeout=10)
        mbps = json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e6
        with lab.control() as ctl:
            counters = ctl.stats()["ues"][0]
        return idle, loaded, mbps, counters
    finally:
        lab.down()


def _mma(v: list[float]) -> str:
    return f"{min(v):.0f}/{sum(v) / len(v):.0f}/{max(v):.0f} ms" if v else "no replies"


def queue_main() -> None:
    results = {q: _loaded_ping(q) for q in ("srsenb", 4 << 20)}
    for q, (idle, loaded, mbps, ue) in results.items():
        print(f"(rlc_queue {q}: idle ping {_mma(idle)}; during Cubic {_mma(loaded)} at {mbps:.1f} Mbit/s; "
              f"discarded {ue['dl_discard_pkts']}, dropped full {ue['dl_drop_pkts']} packets)")
    srsenb, deep = results["srsenb"][1], results[4 << 20][1]
    if srsenb and deep:
        _line("ping avg during a Cubic download, rlc_queue srsenb", sum(srsenb) / len(srsenb),
              sum(deep) / len(deep), f"real srsRAN: {SRSRAN_LOADED}; baseline: 4 MiB queue", "ms")


def _line(name: str, value: float, baseline: float, target: str, unit: str) -> None:
    ratio = value / baseline if baseline else float("nan")
    print(f"{name}: {value:.4g} {unit}  baseline {baseline:.4g} {unit}  ratio {ratio:.3f}  target {target}")


def main() -> None:
    if os.geteuid() != 0:
        print("cell: needs root (network namespaces, TUN devices); not measured")
        return
    lab = VirtualLab("cb" + secrets.token_hex(2), {"n_prb": 100, "unlimited": True, "rlc_queue": 8 << 20})
    lab.up()
    try:
        pid = int(lab.pid_file.read_text())
        cell_pps, cell_gbps, cell_cpu = _udp_flood(lab, "3G", pid)
        # baseline: the plain copy loop on the same TUN devices
        lab._stop_cell()
        argv = [str(find_program("cellab-cell")), "--srv", f"{lab.srv_ns}:{TUN_NAME}", "--ue",
                f"{lab.ue_ns(0)}:{TUN_NAME}:{ue_addr(0)}", "--plain-copy", "--pid-file", str(lab.pid_file)]
        with open(lab.cell_log, "wb") as log:
            copy = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        while b"ready" not in lab.cell_log.read_bytes():
            time.sleep(0.02)
        lab._wire()
        copy_pps, copy_gbps, copy_cpu = _udp_flood(lab, "3G", copy.pid)
        copy.terminate()
        copy.wait(timeout=5)
        _line("forwarding rate (radio limit lifted)", cell_pps, copy_pps, ">= 0.7", "pkt/s")
        _line("forwarding throughput, 1500-byte packets", cell_gbps, copy_gbps, ">= 0.7 (aim 1 Gbit/s)", "Gbit/s")
        _line("CPU per packet", cell_cpu * 1e6, copy_cpu * 1e6, "(lower is better)", "us")
        # TTI timing under a 50 Mbit/s load on a 100 PRB cell (75 Mbit/s): radio model on
        for realtime in (False, True):
            lab.configure({"unlimited": False, "n_prb": 100, "realtime": realtime})
            _udp_flood(lab, "1M", int(lab.pid_file.read_text()))  # baseline: the same cell lightly loaded
            with lab.control() as ctl:
                light_p99 = ctl.stats()["delivery_err_p99_us"]
            lab.configure({"unlimited": False, "n_prb": 100, "realtime": realtime})
            _udp_flood(lab, "50M", int(lab.pid_file.read_text()))
            with lab.control() as ctl:
                st = ctl.stats()
            mode = "SCHED_FIFO" if realtime else "default scheduling"
            print(f"({mode}: {st['delivery_err_count']} deliveries, late TTIs {st['late_ttis']}, "
                  f"resyncs {st['resyncs']}; baseline: the same cell at 1 Mbit/s)")
            _line(f"TTI timing p99 |delivery - model| at 50 Mbit/s, {mode}", st["delivery_err_p99_us"],
                  max(light_p99, 1), "<= 200 us", "us")
    finally:
        lab.down()
    queue_main()


if __name__ == "__main__":
    main()
