"""An inventory lab's faults inside a run (issue 41): each started and ended through the agent of its device, with
the typed operations of its role's contract (cellab.inventory.faults has the table and what validate refuses), and
the lab's state after the run from the agents themselves: srsenb's, the core's and what each UE's agent says of its
UE in its heartbeats."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cellab.contracts.core import CoreClient, StartParams, agent_daemon
from cellab.contracts.enb import EnbClient, RadioOverrides
from cellab.contracts.server import ServerClient
from cellab.contracts.ue import UEClient
from cellab.errors import CellabError
from cellab.inventory.faults import fault_kinds

if TYPE_CHECKING:
    from cellab.bus import Controller
    from cellab.contracts.enb import ConfigureParams as EnbConfigureParams
    from cellab.inventory.model import Inventory


class InventoryFaults:
    """Mixed into InventoryLab."""

    inventory: Inventory
    controller: Controller
    request_s: float
    enb: EnbClient | None
    core: CoreClient | None
    overrides: RadioOverrides

    _enb_params: Callable[[RadioOverrides], EnbConfigureParams]  # lab.py

    @property
    def fault_kinds(self) -> frozenset[str]:
        return fault_kinds(self.inventory)

    def inject_fault(self, step: Any) -> dict[str, Any]:
        """Start (`step.active`) or end one fault (a cellab.faults.spec.FaultStep; `step.ue`: the inventory's UE).
        enb_restart: srsenb stopped (`safe_state`: no transmission), then started with the run's profile and radio
        parameters (`configure`; the UEs' return is measured, not waited for). core_daemon: SIGKILLed (`kill`),
        then `start`ed. ue_pause: the UE agent's `set_radio` off, then on. sgi_cut: the server agent's `set_link` at the
        address the UEs reach it at, cut then restored."""
        kind, active = step.kind, bool(step.active)
        if kind == "enb_restart" and self.enb is not None:
            if active:
                return {"enb": "stopped", **self.enb.safe_state().model_dump()}
            done = self.enb.configure(self._enb_params(self.overrides))
            return {"enb": done.state, "restarted": done.restarted, "pid": done.pid}
        if kind == "core_daemon" and self.core is not None:
            daemon = agent_daemon(step.daemon)
            if active:
                return self.core.kill(daemon).model_dump()
            status = self.core.start(StartParams(daemons=[daemon]))
            if not status.ok:
                raise CellabError(f"core agent {self.core.agent}: {daemon} did not come back: "
                                  + "; ".join(status.problems or ["not running"]))
            return {"daemon": daemon, "ok": status.ok}
        if kind == "sgi_cut" and self.inventory.devices.servers:
            server = self.inventory.devices.servers[0]
            return ServerClient(self.controller, server.agent, self.request_s).set_link(
                server.address, up=not active).model_dump()
        if kind == "ue_pause" and step.ue < len(self.inventory.devices.ues):
            ue = self.inventory.devices.ues[step.ue]
            return UEClient(self.controller, ue.agent, self.request_s).set_radio(on=not active).model_dump()
        raise CellabError(f"lab inventory {self.inventory.name} injects no {kind} fault through inject_fault "
                          f"(radio_outage: the attenuator agent; its own: {', '.join(sorted(self.fault_kinds))})")

    def fault_state(self) -> dict[str, Any]:
        """After a faulted run: srsenb up (`enb_up`), each UE's state as its agent says it in its heartbeats
        (`rrc_state`: connected when in, else out or paused), the core's problems (`core_problems`)."""
        state: dict[str, Any] = {}
        if self.enb is not None:
            state["enb_up"] = self.enb.status().state == "running"
        if self.core is not None:
            status = self.core.status()
            state["core_problems"] = [] if status.ok else status.problems or ["a daemon stopped"]
        agents = self.controller.agents()
        said = {str(i): agents[ue.agent].ue_state for i, ue in enumerate(self.inventory.devices.ues)
                if ue.agent in agents and agents[ue.agent].ue_state is not None}
        state["rrc_state"] = {i: "connected" if s == "in" else s for i, s in said.items()}
        return state
