"""Packet capture as an agent operation: tcpdump on one of the agent's interfaces, headers only.

A mixin for agents (server, virtual UE): `capture_start` / `capture_stop`, typed parameters, an argv
list (never a shell string), the file in the agent's artifact directory under the caller's tag.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any


from cellab.contracts import Empty
from cellab.contracts.server import CaptureFile, CaptureParams
from cellab.bus import OperationFailed, operation
from cellab.labs.proc import ManagedProcess

START_WAIT_S = 3.0  # tcpdump prints "listening on" once the socket is open


class CaptureOps:
    """Needs from the agent: artifact_dir (Path) and netns (str | None)."""

    artifact_dir: Path
    netns: str | None

    def _capture_state(self) -> dict[str, Any]:
        return self.__dict__.setdefault("_capture", {"proc": None, "file": None})

    @operation
    def capture_start(self, params: CaptureParams) -> CaptureFile:
        state = self._capture_state()
        if state["proc"] is not None:
            raise OperationFailed("a capture is already running: capture_stop first")
        if shutil.which("tcpdump") is None:
            raise OperationFailed("tcpdump is not installed on this host")
        path = self.artifact_dir / f"{params.tag}.pcap"
        argv = ["tcpdump", "-i", params.interface, "-s", str(params.snaplen_bytes), "-U", "-n", "-w", str(path)]
        if params.tcp_port is not None and params.tcp_port_last not in (None, params.tcp_port):
            low, high = sorted((params.tcp_port, params.tcp_port_last))
            argv += ["tcp", "portrange", f"{low}-{high}"]
        elif params.tcp_port is not None:
            argv += ["tcp", "port", str(params.tcp_port)]
        log = self.artifact_dir / f"{params.tag}.tcpdump.log"
        proc = ManagedProcess(argv, log, getattr(self, "netns", None))
        deadline = time.monotonic() + START_WAIT_S
        while "listening on" not in log.read_text(errors="replace"):
            if not proc.running() or time.monotonic() > deadline:
                proc.stop()
                raise OperationFailed(f"tcpdump did not start: {log.read_text(errors='replace')[-300:].strip()}")
            time.sleep(0.02)
        state.update(proc=proc, file=path.name)
        return CaptureFile(file=path.name)

    @operation
    def capture_stop(self, params: Empty) -> CaptureFile:
        state = self._capture_state()
        proc: ManagedProcess | None = state["proc"]
        if proc is None:
            raise OperationFailed("no capture is running")
        state["proc"] = None
        proc.stop()  # SIGTERM: tcpdump flushes and closes the file
        return CaptureFile(file=state["file"])

    def capture_safe_state(self) -> None:
        proc = self._capture_state()["proc"]
        if proc is not None:
            proc.stop()
            self._capture_state()["proc"] = None
