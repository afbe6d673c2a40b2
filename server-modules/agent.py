"""The server agent: runs on an edge server (or in the virtual lab's server namespace).

Its operations start and stop the traffic servers (iperf3, cellab-send), capture packets (CaptureOps),
and load, configure and unload the BPF congestion-control modules (ModuleOps).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from typing import Any


from cellab.bus import Agent, OperationFailed, operation
from cellab.capture import CaptureOps
from cellab.contracts import implements
from cellab.contracts.server import (
    SERVER_CONTRACT,
    Iperf3ServerParams,
    Iperf3ServerStarted,
    Iperf3ServerStopParams,
    Iperf3ServerStopped,
)
from cellab.server.agent_ops import ModuleOps
from cellab.proc import ManagedProcess, argv_in

LISTEN_TIMEOUT_S = 5.0


@implements(SERVER_CONTRACT)
class ServerAgent(CaptureOps, ModuleOps, Agent):
    role = "server"

    def __init__(self, *args: Any, netns: str | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.netns = netns
        self._iperf3: dict[int, ManagedProcess] = {}  # port -> one-shot server (one per UE of a run)

    @operation
    def iperf3_server_start(self, params: Iperf3ServerParams) -> Iperf3ServerStarted:
        if shutil.which("iperf3") is None:
            raise OperationFailed("iperf3 is not installed on this host")
        self._stop_iperf3(params.port)
        log = self.artifact_dir / f"{params.tag}.log"
        # -1: serve one test and exit, so a stale server never answers the next run.
        server = ManagedProcess(["iperf3", "-s", "-1", "-J", "-p", str(params.port)], log, self.netns)
        self._iperf3[params.port] = server
        deadline = time.monotonic() + LISTEN_TIMEOUT_S
        while not self._listening(params.port):
            if not server.running() or time.monotonic() > deadline:
                self._stop_iperf3(params.port)
                raise OperationFailed(f"iperf3 server did not start listening on port {params.port}: "
                                      f"{log.read_text(errors='replace')[-300:].strip()}")
            time.sleep(0.05)
        return Iperf3ServerStarted(port=params.port, log=log.name)

    def _listening(self, port: int) -> bool:
        # Asking `ss` instead of connecting: a probe connection would use up the one-shot server.
        out = subprocess.run(argv_in(self.netns, ["ss", "-Hltn", f"sport = :{port}"]),
                             capture_output=True, text=True, check=False).stdout
        return bool(out.strip())

    @operation
    def iperf3_server_stop(self, params: Iperf3ServerStopParams) -> Iperf3ServerStopped:
        code = None
        for port in [params.port] if params.port is not None else sorted(self._iperf3):
            code = self._stop_iperf3(port)
        return Iperf3ServerStopped(returncode=code)

    def _stop_iperf3(self, port: int) -> int | None:
        server = self._iperf3.pop(port, None)
        return server.stop() if server is not None else None

    def safe_state(self) -> None:
        for port in list(self._iperf3):
            self._stop_iperf3(port)
        self.capture_safe_state()
        super().safe_state()  # the sender stops, modules this agent loaded are unloaded
