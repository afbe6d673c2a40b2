"""Issue 40's Show, agent loss: an inventory campaign on this host (server, two UEs and the attenuator as separate
`cellab agent` processes over CURVE, the UEs in the virtual cell's namespaces). A UE agent killed mid-campaign:
the run it was in fails once (no attempt wasted waiting for it), the campaign pauses printing which agent on which
host and the command that starts it again; the agent started with that command, the campaign goes on and
completes. `cellab status` during the pause names the holder and the failed run. Then `--resume --retry-failed`
fills the failed cell, and a second resume while that one runs is refused naming it (root)."""

from __future__ import annotations

import json
import os
import queue
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import yaml

from cellab.bus.keys import generate_keypair
from cellab.emulator.vlab import SERVER_ADDR
from cellab.results.holder import holder_of
from cellab.testkit.helpers import free_port, only_folder, pid_in_netns, result_rows, run_cellab, start_agent, stop_agents


def write_inventory(tmp: Path, port: int, telemetry_port: int, pty: Path) -> Path:
    roles = {"server1": "server", "ue1": "ue", "ue2": "ue", "atten1": "attenuator"}
    for name in ["controller", *roles]:
        generate_keypair(tmp / "keys", name)
    inventory = {
        "name": f"loss-lab-{secrets.token_hex(3)}",  # the bench lease is by name
        "controller": {"bind": f"tcp://127.0.0.1:{port}", "telemetry_bind": f"tcp://127.0.0.1:{telemetry_port}",
                       "secret_key": "keys/controller.key_secret"},
        "hosts": [{"name": "here", "address": "127.0.0.1"}],
        "agents": [{"name": n, "role": r, "host": "here", "public_key": f"keys/{n}.key"} for n, r in roles.items()],
        "devices": {
            "attenuators": [{"name": "box", "model": "minicircuits-rc4dat", "transport": "serial", "address": str(pty),
                             "channels": 2, "min_db": 0, "max_db": 95, "step_db": 0.25, "agent": "atten1"}],
            "ues": [{"name": f"phone-{c}", "kind": "virtual", "agent": f"ue{i + 1}",
                     "attenuator": {"attenuator": "box", "channel": i + 1}} for i, c in enumerate("ab")],
            "servers": [{"name": "edge", "agent": "server1", "address": SERVER_ADDR}],
        },
    }
    path = tmp / "lab.yaml"
    path.write_text(yaml.safe_dump(inventory))
    return path


class Lines:
    """A process's stderr, line by line, as it comes."""

    def __init__(self, proc: subprocess.Popen):
        self.seen: list[str] = []
        self._queue: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, args=(proc.stderr,), daemon=True).start()

    def _read(self, stream) -> None:
        for line in stream:
            self.seen.append(line.rstrip("\n"))
            self._queue.put(self.seen[-1])

    def wait_for(self, text: str, timeout_s: float) -> int:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            hit = next((i for i, line in enumerate(self.seen) if text in line), None)
            if hit is not None:
                return hit
            try:
                self._queue.get(timeout=0.5)
            except queue.Empty:
                pass
        raise AssertionError(f"{text!r} not said within {timeout_s:g} s:\n" + "\n".join(self.seen))


@pytest.mark.timeout(900)  # two campaigns and a pause on a busy host
def test_a_lost_agent_pauses_the_campaign_with_its_restart_command_and_resume_retries_its_run(
        cell_and_box, tmp_path):
    port, telemetry_port = free_port(), free_port()
    topo, pty = cell_and_box
    procs: dict[str, subprocess.Popen] = {}
    campaigns: list[subprocess.Popen] = []  # cellab run processes: stopped like Ctrl-C if the test fails
    try:
        write_inventory(tmp_path, port, telemetry_port, pty)
        # the options of its host an agent was started with, which the inventory does not describe
        own = {"server1": ("server", topo.server.netns, ()),
               "ue1": ("ue", topo.ues[0].netns, ("--cell-ctl", topo.extra["ctl"], "--cell-ue", "0")),
               "ue2": ("ue", topo.ues[1].netns, ("--cell-ctl", topo.extra["ctl"], "--cell-ue", "1")),
               "atten1": ("attenuator", None, ())}
        for name, (role, netns, extra) in own.items():
            procs[name] = start_agent(tmp_path, name, role, netns, port, telemetry_port, *extra)
        (tmp_path / "c.yaml").write_text(textwrap.dedent("""
            name: loss
            lab: lab.yaml
            order: {mode: sequential}
            factors: {cc: [cubic, bbr, reno]}
            fixed: {attenuation_db: 10}
            workload: {duration_s: 3, ping_interval_ms: 100}
            timeouts: {run_s: 90, request_s: 15}
            retry: {max_attempts: 2, backoff_s: 0.5}
        """))
        out = tmp_path / "out"
        campaign = subprocess.Popen([sys.executable, "-m", "cellab", "run", str(tmp_path / "c.yaml"), "--out",
                                     str(out), "--no-report"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True)
        campaigns.append(campaign)
        said = Lines(campaign)
        deadline = time.monotonic() + 120
        while not (out.exists() and any(out.iterdir())
                   and result_rows(only_folder(out))[0][1] == "running" and pid_in_netns(topo.ues[1].netns, "iperf3")):
            assert time.monotonic() < deadline and campaign.poll() is None, "\n".join(said.seen)
            time.sleep(0.1)
        folder = only_folder(out)
        os.kill(procs["ue2"].pid, signal.SIGKILL)  # inside the first run's workload
        at = said.wait_for("agent ue2 (role ue) on host here (127.0.0.1) is lost: start it again there with", 90)
        said.wait_for("the campaign pauses and goes on by itself", 10)
        command = shlex.split(said.seen[at + 1])
        assert command[:6] == ["cellab", "agent", "--role", "ue", "--name", "ue2"], said.seen[at + 1]
        # the host-only options ue2's hello said, so the printed command is whole
        role, netns, extra = own["ue2"]
        assert command[-8:] == ["--netns", netns, *extra, "--artifact-dir", str(tmp_path / "artifacts-ue2")], command
        said.wait_for(f"agent ue2 connected: role ue, host {socket.gethostname()} (127.0.0.1), key ", 1)
        status = run_cellab("status", str(folder), timeout_s=60)  # while paused: the holder, the failed run
        print("\n".join(said.seen[at - 1:at + 5]) + "\n\n" + status.stdout)  # the Show's messages, with -s
        assert f"held by a live `cellab run`: pid {campaign.pid}" in status.stdout, status.stdout
        assert "cc=cubic: 0 ok, 1 failed, 0 invalid, 0 left" in status.stdout, status.stdout
        time.sleep(3)
        assert campaign.poll() is None and result_rows(folder)[1][1] == "pending"  # paused, not failing runs
        # restarted with the printed command as it is
        procs["ue2"] = subprocess.Popen([sys.executable, "-m", "cellab", *command[1:]],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        said.wait_for("agents back after", 60)
        said.wait_for("agent ue2 connected again: role ue, host ", 10)
        campaign.wait(240)
        rows = result_rows(folder)
        assert [r[1] for r in rows] == ["failed", "ok", "ok"], "\n".join(said.seen)
        assert rows[0][2] == 1 and "ue2" in rows[0][4], rows[0]  # one attempt: no retry waited for the lost agent
        assert campaign.returncode == 1  # a failed run
        assert any(f"{rows[2][0]} ok" in line and "3/3 runs done" in line for line in said.seen), said.seen
        pings = [json.loads(line) for line in (folder / "runs" / rows[1][0] / "telemetry" / "ue1.jsonl").open()]
        assert any(p["topic"] == "ping" and p["rtt_ms"] > 0 for p in pings)  # the live view's RTT, recorded

        first = subprocess.Popen([sys.executable, "-m", "cellab", "run", "--resume", str(folder), "--retry-failed",
                                  "--no-report"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        campaigns.append(first)
        deadline = time.monotonic() + 60
        while holder_of(folder) is None:
            assert time.monotonic() < deadline and first.poll() is None, first.communicate()[0]
            time.sleep(0.05)
        first.send_signal(signal.SIGSTOP)  # held for as long as the second takes to start, however slow the host
        try:
            second = run_cellab("run", "--resume", str(folder), "--retry-failed", "--no-report", timeout_s=60)
        finally:
            first.send_signal(signal.SIGCONT)
        assert second.returncode != 0 and f"held by a live `cellab run` (pid {first.pid}" in second.stderr, \
            second.stderr
        text, _ = first.communicate(timeout=240)
        assert first.returncode == 0, text
        assert [r[1] for r in result_rows(folder)] == ["ok", "ok", "ok"], text
    finally:
        for proc in campaigns:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc in campaigns:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
        stop_agents(procs)
