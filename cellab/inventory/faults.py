"""Faults on a lab inventory (issue 41), each through the agent of the device it acts on, with typed operations only:

| kind | device | how |
|---|---|---|
| `radio_outage` | the UE's attenuator channel | the attenuator agent (the runner's, as on every lab): the channel at max_db |
| `enb_restart` | the eNB | the eNB agent: `safe_state` (srsenb stopped), then `configure` with the run's profile (started) |
| `core_daemon` | the core | the core agent: `kill` (SIGKILL, a crash), then `start` of that daemon |
| `ue_pause` | a UE | its UE agent's `set_radio`: a phone's airplane mode through adb; a virtual UE's host held by its cell |
| `sgi_cut` | the server | the server agent's `set_link`: nothing it sends from the address the UEs reach it at leaves |

A fault the inventory has no device for is refused at `validate`, naming what it lacks (`refusal`). What the run
saw comes from the agents' own telemetry (`agent_events`), not from the plan."""

from __future__ import annotations

from typing import Any

from cellab.inventory.lab_attenuator import inventory_attenuator
from cellab.inventory.model import Inventory

#: the core_daemon faults each flavour's core agent can kill (srsepc: the whole EPC, the agent's daemon `epc`)
FLAVOUR_DAEMONS = {"srsepc": ("srsepc",), "open5gs": ("mme", "sgwc", "sgwu", "smf", "upf", "hss", "pcrf"),
                   "open5gs-2.6": ("mme", "sgwc", "sgwu", "smf", "upf", "hss", "pcrf"),
                   "nextepc": ("mme", "sgw", "hss", "pcrf")}
NOT_ON_INVENTORIES = {
    "s1_cut": "the S1 path between eNB and core is no device an inventory names (a switch or cable, not an agent)",
}


def fault_kinds(inventory: Inventory) -> frozenset[str]:
    """The fault kinds the inventory has a device for (on at least one UE, for the UE's own faults)."""
    devices = inventory.devices
    kinds = {"ue_pause"} if devices.ues else set()
    if inventory_attenuator(inventory) is not None:
        kinds.add("radio_outage")
    if devices.enb:
        kinds.add("enb_restart")
    if devices.core:
        kinds.add("core_daemon")
    if devices.servers:
        kinds.add("sgi_cut")
    return frozenset(kinds)


def refusal(inventory: Inventory, fault: Any) -> tuple[str, str] | None:
    """(field of the fault, why) when the inventory cannot inject `fault` (kind, ue, daemon), naming the device it
    lacks; None when it can."""
    devices = inventory.devices
    if fault.kind in NOT_ON_INVENTORIES:
        return "kind", NOT_ON_INVENTORIES[fault.kind]
    if fault.kind == "enb_restart" and not devices.enb:
        return "kind", "the inventory names no eNB (devices.enb): the eNB agent restarts srsenb"
    if fault.kind == "core_daemon":
        if not devices.core:
            return "kind", "the inventory names no core (devices.core): the core agent kills and restarts its daemons"
        core = devices.core[0]
        allowed = FLAVOUR_DAEMONS[core.flavour]
        if fault.daemon not in allowed:
            return "daemon", (f"core {core.name} is {core.flavour}: its agent kills {', '.join(allowed)}, not "
                              f"{fault.daemon}")
    if fault.kind == "sgi_cut":
        server = devices.servers[0]
        agent = next(a for a in inventory.agents if a.name == server.agent)
        host = next(h for h in inventory.hosts if h.name == agent.host)
        if host.address == server.address:
            return "kind", (f"devices.servers[0] ({server.name}) is reached by the UEs at {server.address}, the "
                            f"address the bus reaches its agent {agent.name} at: the cut would cut the agent too "
                            "(give the UEs' side its own address, hosts[].addresses)")
    if fault.kind in ("radio_outage", "ue_pause"):
        if fault.ue >= len(devices.ues):
            return "ue", f"the inventory has {len(devices.ues)} UE(s) (devices.ues), no UE {fault.ue}"
        ue = devices.ues[fault.ue]
        if fault.kind == "radio_outage" and ue.attenuator is None:
            return "ue", (f"devices.ues[{fault.ue}] ({ue.name}) has no attenuator channel in front of it "
                          "(devices.ues[].attenuator)")
    return None
