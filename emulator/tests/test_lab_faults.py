"""The virtual lab's own faults enb_restart and ue_pause (issue 28), played by the run's FaultPlayer on one lab
instance with two UEs (one short timeline, no campaign):
- enb_restart 0.5 s, then 0.1 s (shorter than T310): every UE loses the cell and comes back through a new
  connection; checked in TTIs from the cell's own events, and the recovery rows from those events;
- ue_pause of UE 1 for 1 s while the server sends it a UDP flow every 20 ms: the child of its agent (a stand-in
  with the agent's argv) and the echo server in its namespace are frozen, the agent itself runs on (its
  heartbeats: issue 41), no packet reaches its namespace (lte0's receive counter, the TTI log), nothing answers,
  and the flow comes back after the end;
- a pause left active is thawed by the lab's down. Root: namespaces, the cgroup v2 freezer."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from cellab.emulator.hostpause import cgroup2_root
from cellab.emulator.ttilog import read_ttilog
from netlab import in_ns

from cellab.faults.player import FaultPlayer
from cellab.faults.recovery import read_cell_events, recovery_metrics
from cellab.faults.spec import FaultSpec, FaultStep

T310, CONNECT = 200, 300
ECHO = str(Path(__file__).with_name("udp_echo.py"))
PORT = 7001
# the UE agent's stand-in: its argv is what the lab looks for; it counts in a file and has a child of its own
# (the count is replaced whole: a freeze between a truncation and its write would leave the file empty)
FAKE_AGENT = ("import os, subprocess, sys, time\n"
              "child = subprocess.Popen(['sleep', '60'], start_new_session=True)\n"
              "open(sys.argv[-1] + '.child', 'w').write(str(child.pid))\n"
              "n = 0\n"
              "while True:\n"
              "    n += 1\n"
              "    open(sys.argv[-1] + '.new', 'w').write(str(n))\n"
              "    os.replace(sys.argv[-1] + '.new', sys.argv[-1])\n"
              "    time.sleep(0.02)\n")


def _next_frame(tti: int) -> int:
    return tti if tti % 10 == 0 else tti + 10 - tti % 10


def _rx_packets(netns: str) -> int:
    return int(subprocess.run(in_ns(netns, "cat", "/sys/class/net/lte0/statistics/rx_packets"),
                              capture_output=True, text=True, check=True, timeout=5).stdout)


def _cgroup(pid: int) -> str:
    return next(line[3:] for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines() if line.startswith("0::"))


def _wait_for(path: Path) -> str:
    deadline = time.monotonic() + 5
    while not (path.exists() and path.read_text()):
        assert time.monotonic() < deadline, f"{path} never written"
        time.sleep(0.02)
    return path.read_text()


def test_enb_restart_and_ue_pause_recover_on_the_cells_events(vlab, tmp_path):
    lab = vlab(ues=2, rlf=True, attenuation_db=20.0, core_delay_ms=5)
    counter = tmp_path / "agent-count"
    agent = subprocess.Popen([sys.executable, "-c", FAKE_AGENT, "agent", "--role", "ue", "--netns", lab.ue_ns(1),
                              str(counter)], start_new_session=True)
    child = None
    try:  # the stand-in and its child never outlive the test (SIGKILL reaches frozen tasks too)
        child = int(_wait_for(Path(f"{counter}.child")))
        _play_and_check(lab, tmp_path, counter, child)
    finally:
        agent.kill()
        if child is not None:
            os.kill(child, signal.SIGKILL)
        agent.wait(5)


def _play_and_check(lab, tmp_path: Path, counter: Path, child: int) -> None:
    echo = subprocess.Popen(in_ns(lab.ue_ns(1), sys.executable, ECHO, "serve", "10.200.1.2", str(PORT), "30"))
    flow = None
    try:
        faults = [FaultSpec(kind="enb_restart", at_s=0.2, duration_s=0.5),
                  FaultSpec(kind="enb_restart", at_s=1.3, duration_s=0.1),
                  FaultSpec(kind="ue_pause", at_s=1.9, duration_s=1.0, ue=1)]
        seen: dict[str, object] = {}

        def apply(i: int, active: bool) -> dict:
            fault = faults[i]
            if fault.kind == "ue_pause" and not active:  # what the paused host showed, just before its end
                seen.update({"rx_end": _rx_packets(lab.ue_ns(1)), "count_end": counter.read_text(),
                         "state": lab.fault_state(), "child_cgroup": _cgroup(child)})
            reply = lab.inject_fault(FaultStep(kind=fault.kind, active=active, ue=fault.ue))
            if fault.kind == "ue_pause" and active:
                time.sleep(0.1)  # what was in flight toward the namespace has arrived (or not)
                seen.update({"rx_start": _rx_packets(lab.ue_ns(1)), "count_start": counter.read_text(),
                         "frozen_pids": reply["frozen_pids"]})
            return reply

        mark = lab.clock_mark()
        flow = subprocess.Popen(in_ns(lab.srv_ns, sys.executable, ECHO, "flow", "10.200.1.2", str(PORT), "3.6",
                                      "0.02"), stdout=subprocess.PIPE, text=True)
        t0 = time.time()
        mono0 = time.monotonic_ns()
        player = FaultPlayer(faults, apply, t0).start()
        time.sleep(3.7)
        played = player.finish()
        lines = flow.communicate(timeout=10)[0].split()
        assert not player.errors, player.errors
        assert lab.fault_state()["ue_paused"] == []
        assert int(counter.read_text()) > int(seen["count_end"])  # the agent runs again
        assert "cellab-" not in _cgroup(child)
    finally:
        for proc in (flow, echo):
            if proc is not None and proc.poll() is None:
                proc.kill()

    events = read_cell_events(lab.cell_log)

    def tti_of(name: str, **match) -> list[int]:
        return [e["tti"] for e in events if e["event"] == name and all(e.get(k) == v for k, v in match.items())]

    # enb_restart: both UEs fail their radio link T310 after the first frame without the cell, and come back
    # through a new connection (no context to re-establish) connect_ms after the first frame with it
    (down1, down2), (up1, up2) = tti_of("enb_down"), tti_of("enb_up")
    for ue in (0, 1):
        t310 = tti_of("t310_start", ue=ue)
        rlf = tti_of("rlf", ue=ue)
        starts, done = tti_of("connect_start", ue=ue), tti_of("connect_complete", ue=ue)
        assert t310[0] == _next_frame(down1) and rlf[0] == t310[0] + T310, events
        assert starts[0] == _next_frame(up1) and done[0] == starts[0] + CONNECT
        # the short restart: still connected when the eNB came back, its connection gone with the old eNB
        assert rlf[1] == up2 and starts[1] == _next_frame(up2) and done[1] == starts[1] + CONNECT
        assert [e.get("cause") for e in events if e["event"] == "rlf" and e["ue"] == ue] == [None, "enb_restart"]
        assert not tti_of("reest_start", ue=ue)
    assert all(e["after"] == "reestablishment_reject" for e in events if e["event"] == "connect_start")
    assert up2 - down2 < T310

    # the recovery rows, from the cell's events on the run's timeline
    def t_of(tti: int) -> float:
        return mark["t_s"] + (tti - mark["tti"]) / 1000 - t0

    rows = recovery_metrics(faults, played, events, None, None, t_of, 3.7, None)
    assert rows[0]["reattach_by"] == "connect" and rows[1]["reattach_by"] == "connect"
    assert abs(rows[0]["rlf_s"] - t_of(tti_of("rlf", ue=0)[0])) < 1e-9
    # connect_ms + up to a frame, less the reply's latency; wide: the TTI-to-wall mapping assumes a cell on time
    assert 0.2 <= rows[0]["reattach_after_end_s"] <= 0.6, rows[0]
    assert rows[2]["rlf_s"] is None  # ue_pause: the modem stayed connected

    # ue_pause: frozen (the agent's child in another session, the echo in the namespace) while the agent ran on,
    # nothing reached the namespace, the cell dropped what its modem received, and the flow came back after the end
    assert seen["frozen_pids"] >= 2 and int(seen["count_end"]) > int(seen["count_start"])
    assert seen["state"]["ue_paused"] == [1] and seen["child_cgroup"].endswith(f"cellab-{lab.prefix}-ue1")
    assert seen["rx_end"] == seen["rx_start"]
    (host_down,), (host_up,) = tti_of("ue_host_down", ue=1), tti_of("ue_host_up", ue=1)
    stats = lab.ue_stats()[1]
    assert stats["host_dl_drop_pkts"] >= 0.7 * (host_up - host_down) / 20 and stats["rrc_state"] == "connected"
    lab.collect(tmp_path / "run")
    rec = read_ttilog(tmp_path / "run" / "cell_tti.bin").ue(1)
    during = (rec["tti"] > host_down) & (rec["tti"] < host_up)
    assert rec["dl_delivered_bytes"][during].sum() == 0 and rec["dl_drop_bytes"][during].sum() > 0
    sent = {int(s): int(t) for kind, s, t in zip(lines[::3], lines[1::3], lines[2::3], strict=True) if kind == "sent"}
    echoed = {int(s): int(t) for kind, s, t in zip(lines[::3], lines[1::3], lines[2::3], strict=True) if kind == "echo"}
    pause = next(r for r in played if r["fault"] == 2 and r["action"] == "start")["applied_s"]
    resume = next(r for r in played if r["fault"] == 2 and r["action"] == "end")["asked_s"]

    def on_timeline(ns: int) -> float:
        return (ns - mono0) / 1e9

    assert not [s for s, t in echoed.items() if pause + 0.1 < on_timeline(t) < resume], "the paused host answered"
    back = [s for s in echoed if on_timeline(sent[s]) > resume + 0.05]
    assert back and on_timeline(echoed[min(back)]) - resume < 0.5, (resume, sorted(back)[:3])

    # a pause left active at teardown: the lab's down thaws it
    lab.inject_fault(FaultStep(kind="ue_pause", active=True, ue=1))
    assert _cgroup(child).endswith(f"cellab-{lab.prefix}-ue1")
    lab.down()
    assert not (cgroup2_root() / f"cellab-{lab.prefix}-ue1").exists()
    assert "cellab-" not in _cgroup(child)

