"""`make bench BENCH=srsran`: the srsran-zmq lab's costs and fidelity, printed.

1. `cellab run` of a 2-run campaign (same SR period twice): time from the command's start to the UE attached
   (the first run's configure returned: srsEPC, srsenb, srsue up and one ping through), and each run's
   overhead (run time minus the workload's duration; the second run restarts nothing).
2. Ping RTT min/avg/max (20 pings, 0.213 s apart, UE → server) per SR period on srsran-zmq, next to the
   virtual cell (cellab-cell) at the same SR period in the same bench run; plus each srsran-zmq restart's time.
3. The two EPCs side by side on the same radio (srsEPC, and Open5GS when installed): the time from the core's
   start to the UE attached, and the ping RTT idle and under a Cubic download (iperf3 -R), each core's version.

Needs root and the srsRAN bundle (../shared/tools/srsran or $CELLAB_SRSRAN_BIN); says so and returns otherwise.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cellab.errors import CellabError
from cellab.run.session import LabSession

SR_PERIODS_MS = (5, 10, 20, 40, 80)
PINGS, PING_INTERVAL_S = 20, 0.213
WORKLOAD_S = 2
_RTT_RE = re.compile(r"rtt min/avg/max/mdev = ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms")


def ping_rtt_ms(netns: str, address: str, count: int = PINGS, wait_s: int = 2) -> tuple[float, float, float, int]:
    """(min, avg, max, lost) of `count` pings from a namespace."""
    out = subprocess.run(["ip", "netns", "exec", netns, "ping", "-q", "-c", str(count), "-i", str(PING_INTERVAL_S),
                          "-W", str(wait_s), address], capture_output=True, text=True, timeout=count * 4).stdout
    match = _RTT_RE.search(out)
    lost = re.search(r"(\d+) received", out)
    if not match:
        raise CellabError(f"ping from {netns} to {address} got no answer: {out.strip()[-200:]}")
    return (float(match[1]), float(match[2]), float(match[3]), count - int(lost[1]) if lost else -1)


def time_to_attach(workdir: Path) -> None:
    camp = workdir / "bench.yaml"
    camp.write_text("name: bench-srsran\nlab: srsran-zmq\nrepeat: 2\nfactors: {sr_period_ms: [20]}\n"
                    f"fixed: {{n_prb: 25, cc: cubic}}\nworkload: {{tool: probe, duration_s: {WORKLOAD_S}}}\n"
                    "timeouts: {run_s: 150, request_s: 20}\nretry: {max_attempts: 1, backoff_s: 1}\n")
    t0 = time.time()
    proc = subprocess.run([sys.executable, "-m", "cellab", "run", str(camp), "--out", str(workdir / "out"),
                           "--prefix", "zqb", "--no-report"], capture_output=True, text=True, timeout=600)
    total_s = time.time() - t0
    folder = sorted((workdir / "out").iterdir())[-1]
    with sqlite3.connect(folder / "results.sqlite") as db:
        rows = list(db.execute("SELECT run_id, status, error FROM runs ORDER BY idx, repeat"))
    if proc.returncode != 0 or any(status != "ok" for _, status, _ in rows):
        raise CellabError(f"bench campaign failed: {rows} {proc.stderr[-500:]}")
    print(f"cellab run, 2 runs of a {WORKLOAD_S} s probe workload: {total_s:.1f} s in all")
    runs_s = 0.0
    for i, (run_id, _, _) in enumerate(rows):
        run_dir = folder / "runs" / run_id
        m = json.loads((run_dir / "manifest.json").read_text())
        lab_status = json.loads((run_dir / "lab_status.json").read_text())
        conf = lab_status["configure"]
        run_s = m["finished_at"] - m["started_at"]
        runs_s += run_s
        if i == 0:
            print(f"  `cellab run` -> UE attached (first configure returned): "
                  f"{m['started_at'] + conf['configure_s'] - t0:.1f} s (srsue start -> attach {conf['attach_s']:.1f} s; "
                  f"waiting for the srsRAN lock {lab_status['lab']['lock_wait_s']:.1f} s)")
        what = ", ".join(conf["restart_reasons"]) or "nothing restarted"
        print(f"  run {i + 1}: {run_s:.1f} s, overhead beyond the workload {run_s - WORKLOAD_S:.1f} s "
              f"(configure {conf['configure_s']:.1f} s: {what})")
    print(f"  outside the runs (lab up, agents, srsEPC, teardown; no report): {total_s - runs_s:.1f} s")


def rtt_table() -> None:
    rows: dict[int, dict[str, object]] = {}
    with LabSession("srsran-zmq", prefix="zqb") as session:
        lab, topo = session.lab, session.topology
        for period in SR_PERIODS_MS:
            t0 = time.monotonic()
            lab.configure({"sr_period_ms": period, "n_prb": 25})
            restart_s = time.monotonic() - t0
            rows[period] = {"zmq": ping_rtt_ms(topo.ues[0].netns, topo.server.address), "restart_s": restart_s,
                            "truth": lab.ground_truth({})}
    with LabSession("virtual", prefix="zqbv") as session:
        lab, topo = session.lab, session.topology
        for period in SR_PERIODS_MS:
            lab.configure({"sr_period_ms": period, "n_prb": 25})
            rows[period]["virtual"] = ping_rtt_ms(topo.ues[0].netns, topo.server.address)
    print(f"ping RTT (ms), {PINGS} pings {PING_INTERVAL_S} s apart, UE -> server; min/avg/max (lost)")
    print(f"  {'SR ms':>5}  {'srsran-zmq':>24}  {'virtual cell':>24}  {'RRC sr-ConfigIndex':>18}  restart s")
    for period, row in rows.items():
        cells = []
        for kind in ("zmq", "virtual"):
            lo, avg, hi, lost = row[kind]  # type: ignore[misc]
            cells.append(f"{lo:6.1f}/{avg:6.1f}/{hi:6.1f} ({lost})")
        truth = row["truth"] or {}
        print(f"  {period:>5}  {cells[0]:>24}  {cells[1]:>24}  {truth.get('sr_config_index', '-'):>18}  "
              f"{row['restart_s']:.1f}")


LOADED_PINGS, DOWNLOAD_S, BENCH_PORT = 15, 8, 5299


def loaded_ping_rtt_ms(ue_netns: str, server_netns: str, address: str) -> tuple[float, float, float, int]:
    """Ping RTT while a Cubic download (iperf3 -R, server side in the server namespace) fills the queue: the pings
    start 2 s into it."""
    server = subprocess.Popen(["ip", "netns", "exec", server_netns, "iperf3", "-s", "-1", "-B", address, "-p",
                               str(BENCH_PORT)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        client = subprocess.Popen(["ip", "netns", "exec", ue_netns, "iperf3", "-c", address, "-p", str(BENCH_PORT),
                                   "-R", "-t", str(DOWNLOAD_S), "-C", "cubic"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(2.0)
            return ping_rtt_ms(ue_netns, address, count=LOADED_PINGS, wait_s=3)
        finally:
            client.wait(timeout=DOWNLOAD_S + 20)
    finally:
        server.wait(timeout=20)


def core_table() -> None:
    """srsEPC and Open5GS behind the same srsenb and srsue: a core change restarts the stack, so each row's attach
    time is the core's start to the UE attached (the lab's configure)."""
    from cellab.ran.zmqlab_params import open5gs_installed

    cores = ["srsepc"] + (["open5gs"] if open5gs_installed() else [])
    rows: dict[str, dict[str, object]] = {}
    with LabSession("srsran-zmq", prefix="zqc") as session:
        lab, topo = session.lab, session.topology
        for core in cores:
            lab.configure({"core": core, "n_prb": 25, "sr_period_ms": 10})
            conf = lab.last_configure
            rows[core] = {"version": lab.core_record()["version"] or "?", "configure_s": conf["configure_s"],
                          "attach_s": conf["attach_s"], "core_s": conf["steps_s"].get("core_restart"),
                          "idle": ping_rtt_ms(topo.ues[0].netns, topo.server.address),
                          "loaded": loaded_ping_rtt_ms(topo.ues[0].netns, topo.server.netns, topo.server.address)}
    if len(cores) == 1:
        print("cores: Open5GS is not installed here (../shared/tools/open5gs, cellab-ferretdb): srsEPC alone")
    print("the EPCs side by side (25 PRB, SR 10 ms): core start, srsue start -> attached, whole configure; ping RTT "
          "min/avg/max (lost) idle and under a Cubic download")
    for core, row in rows.items():
        core_s = f"{row['core_s']:.1f} s" if row["core_s"] is not None else "-"
        print(f"  {core:8} {row['version']:>8}: core {core_s}, attach {row['attach_s']:.1f} s, configure "
              f"{row['configure_s']:.1f} s; idle {_rtt_text(row['idle'])} ms, loaded {_rtt_text(row['loaded'])} ms")


def _rtt_text(stats: object) -> str:
    lo, avg, hi, lost = stats  # type: ignore[misc]
    return f"{lo:.1f}/{avg:.1f}/{hi:.1f} ({lost})"


def main() -> None:
    from cellab.ran.zmqlab import srsran_bin_dir

    if os.geteuid() != 0:
        print("srsran: skipped: needs root (network namespaces, TUN devices)")
        return
    try:
        os.environ.setdefault("CELLAB_SRSRAN_BIN", str(srsran_bin_dir()))
    except CellabError as exc:
        print(f"srsran: skipped: {exc}")
        return
    load = os.getloadavg()
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} CPUs)")
    with tempfile.TemporaryDirectory(prefix="cellab-bench-srsran-") as tmp:
        time_to_attach(Path(tmp))
    rtt_table()
    core_table()
    load = os.getloadavg()
    print(f"load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
