"""Lab inventory: what exists in a real lab and where (labgrid's *resources*), separate from drivers.

A campaign names an inventory file as its `lab`. The controller binds where the inventory says;
every agent is listed with its role and public key (the controller's CURVE allowlist).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from cellab.bus.keys import check_key_file
from cellab.contracts.attenuator import AttenuatorConfig
from cellab.errors import InputError, InputErrors, from_validation_error
from cellab.inputs import read_text, read_yaml

ROLES = ("server", "ue", "enb", "core", "attenuator")
NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ControllerEntry(Strict):
    bind: str = Field("tcp://0.0.0.0:7700", description="ROUTER endpoint the controller binds")
    telemetry_bind: str = Field("tcp://0.0.0.0:7701", description="SUB endpoint for agent telemetry")
    secret_key: Path = Field(description="controller's CURVE secret key file (cellab keys)")


class HostEntry(Strict):
    name: str = Field(pattern=NAME)
    address: str


class AgentEntry(Strict):
    name: str = Field(pattern=NAME)
    role: Literal[ROLES]  # type: ignore[valid-type]
    host: str
    public_key: Path = Field(description="the agent's CURVE public key file")


class EnbEntry(Strict):
    name: str = Field(pattern=NAME)
    kind: Literal["srsran"] = "srsran"
    rf: Literal["uhd", "zmq"] = "uhd"
    device_args: str = ""
    agent: str
    profile: Path | None = Field(None, description="the eNB profile (cellab ran), relative to the inventory; "
                                                    "the eNB agent renders srsENB's files from it for every run")


class CoreEntry(Strict):
    name: str = Field(pattern=NAME)
    flavour: Literal["open5gs", "open5gs-2.6", "nextepc", "srsepc"]
    version: str = ""
    agent: str
    profile: Path | None = Field(None, description="the core profile (cellab core), relative to the inventory")
    subscribers: Path | None = Field(None, description="srsepc: the subscribers file (CSV or YAML) for user_db.csv")


class AttenuatorEntry(AttenuatorConfig):
    """The attenuator room's own device model (limits, step, slew, safe value) plus the agent that drives it."""

    model_config = ConfigDict(extra="forbid")
    agent: str


class AttenuatorChannel(Strict):
    attenuator: str
    channel: int = Field(ge=1, le=64)


class UeEntry(Strict):
    name: str = Field(pattern=NAME)
    kind: Literal["android", "virtual"]
    serial: str = Field("", description="adb serial of an Android phone")
    agent: str
    attenuator: AttenuatorChannel | None = None


class ServerEntry(Strict):
    name: str = Field(pattern=NAME)
    agent: str
    address: str = Field(description="address the UEs reach the server at")
    modules: list[str] = []


class Devices(Strict):
    enb: list[EnbEntry] = []
    core: list[CoreEntry] = []
    attenuators: list[AttenuatorEntry] = []
    ues: list[UeEntry] = []
    servers: list[ServerEntry] = []


class Inventory(Strict):
    name: str = Field(pattern=NAME)
    controller: ControllerEntry
    hosts: list[HostEntry] = []
    agents: list[AgentEntry] = []
    devices: Devices = Devices()

    @model_validator(mode="after")
    def _unique_and_not_empty(self) -> Inventory:
        """Names are references: one name, one entry. An inventory without agents or devices runs nothing."""
        groups = {"hosts": self.hosts, "agents": self.agents, "devices.enb": self.devices.enb,
                  "devices.core": self.devices.core, "devices.attenuators": self.devices.attenuators,
                  "devices.ues": self.devices.ues, "devices.servers": self.devices.servers}
        for group, entries in groups.items():
            names = [e.name for e in entries]
            repeated = sorted({n for n in names if names.count(n) > 1})
            if repeated:
                raise ValueError(f"{group}: name {repeated[0]!r} appears more than once (names must be unique)")
        if not self.agents or not any(groups[g] for g in groups if g.startswith("devices.")):
            raise ValueError("an inventory needs agents and devices (at least a server and a UE)")
        return self

    @model_validator(mode="after")
    def _references(self) -> Inventory:
        hosts = {h.name for h in self.hosts}
        agents = {a.name for a in self.agents}
        for a in self.agents:
            if a.host not in hosts:
                raise ValueError(f"agent {a.name}: host {a.host!r} is not in hosts ({', '.join(sorted(hosts))})")
        attenuators = {a.name: a for a in self.devices.attenuators}
        roles = {a.name: a.role for a in self.agents}
        for entry in self.devices.attenuators:
            # srsENB's cell_gain is set by the eNB agent itself; every other attenuator has an agent of its own
            wanted = "enb" if entry.model == "srsenb-cell-gain" else "attenuator"
            if entry.agent in roles and roles[entry.agent] != wanted:
                raise ValueError(f"attenuator {entry.name}: agent {entry.agent!r} has role {roles[entry.agent]!r}, "
                                 f"not {wanted!r}")
        groups = (self.devices.enb, self.devices.core, self.devices.attenuators, self.devices.ues,
                  self.devices.servers)
        for entry in (e for group in groups for e in group):
            if entry.agent not in agents:
                raise ValueError(f"device {entry.name}: agent {entry.agent!r} is not in agents ({', '.join(sorted(agents))})")
        for ue in self.devices.ues:
            if ue.attenuator and ue.attenuator.attenuator not in attenuators:
                raise ValueError(f"ue {ue.name}: attenuator {ue.attenuator.attenuator!r} is not in devices.attenuators")
            if ue.attenuator and ue.attenuator.channel > attenuators[ue.attenuator.attenuator].channels:
                raise ValueError(f"ue {ue.name}: channel {ue.attenuator.channel} exceeds the attenuator's channels")
        return self

    def agent(self, role: str) -> AgentEntry | None:
        return next((a for a in self.agents if a.role == role), None)

    def ue_attenuator(self, index: int) -> tuple[AttenuatorEntry, int] | None:
        """The attenuator and channel in front of the index-th UE, when the inventory names one."""
        if index >= len(self.devices.ues) or self.devices.ues[index].attenuator is None:
            return None
        wired = self.devices.ues[index].attenuator
        entry = next(a for a in self.devices.attenuators if a.name == wired.attenuator)
        return entry, wired.channel


def load_inventory(path: str | Path) -> Inventory:
    path = Path(path)
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise InputError(path, "", "a lab inventory is a YAML mapping (name, controller, hosts, agents, devices)")
    try:
        inventory = Inventory.model_validate(data)  # not **data: a YAML key may be no string
    except ValidationError as exc:
        raise from_validation_error(path, exc) from exc
    # Key files are relative to the inventory file.
    base = path.parent
    inventory.controller.secret_key = base / inventory.controller.secret_key
    for agent in inventory.agents:
        agent.public_key = base / agent.public_key
    check_key_file(inventory.controller.secret_key, path, "controller.secret_key", secret=True)
    for a in inventory.agents:
        check_key_file(a.public_key, path, f"agents.{a.name}.public_key", secret=False)
    for group, entries in (("enb", inventory.devices.enb), ("core", inventory.devices.core)):
        for i, entry in enumerate(entries):
            for field in ("profile", "subscribers"):
                value = getattr(entry, field, None)
                if value is not None:
                    setattr(entry, field, base / value)
                    read_text(base / value, PROFILE_MAX_BYTES, field=f"devices.{group}[{i}].{field}")
    return inventory


PROFILE_MAX_BYTES = 1 << 20


def check_consistency(inventory: Inventory, source: str | Path) -> None:
    """The cross-room rules a run would otherwise meet on the lab's hosts: every eNB agrees with every core
    on PLMN, TAC and MME address (read from their profiles by the RAN and core rooms), or no UE attaches."""
    from cellab.contracts.identity import identity_mismatches, load_identity

    errors: list[InputError] = []
    for i, enb in enumerate(inventory.devices.enb):
        for j, core in enumerate(inventory.devices.core):
            if enb.profile is None or core.profile is None:
                continue
            problems = identity_mismatches(load_identity("enb", enb.profile), load_identity("core", core.profile))
            errors += [InputError(source, f"devices.enb[{i}].profile / devices.core[{j}].profile", p)
                       for p in problems]
    if errors:
        raise InputErrors(errors)
