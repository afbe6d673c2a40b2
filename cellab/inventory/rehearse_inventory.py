"""The rehearsal lab's inventory: the same file a hardware lab has (docs/real-lab.md), for one host — every
agent on 127.0.0.1, the server in the cell's server namespace, phones by serial behind the fake adb server,
virtual UEs on the cell, one emulated box with a channel per UE (phones first)."""

from __future__ import annotations

from dataclasses import dataclass

from cellab.errors import InputError

MIN_DB, MAX_DB = 0.0, 60.0  # the lab's ceiling: a box's own maximum (95 dB) would lose the cell between runs


@dataclass
class Box:
    """An attenuator family as the rehearsal emulates it: the inventory's model and transport, the room's
    emulator (`cellab atten emulate EMULATOR`), its step; `address` once it runs."""
    family: str
    model: str
    transport: str
    emulator: str
    step_db: float
    address: str = ""


def box_for(family: str, channels: int) -> Box:
    """The box of `family` with `channels` channels (minicircuits, jfw, adaura: emulated and bridged to the
    cell; virtual: the cell's own control socket)."""
    boxes = {
        "minicircuits": Box("minicircuits", "minicircuits-rcdat" if channels == 1 else "minicircuits-rc4dat",
                            "serial", "minicircuits", 0.25),
        "jfw": Box("jfw", "jfw-50pa", "telnet", "jfw", 1.0),
        "adaura": Box("adaura", "adaura", "http", "adaura", 0.25),
        "virtual": Box("virtual", "virtual", "zmq", "", 0.25),
    }
    if family not in boxes:  # keysight's emulated banks are relay pairs with no per-channel value for the cell
        raise InputError("cellab rehearse up", "--atten-family", f"unknown or not rehearsable {family!r}",
                         list(boxes))
    return boxes[family]


@dataclass
class Layout:
    """Names and endpoints: agents server1, phone1.., ue1.., atten1; the controller on port, telemetry port+1."""
    name: str
    phones: int
    virtual_ues: int
    server: tuple[str, str]  # (namespace, address)
    port: int
    adb_port: int = 0
    radio: str = "virtual"
    server_agent: str = "server1"
    atten_agent: str = "atten1"
    enb_agent: str = "enb1"  # srsran-zmq's: srsenb and the EPC through their agents
    core_agent: str = "core1"

    @property
    def total(self) -> int:
        return self.phones + self.virtual_ues

    @property
    def bus(self) -> str:
        return f"tcp://127.0.0.1:{self.port}"

    @property
    def telemetry(self) -> str:
        return f"tcp://127.0.0.1:{self.port + 1}"

    def phone_agent(self, i: int) -> str:
        return f"phone{i + 1}"

    def vue_agent(self, j: int) -> str:
        return f"ue{j + 1}"

    def agent_names(self) -> list[str]:
        radio = [self.enb_agent, self.core_agent] if self.radio == "srsran-zmq" else []
        return [self.server_agent, self.atten_agent, *radio, *map(self.phone_agent, range(self.phones)),
                *map(self.vue_agent, range(self.virtual_ues))]


def inventory_of(layout: Layout, box: Box, serials: list[str]) -> dict:
    roles = {layout.server_agent: "server", layout.atten_agent: "attenuator", layout.enb_agent: "enb",
             layout.core_agent: "core"}
    roles |= {name: "ue" for name in layout.agent_names() if name not in roles}
    ues = [{"name": layout.phone_agent(i), "kind": "android", "agent": layout.phone_agent(i), "serial": serial,
            "attenuator": {"attenuator": "box1", "channel": i + 1}} for i, serial in enumerate(serials)]
    ues += [{"name": layout.vue_agent(j), "kind": "virtual", "agent": layout.vue_agent(j),
             "attenuator": {"attenuator": "box1", "channel": layout.phones + j + 1}}
            for j in range(layout.virtual_ues)]
    return {
        "name": f"rehearse-{layout.name}",
        "controller": {"bind": layout.bus, "telemetry_bind": layout.telemetry,
                       "secret_key": "keys/controller.key_secret"},
        "hosts": [{"name": "here", "address": "127.0.0.1"}],
        "agents": [{"name": n, "role": roles[n], "host": "here", "public_key": f"keys/{n}.key"}
                   for n in layout.agent_names()],
        "devices": {
            "attenuators": [{"name": "box1", "model": box.model, "transport": box.transport, "address": box.address,
                             "channels": layout.total, "min_db": MIN_DB, "max_db": MAX_DB, "step_db": box.step_db,
                             "agent": layout.atten_agent}],
            "ues": ues,
            "servers": [{"name": "edge", "agent": layout.server_agent, "address": layout.server[1]}],
        },
    }
