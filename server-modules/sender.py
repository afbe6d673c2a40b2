"""Start and stop `cellab-send` (optionally inside a namespace) and read its logs."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Self


from cellab.contracts.server import SenderConfig
from cellab.errors import CellabError
from cellab.paths import find_program

START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0


class Sender:
    """One running cellab-send; its logs go to log_dir (flows.jsonl and flow-<id>.jsonl). Without a
    log_dir the sender makes a fresh folder under $TMPDIR; log_dir is set from its "listening" line."""

    def __init__(self, config: SenderConfig, log_dir: Path | None):
        self.config = config
        self.log_dir: Path | None = Path(log_dir) if log_dir is not None else None
        self.proc: subprocess.Popen[str] | None = None
        self.port: int | None = None

    def argv(self) -> list[str]:
        c = self.config
        argv = [str(find_program("cellab-send")), "serve", "--port", str(c.port),
                "--sample-ms", str(c.sample_ms), "--max-flows", str(c.max_flows), "--linger-s", str(c.linger_s)]
        if self.log_dir is not None:
            argv += ["--log-dir", str(self.log_dir)]
        if c.bind:
            argv += ["--bind", c.bind]
        if c.cc:
            argv += ["--cc", c.cc]
        if c.netns:
            argv = ["ip", "netns", "exec", c.netns, *argv]
        return argv

    def start(self) -> int:
        """Start and wait for the "listening" line; returns the port."""
        if self.proc is not None:
            raise CellabError("cellab-send is already running")
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(self.argv(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.1)
            if ready:
                line = self.proc.stdout.readline()
                if line:
                    event = json.loads(line)
                    if event.get("event") == "listening":
                        self.port = int(event["port"])
                        self.log_dir = Path(event["log_dir"])
                        return self.port
            if self.proc.poll() is not None:
                err = self.proc.stderr.read() if self.proc.stderr else ""
                self.proc = None
                raise CellabError(f"cellab-send exited at start: {err.strip()}")
        self.stop()
        raise CellabError(f"cellab-send did not start listening within {START_TIMEOUT_S} s")

    def stop(self) -> dict[str, Any]:
        """SIGTERM (running flows end and write their summaries), SIGKILL after a timeout."""
        if self.proc is None:
            return {}
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        for line in reversed(out.splitlines()):
            if '"stopped"' in line:
                return json.loads(line)
        return {}

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _logs(self) -> Path:
        if self.log_dir is None:
            raise CellabError("cellab-send has not started yet: it has no log folder")
        return self.log_dir

    def summaries(self) -> list[dict[str, Any]]:
        return read_jsonl(self._logs() / "flows.jsonl")

    def samples(self, flow_id: int) -> list[dict[str, Any]]:
        return read_jsonl(self._logs() / f"flow-{flow_id}.jsonl")

    def log_files(self) -> list[Path]:
        return sorted(self._logs().glob("flow*.jsonl"))


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    rows = []
    text = path.read_text()
    lines = text.split("\n")
    if not text.endswith("\n"):
        lines = lines[:-1]  # a line still being written
    for line in lines:
        line = line.strip()
        if line:
            rows.append(json.loads(line))
    return rows
