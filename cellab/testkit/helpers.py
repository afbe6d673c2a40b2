"""Helpers the rooms' tests share: run the CLI, read a result folder, start an agent as its host would, and
write a small lab inventory. (Tests only; nothing here runs in a campaign.)"""

from __future__ import annotations

import json
import os
import random
import secrets
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import yaml

from cellab.bus.keys import generate_keypair


def run_cellab(*args: str, timeout_s: float = 300, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cellab", *args], capture_output=True, text=True,
                          timeout=timeout_s, **kwargs)


def result_rows(folder: Path) -> list[tuple]:
    """(run_id, status, attempts, finished_at, error) of every run, in plan order."""
    with sqlite3.connect(folder / "results.sqlite") as db:
        return db.execute("SELECT run_id, status, attempts, finished_at, error FROM runs ORDER BY idx").fetchall()


def only_folder(out: Path) -> Path:
    folders = [p for p in out.iterdir() if p.is_dir()]
    assert len(folders) == 1, folders
    return folders[0]


# Below Linux's ephemeral range (32768-60999): a port the kernel handed out as free is, until the test binds it,
# anyone's next outgoing connection's local port (a controller once found its port so taken, under 3 workers).
# Each xdist worker draws from a block of its own, so two workers never pick the same port either.
TEST_PORT_BLOCKS = [range(start, start + 4000) for start in (20000, 24000, 28000)]
_ports_given: set[int] = set()


def free_port() -> int:
    """A free TCP port on 127.0.0.1, never the same twice in one process."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    block = TEST_PORT_BLOCKS[int(worker) % len(TEST_PORT_BLOCKS) if worker.isdigit() else 0]
    for port in random.sample(block, 400):
        if port in _ports_given:
            continue
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        _ports_given.add(port)
        return port
    raise OSError(f"no free port in {block.start}-{block.stop - 1}")


def start_agent(tmp_path: Path, name: str, role: str, netns: str | None, port: int, telemetry_port: int,
                *extra: str) -> subprocess.Popen:
    """An agent as its host would run it, with the key pair made in tmp_path/keys."""
    keys = tmp_path / "keys"
    return subprocess.Popen(
        [sys.executable, "-m", "cellab", "agent", "--role", role, "--name", name,
         "--controller", f"tcp://127.0.0.1:{port}", "--telemetry", f"tcp://127.0.0.1:{telemetry_port}",
         "--key", str(keys / f"{name}.key_secret"), "--controller-key", str(keys / "controller.key"),
         "--artifact-dir", str(tmp_path / f"artifacts-{name}"), *extra] + (["--netns", netns] if netns else []),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def start_cell_attenuator(cell_ctl: str, pty: Path, ues: int) -> subprocess.Popen:
    """The virtual cell's Mini-Circuits serial attenuator (cellab.attenuator.bridge) on a pseudo-terminal at
    `pty`, once it says it is ready."""
    bridge = subprocess.Popen([sys.executable, "-m", "cellab.attenuator.bridge", "--cell-ctl", cell_ctl,
                               "--pty-link", str(pty), "--ues", str(ues)], stdout=subprocess.PIPE, text=True)
    assert bridge.stdout is not None and '"ready"' in bridge.stdout.readline()
    return bridge


def stop_agents(procs: dict[str, subprocess.Popen], grace_s: float = 30) -> None:
    """SIGTERM every agent still running (each takes its devices to their safe state), then wait; kill what
    did not stop within grace_s."""
    stop_processes(procs.values(), grace_s)


def stop_processes(procs: Iterable[subprocess.Popen], grace_s: float = 30) -> None:
    """SIGTERM every process still running, then wait; kill what did not stop within grace_s."""
    procs = list(procs)
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()


def write_lab(tmp_path: Path, port: int = 7700, telemetry_port: int = 7701, attenuator_url: str | None = None,
              enb: bool = False, ues: int = 1) -> Path:
    """An inventory of a server and `ues` UE hosts; with attenuator_url a Mini-Circuits RC4DAT whose channels
    3, 4, ... are in front of the UEs; with enb an eNB agent. Key pairs for every agent in tmp_path/keys."""
    agents = {"server1": ("server", "edge")} | {f"ue{i + 1}": ("ue", "laptop") for i in range(ues)}
    agents |= ({"atten1": ("attenuator", "laptop")} if attenuator_url else {}) | (
        {"enb1": ("enb", "edge")} if enb else {})
    for name in ["controller", *agents]:
        generate_keypair(tmp_path / "keys", name)
    phones = [{"name": "phone" if i == 0 else f"phone{i + 1}", "kind": "virtual", "agent": f"ue{i + 1}"}
              for i in range(ues)]
    devices: dict = {"servers": [{"name": "edge", "agent": "server1", "address": "10.90.1.1"}], "ues": phones}
    if enb:
        devices["enb"] = [{"name": "enb", "agent": "enb1", "rf": "zmq"}]
    if attenuator_url:
        devices["attenuators"] = [{"name": "box1", "model": "minicircuits-rc4dat", "transport": "http",
                                   "address": attenuator_url, "channels": 4, "min_db": 10, "max_db": 60,
                                   "step_db": 0.25, "agent": "atten1"}]
        for i, phone in enumerate(phones):
            phone["attenuator"] = {"attenuator": "box1", "channel": 3 + i}
    inventory = {
        # the bench lease is by inventory name: two shares_cpu tests side by side must not hold one bench
        "name": f"test-lab-{secrets.token_hex(3)}",
        "controller": {"bind": f"tcp://127.0.0.1:{port}", "telemetry_bind": f"tcp://127.0.0.1:{telemetry_port}",
                       "secret_key": "keys/controller.key_secret"},
        "hosts": [{"name": "edge", "address": "127.0.0.1"}, {"name": "laptop", "address": "127.0.0.1"}],
        "agents": [{"name": name, "role": role, "host": host, "public_key": f"keys/{name}.key"}
                   for name, (role, host) in agents.items()],
        "devices": devices,
    }
    path = tmp_path / "lab.yaml"
    path.write_text(yaml.safe_dump(inventory))
    return path


def write_probe_summary(path: Path, rates: list[float], sizes: list[int | None], sr: dict | None = None) -> Path:
    """A cellab-probe summary with these per-flow rates and sizes (None: a timed flow)."""
    flows = [{"bytes": 1000 * (i + 1), "throughput_bps": r, "rtt": {"mean_ms": 40.0 + i}, "retransmitted_packets": i}
             for i, r in enumerate(rates)]
    requests = [{"index": i, "mode": "bytes" if s else "milliseconds", "fct_ms": 500.0 * (i + 1)}
                for i, s in enumerate(sizes)]
    path.write_text(json.dumps({"status": "ok", "flows": flows, "requests": requests, "total_bytes": 3000,
                                "throughput_bps": sum(rates), "rtt": {"n": 10, "mean_ms": 41.0, "p95_ms": 50.0},
                                "sr_estimate": sr or {"regime": "sr-limited", "period_ms": 20}}))
    return path


def cellab_in_process(capsys, *args: str) -> tuple[int, str, str]:
    """`cellab ARGS` run in this process as main() runs it (a refusal exits 2): (exit code, stdout, stderr)."""
    from cellab.cli import main

    argv = sys.argv
    sys.argv = ["cellab", *args]
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        sys.argv = argv
    out = capsys.readouterr()
    return code, out.out, out.err


def pid_in_netns(netns: str, comm: str) -> int | None:
    """The first process named `comm` in network namespace `netns`, or None."""
    pids = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True).stdout.split()
    for pid in pids:
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == comm[:15]:  # the kernel keeps 15 chars
                return int(pid)
        except OSError:
            continue
    return None


OPEN5GS_BUNDLE = Path(__file__).resolve().parents[2].parent / "shared" / "tools" / "open5gs"


def skip_without_open5gs() -> None:
    """Skip, saying why, a real-stack test on Open5GS without its bundle or the lab's FerretDB build."""
    import pytest

    from cellab.errors import CellabError
    from cellab.paths import find_program

    if not (OPEN5GS_BUNDLE / "bin" / "open5gs-mmed").is_file():
        pytest.skip(f"Open5GS bundle absent: no {OPEN5GS_BUNDLE / 'bin/open5gs-mmed'} (../shared/tools/open5gs)")
    try:
        find_program("cellab-ferretdb")
    except CellabError as exc:
        pytest.skip(f"cellab-ferretdb not built ({exc}); `make build` builds it")
