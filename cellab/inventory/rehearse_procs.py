"""The rehearsal lab's processes: each started detached (a session of its own, so it outlives `cellab rehearse
up`), recorded by pid and the kernel's start time, so `cellab rehearse down` stops exactly those processes and
their children (a pid the kernel gave to someone else since is never signalled)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from cellab.errors import CellabError

STOP_GRACE_S = 20.0  # an agent takes its devices to their safe state on SIGTERM, then exits


@dataclass
class Started:
    """One detached process: what it is, its argv, pid and start time (clock ticks since boot), its log."""
    name: str
    argv: list[str]
    pid: int
    start_ticks: int
    log: str

    def as_dict(self) -> dict:
        return asdict(self)


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, process group, start ticks) of a process, None when there is none."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # after "pid (comm) ": state is field 3 of stat(5)
    return fields[0], int(fields[2]), int(fields[19])


def spawn(name: str, argv: list[str], log: Path, append: bool = False) -> Started:
    """Start argv detached, its stdout and stderr into `log` (a new log, unless `append`: a restart's)."""
    with open(log, "ab" if append else "wb") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)
    stat = _stat(proc.pid)
    return Started(name, list(argv), proc.pid, stat[2] if stat else 0, str(log))


def alive(proc: Started) -> bool:
    stat = _stat(proc.pid)
    return stat is not None and stat[0] not in ("Z", "X") and stat[2] == proc.start_ticks


def group(proc: Started) -> list[int]:
    """The live processes of its session's group (itself and its children), none started before it."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat and stat[1] == proc.pid and stat[0] not in ("Z", "X") and stat[2] >= proc.start_ticks:
                found.append(int(entry.name))
    return found


def _signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def stop(procs: list[Started], grace_s: float = STOP_GRACE_S) -> list[str]:
    """SIGTERM every process group at once, SIGKILL what is left after grace_s; the names of those that were
    still running."""
    running = [p for p in procs if group(p)]
    for proc in running:
        _signal_all(group(proc), signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(group(p) for p in running):
        time.sleep(0.1)
    for proc in running:
        _signal_all(group(proc), signal.SIGKILL)
    return [p.name for p in running]


def _tail(path: Path, lines: int = 6) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def wait_line(proc: Started, needle: str, timeout_s: float, offset: int = 0) -> str:
    """The first line of its log (from byte `offset`) holding `needle`; an error naming the process and its
    log's last lines when it exits first or the wait runs out."""
    log = Path(proc.log)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            for line in log.read_bytes()[offset:].decode(errors="replace").splitlines():
                if needle in line:
                    return line
        except OSError:
            pass
        if not alive(proc):
            raise CellabError(f"{proc.name} exited while starting (log {log}):\n{_tail(log)}")
        if time.monotonic() > deadline:
            raise CellabError(f"{proc.name} did not say {needle!r} within {timeout_s:.0f} s (log {log}):\n"
                              f"{_tail(log)}")
        time.sleep(0.1)


def wait_port(proc: Started, port: int, timeout_s: float) -> None:
    """Until 127.0.0.1:port accepts; an error naming the process when it exits first or the wait runs out."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            pass
        if not alive(proc) or time.monotonic() > deadline:
            raise CellabError(f"{proc.name} is not listening on 127.0.0.1:{port} (log {proc.log}):\n"
                              f"{_tail(Path(proc.log))}")
        time.sleep(0.1)


def free_ports(count: int = 1) -> int:
    """The first of `count` consecutive TCP ports free on 127.0.0.1 now (the controller's bus and telemetry)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            first = probe.getsockname()[1]
        if first + count > 65535:
            continue
        try:
            held = []
            for port in range(first, first + count):
                sock = socket.socket()
                held.append(sock)
                sock.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
        finally:
            for sock in held:
                sock.close()
    raise CellabError("no free pair of TCP ports on 127.0.0.1")
