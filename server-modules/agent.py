"""The server agent: runs on an edge server (or in the virtual lab's server namespace).

Its operations start and stop the traffic servers (iperf3, cellab-send), capture packets (CaptureOps),
load, configure and unload the BPF congestion-control modules (ModuleOps), and cut its link to the UEs for a
fault (LinkOps).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from typing import Any


from cellab.bus import Agent, OperationFailed, operation
from cellab.server.capture import CaptureOps
from cellab.contracts import implements
from cellab.contracts.health import CheckItem, SelfCheckResult, clock_sync_check, fail, ok, program_check
from cellab.contracts.server import (
    SERVER_CONTRACT,
    Iperf3ServerParams,
    Iperf3ServerStarted,
    Iperf3ServerStopParams,
    Iperf3ServerStopped,
    ServerSelfCheckParams,
)
from cellab.errors import CellabError
from cellab.paths import find_program
from cellab.server import modules
from cellab.server.agent_ops import ModuleOps
from cellab.server.link_cut import LinkOps
from cellab.server.provenance import ServerProvenance
from cellab.labs.proc import ManagedProcess, argv_in

LISTEN_TIMEOUT_S = 5.0


@implements(SERVER_CONTRACT)
class ServerAgent(ServerProvenance, CaptureOps, ModuleOps, LinkOps, Agent):
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

    @operation
    def self_check(self, params: ServerSelfCheckParams) -> SelfCheckResult:
        """Read-only: the workload programs, the workload ports free in this agent's namespace, the modules
        the inventory names, the host clock."""
        items = [program_check("iperf3", None, "the iperf3 workload's server"),
                 program_check("tcpdump", None, "the server's capture"),
                 self._built_program_check("cellab-send", "the probe workload's sender")]
        items += self._port_checks(params.ports)
        items += [self._module_check(name) for name in params.modules]
        return SelfCheckResult(items=[*items, clock_sync_check()])

    @staticmethod
    def _built_program_check(name: str, why: str) -> CheckItem:
        try:
            return ok(name, str(find_program(name)))
        except CellabError:
            return fail(name, f"{why}: not built: run `make build` on this host")

    def _port_checks(self, ports: list[int]) -> list[CheckItem]:
        """A port another program listens on would refuse the run's iperf3 or cellab-send."""
        if not ports:
            return []
        ours = set(self._iperf3)
        try:
            taken = self._listening_ports() - ours
        except (OSError, subprocess.SubprocessError) as exc:
            return [fail("ports", f"cannot list this host's listeners (ss): {exc}")]
        where = f"in namespace {self.netns}" if self.netns else "on this host"
        busy = sorted(set(ports) & taken)
        if busy:
            return [fail("ports", f"TCP {', '.join(map(str, busy))} {where} already taken by another program: "
                                  "stop it (`ss -ltnp`) or the run's servers cannot listen")]
        return [ok("ports", f"TCP {min(ports)}-{max(ports)} free {where} (a host firewall must also let the UEs' "
                            "subnet in: docs/real-lab.md, Ports)")]

    def _listening_ports(self) -> set[int]:
        out = subprocess.run(argv_in(self.netns, ["ss", "-Hltn"]), capture_output=True, text=True, timeout=10,
                             check=True).stdout
        ports = set()
        for line in out.splitlines():
            fields = line.split()
            if len(fields) >= 4 and fields[3].rpartition(":")[2].isdigit():
                ports.add(int(fields[3].rpartition(":")[2]))
        return ports

    @staticmethod
    def _module_check(name: str) -> CheckItem:
        try:
            modules.preflight([name], "inventory modules")
            known = modules.describe()
        except CellabError as exc:
            return fail(f"module {name}", str(exc))
        if name not in known:
            return fail(f"module {name}", "the loader does not know it: run `make build` against this kernel")
        return ok(f"module {name}", f"{known[name].kind}, loadable (root, BTF, built)")

    def safe_state(self) -> None:
        try:
            self.restore_link()  # never a cut left behind
        except (OperationFailed, OSError, subprocess.SubprocessError):
            pass  # the interface is gone with its namespace: nothing to restore
        for port in list(self._iperf3):
            self._stop_iperf3(port)
        self.capture_safe_state()
        super().safe_state()  # the sender stops, modules this agent loaded are unloaded
