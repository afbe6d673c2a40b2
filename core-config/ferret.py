"""FerretDB (cellab-ferretdb: MongoDB wire protocol on SQLite) for a lab without MongoDB.

`up` starts it detached with its data, log and pid file in one folder and waits until it answers a ping;
`down` stops the process of that pid file; `status` says whether it runs and answers."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from cellab.errors import CellabError
from cellab.paths import PROJECT_ROOT, find_program

DEFAULT_DIR = PROJECT_ROOT / "build" / "ferretdb"
DEFAULT_PORT = 27017
START_TIMEOUT_S = 15.0
STOP_GRACE_S = 5.0


@dataclass
class DbStatus:
    running: bool
    pid: int | None
    url: str
    answering: bool
    log: Path

    def line(self) -> str:
        if not self.running:
            return f"FerretDB not running (folder {self.log.parent})"
        state = "answering" if self.answering else "NOT answering"
        return f"FerretDB pid {self.pid} at {self.url}: {state} (log {self.log})"


def _paths(directory: Path) -> tuple[Path, Path, Path]:
    return directory / "ferretdb.pid", directory / "ferretdb.log", directory / "data"


def _pid_alive(pid_file: Path) -> int | None:
    try:
        pid = int(pid_file.read_text().split()[0])
        os.kill(pid, 0)
    except (OSError, ValueError, IndexError):
        return None
    cmdline = Path(f"/proc/{pid}/cmdline")
    try:
        if b"cellab-ferretdb" not in cmdline.read_bytes():  # a recycled pid is not ours
            return None
    except OSError:
        return None
    return pid


def _port_of(pid_file: Path, default: int) -> int:
    try:
        return int(pid_file.read_text().split()[1])
    except (OSError, ValueError, IndexError):
        return default


def _answers(port: int, timeout_s: float = 1.0) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s):
            return True
    except OSError:
        return False


def url_for(port: int) -> str:
    return f"mongodb://127.0.0.1:{port}/"


def up(directory: Path = DEFAULT_DIR, port: int = DEFAULT_PORT) -> DbStatus:
    directory = Path(directory)
    pid_file, log, data = _paths(directory)
    if _pid_alive(pid_file):
        return status(directory, port)
    if _answers(port, 0.3):
        raise CellabError(f"port {port} is already in use by another program: choose one with --port")
    binary = find_program("cellab-ferretdb")
    directory.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen([str(binary), "--listen-addr", f"127.0.0.1:{port}", "--data-dir", str(data)],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    pid_file.write_text(f"{proc.pid} {port}\n")
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
            pid_file.unlink(missing_ok=True)
            raise CellabError(f"FerretDB exited at start (code {proc.returncode}): {tail[0]} (log {log})")
        if _answers(port, 0.3):
            return status(directory, port)
        time.sleep(0.1)
    down(directory)
    raise CellabError(f"FerretDB did not listen on 127.0.0.1:{port} within {START_TIMEOUT_S:.0f} s (log {log})")


def down(directory: Path = DEFAULT_DIR) -> bool:
    """True when a running FerretDB was stopped."""
    pid_file, _, _ = _paths(Path(directory))
    pid = _pid_alive(pid_file)
    if pid is None:
        pid_file.unlink(missing_ok=True)
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    while time.monotonic() < deadline and _pid_alive(pid_file):
        time.sleep(0.05)
    if _pid_alive(pid_file):
        os.kill(pid, signal.SIGKILL)
    pid_file.unlink(missing_ok=True)
    return True


def status(directory: Path = DEFAULT_DIR, port: int = DEFAULT_PORT) -> DbStatus:
    pid_file, log, _ = _paths(Path(directory))
    pid = _pid_alive(pid_file)
    port = _port_of(pid_file, port)
    return DbStatus(pid is not None, pid, url_for(port), pid is not None and _answers(port), log)
