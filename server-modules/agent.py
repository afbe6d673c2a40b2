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
from cellab.contracts import Empty, implements
from cellab.contracts.server import SERVER_CONTRACT, Iperf3ServerParams, Iperf3ServerStarted, Iperf3ServerStopped
from cellab.server.agent_ops import ModuleOps
from cellab.proc import ManagedProcess, argv_in

LISTEN_TIMEOUT_S = 5.0


@implements(SERVER_CONTRACT)
class ServerAgent(CaptureOps, ModuleOps, Agent):
    role = "server"

    def __init__(self, *args: Any, netns: str | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.netns = netns
        self._iperf3: ManagedProcess | None = None

    @operation
    def iperf3_server_start(self, params: Iperf3ServerParams) -> Iperf3ServerStarted:
        if shutil.which("iperf3") is None:
            raise OperationFailed("iperf3 is not installed on this host")
        self._stop_iperf3()
        log = self.artifact_dir / f"{params.tag}.log"
        # -1: serve one test and exit, so a stale server never answers the next run.
        self._iperf3 = ManagedProcess(["iperf3", "-s", "-1", "-J", "-p", str(params.port)], log, self.netns)
        deadline = time.monotonic() + LISTEN_TIMEOUT_S
        while not self._listening(params.port):
            if not self._iperf3.running() or time.monotonic() > deadline:
                self._stop_iperf3()
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
    def iperf3_server_stop(self, params: Empty) -> Iperf3ServerStopped:
        return Iperf3ServerStopped(returncode=self._stop_iperf3())

    def _stop_iperf3(self) -> int | None:
        if self._iperf3 is None:
            return None
        code = self._iperf3.stop()
        self._iperf3 = None
        return code

    def safe_state(self) -> None:
        self._stop_iperf3()
        self.capture_safe_state()
        super().safe_state()  # the sender stops, modules this agent loaded are unloaded
