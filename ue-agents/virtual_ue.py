"""The virtual UE agent: runs workloads (iperf3 with ping, cellab-probe) inside a UE namespace of an embedded lab."""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any


from cellab.bus import Agent, OperationFailed, operation
from cellab.contracts import implements
from cellab.contracts.health import CheckItem, SelfCheckResult, clock_sync_check, fail, ok, program_check
from cellab.contracts.ue import (
    NO_RADIO_FIELD,
    UE_CONTRACT,
    Iperf3ClientParams,
    Iperf3ClientResult,
    RadioParams,
    RadioResult,
    SignalReading,
)
from cellab.errors import CellabError
from cellab.paths import find_program
from cellab.labs.feed import FileFeed, ping_sample
from cellab.labs.proc import ManagedProcess
from cellab.ue.probe_ops import ProbeOps
from cellab.ue.ue_provenance import VirtualUEProvenance


@implements(UE_CONTRACT)
class VirtualUEAgent(VirtualUEProvenance, ProbeOps, Agent):
    """Role "ue" without a phone. In the virtual lab its radio is the emulated cell (`cell_ctl`, its UE
    index `cell_ue`), which is where `signal` reads RSRP, as a phone's modem would report it."""

    role = "ue"

    def __init__(self, *args: Any, netns: str | None = None, cell_ctl: str | None = None, cell_ue: int = 0,
                 **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.netns = netns
        self.cell_ctl, self.cell_ue = cell_ctl, cell_ue
        self._children: list[ManagedProcess] = []
        if cell_ctl is not None:  # its UE's state in every heartbeat: out of coverage or paused for minutes is not gone
            threading.Thread(target=self._watch_ue, name=f"ue-state-{self.name}", daemon=True).start()

    def _watch_ue(self) -> None:
        """Every heartbeat, this UE's state as its radio (the cell) has it: `paused` when the cell holds its host's
        packets (ue_pause), `out` when its RRC connection is gone (a radio link failure), else `in`. The agent's own
        thread, never frozen with the UE's processes."""
        from cellab.labs.cellctl import CellControl, CellControlError

        while not self._stop.wait(self.heartbeat_s):
            try:
                with CellControl(self.cell_ctl, timeout_ms=int(self.heartbeat_s * 1000)) as cell:
                    ue = cell.ue_stats(self.cell_ue)
            except CellControlError:
                continue  # the cell restarts with every run's parameters: nothing to say until it answers
            state = ("paused" if ue.get("host_up") is False else
                     "in" if ue.get("rrc_state", "connected") == "connected" else "out")
            self.set_ue_state(state, f"cell UE {self.cell_ue}: rrc {ue.get('rrc_state', 'connected')}")

    @operation(concurrent=True)
    def signal(self) -> SignalReading:
        """RSRP (and SINR, CQI) of this UE now: the calibration sweep reads it at each attenuation."""
        if self.cell_ctl is None:
            raise OperationFailed("this UE has no radio to read: a virtual UE reports signal only in the virtual lab",
                                  field=NO_RADIO_FIELD)
        from cellab.labs.cellctl import CellControl, CellControlError

        taken_s = self._clock()  # the agent's clock as the read begins: a run's start waits for one after its set
        try:
            with CellControl(self.cell_ctl) as cell:
                ue = cell.ue_stats(self.cell_ue)
        except CellControlError as exc:
            raise OperationFailed(str(exc)) from None
        return SignalReading(rsrp_dbm=ue["rsrp_dbm"], sinr_db=ue.get("sinr_db"), cqi=ue.get("cqi"),
                             source="emulated cell", t_s=taken_s)

    @operation(concurrent=True)
    def set_radio(self, params: RadioParams) -> RadioResult:
        """Off: the cell holds this UE's host (what its modem receives is dropped, what it sends lost: the cell's
        `set_ue_host`), as long as the fault lasts, the agent answering meanwhile; on: it passes again."""
        if self.cell_ctl is None:
            raise OperationFailed("this UE has no radio to switch: a virtual UE has one only on a cell (--cell-ctl)")
        from cellab.labs.cellctl import CellControl, CellControlError

        try:
            with CellControl(self.cell_ctl) as cell:
                cell.request("set_ue_host", ue=self.cell_ue, up=params.on)
        except CellControlError as exc:
            raise OperationFailed(str(exc)) from None
        return RadioResult(on=params.on, how=f"cell UE {self.cell_ue}: host {'passed' if params.on else 'held'}")

    @operation
    def self_check(self) -> SelfCheckResult:
        """Read-only: the workload programs, this UE's namespace, the host clock."""
        items = [program_check("iperf3", None, "the iperf3 workload's client"), self._probe_check()]
        if self.netns is not None:
            present = Path("/run/netns", self.netns).exists()
            items.append(ok("namespace", self.netns) if present else
                         fail("namespace", f"{self.netns} does not exist: its lab is down (`cellab vlab status`)"))
        return SelfCheckResult(items=[*items, clock_sync_check()])

    @staticmethod
    def _probe_check() -> CheckItem:
        try:
            return ok("probe", str(find_program("cellab-probe")))
        except CellabError:
            return fail("probe", "cellab-probe is not built on this host: run `make build`")

    @operation
    def iperf3_client(self, params: Iperf3ClientParams) -> Iperf3ClientResult:
        """One transfer with a concurrent ping; artifacts: <tag>-iperf3.json, <tag>-ping.txt."""
        if shutil.which("iperf3") is None:
            raise OperationFailed("iperf3 is not installed on this host")
        iperf_path = self.artifact_dir / f"{params.tag}-iperf3.json"
        ping_path = self.artifact_dir / f"{params.tag}-ping.txt"
        argv = ["iperf3", "-c", params.server, "-p", str(params.port), "-t", f"{params.duration_s:g}",
                "-P", str(params.flows), "-C", params.cc, "-J", "--get-server-output", "--connect-timeout", "3000"]
        if params.direction == "download":
            argv.append("-R")
        pinger = None
        if params.ping_interval_ms is not None:
            pinger = ManagedProcess(
                ["ping", "-D", "-n", "-i", f"{params.ping_interval_ms / 1000:g}", "-w", f"{params.duration_s:g}",
                 params.server], ping_path, self.netns)
            self._children.append(pinger)
        client = ManagedProcess(argv, iperf_path, self.netns)
        self._children.append(client)
        started = time.monotonic()
        feed = FileFeed(lambda: [ping_path], ping_sample, self.publish, "ping").start() if pinger else None  # RTT live
        try:
            code = client.wait(params.duration_s + 15)
        except subprocess.TimeoutExpired:
            client.stop()
            raise OperationFailed(f"iperf3 did not finish within {params.duration_s + 15:g} s") from None
        finally:
            if pinger is not None:
                pinger.stop(grace_s=5)
                feed.stop()
            self._children.clear()
        if code != 0:
            tail = iperf_path.read_text(errors="replace")[-400:]
            raise OperationFailed(f"iperf3 exited with {code}: {tail.strip()}")
        artifacts = [iperf_path.name] + ([ping_path.name] if pinger else [])
        return Iperf3ClientResult(artifacts=artifacts, elapsed_s=time.monotonic() - started)

    def safe_state(self) -> None:
        for child in self._children:
            child.stop(grace_s=1)
        self._children.clear()
        super().safe_state()  # running probes stop and write their partial summaries
