"""Lab inventory: what exists in a real lab and where (labgrid's *resources*), separate from drivers.

A campaign names an inventory file as its `lab`. The controller binds where the inventory says;
every agent is listed with its role and public key (the controller's CURVE allowlist).
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from cellab import keyindex
from cellab.bus.keys import check_key_file
from cellab.contracts.attenuator import AttenuatorConfig
from cellab.errors import CellabError, InputError, InputErrors, from_validation_error
from cellab.contracts.server import ModuleName
from cellab.inputs import Name, Serial, read_text, read_yaml
from cellab.inventory import coherence
from cellab.pathnames import check_text_tree

ROLES = ("server", "ue", "enb", "core", "attenuator")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ControllerEntry(Strict):
    bind: str = Field("tcp://0.0.0.0:7700", description="ROUTER endpoint the controller binds; agents dial it "
                                                        "(`cellab agent --controller tcp://CONTROLLER:7700`)")
    telemetry_bind: str = Field("tcp://0.0.0.0:7701", description="SUB endpoint for agent telemetry; agents derive "
                                                                  "it as the controller's port + 1 unless told")
    secret_key: Path = Field(description="controller's CURVE secret key file (cellab keys)")


class HostEntry(Strict):
    name: Name = Field(description="the name agents refer to (agents[].host)")
    address: str = Field(description="the host's address on the lab network (an IP, or a name cellab does not "
                                     "resolve); a loopback address means a one-host lab")
    addresses: list[str] = Field([], description="the host's other addresses that devices name (a second "
                                                 "interface, a namespace's address), so a server address there fits")


class AgentEntry(Strict):
    name: Name = Field(description="the agent's routing identity (`cellab agent --name`)")
    role: Literal[ROLES]  # type: ignore[valid-type]
    host: str = Field(description="the host it runs on (hosts[].name)")
    public_key: Path = Field(description="the agent's CURVE public key file")


class EnbEntry(Strict):
    name: Name
    kind: Literal["srsran"] = "srsran"
    rf: Literal["uhd", "zmq"] = Field("uhd", description="uhd: a USRP; zmq: srsRAN's ZMQ radio (no hardware)")
    device_args: str = Field("", description="UHD device arguments (the profile's rf.device usually says it all)")
    agent: str = Field(description="the enb agent that runs srsenb (agents[].name)")
    profile: Path | None = Field(None, description="the eNB profile (cellab ran), relative to the inventory; "
                                                    "the eNB agent renders srsENB's files from it for every run")


class CoreEntry(Strict):
    name: Name
    flavour: Literal["open5gs", "open5gs-2.6", "nextepc", "srsepc"]
    version: str = Field("", description="the installed version, for the records")
    agent: str = Field(description="the core agent that runs the daemons (agents[].name)")
    profile: Path | None = Field(None, description="the core profile (cellab core), relative to the inventory")
    subscribers: Path | None = Field(None, description="srsepc: the subscribers file (CSV or YAML) for user_db.csv")


class AttenuatorEntry(AttenuatorConfig):
    """The attenuator room's own device model (limits, step, slew, safe value) plus the agent that drives it."""

    model_config = ConfigDict(extra="forbid")
    agent: str = Field(description="the attenuator agent that drives it (srsenb-cell-gain: the enb agent)")


class AttenuatorChannel(Strict):
    attenuator: str = Field(description="devices.attenuators[].name")
    channel: int = Field(ge=1, le=64, description="the box's channel wired to this UE's antenna port")


class UeEntry(Strict):
    name: Name
    kind: Literal["android", "virtual"]
    serial: Serial = Field("", description="adb serial of an Android phone")
    model: str = Field("", pattern=r"^[A-Za-z0-9 ._+()-]{0,64}$",
                       description="the phone's model (ro.product.model, as `cellab ue phones` lists it): checked "
                                   "against the phone before the first run and after each")
    agent: str = Field(description="the ue agent that drives it (agents[].name)")
    attenuator: AttenuatorChannel | None = Field(None, description="the attenuator channel in front of this UE")


class ServerEntry(Strict):
    name: Name
    agent: str = Field(description="the server agent (agents[].name)")
    address: str = Field(description="address the UEs reach the server at: an address of the server agent's host "
                                     "(hosts[].address or hosts[].addresses), routed to from the core's UE subnet")
    modules: list[ModuleName] = Field([], description="BPF congestion-control modules the server has")  # type: ignore[valid-type]


class Devices(Strict):
    enb: list[EnbEntry] = Field([], description="srsRAN eNBs (the first one is used)")
    core: list[CoreEntry] = Field([], description="EPCs (the first one is used)")
    attenuators: list[AttenuatorEntry] = Field([], description="programmable attenuators")
    ues: list[UeEntry] = Field([], description="phones and virtual UEs, in run order")
    servers: list[ServerEntry] = Field([], description="traffic servers (the first one serves every UE)")


class Inventory(Strict):
    name: Name = Field(description="the lab's name")
    controller: ControllerEntry = Field(description="where the controller (the host running `cellab run`) listens")
    hosts: list[HostEntry] = Field([], description="the machines agents run on")
    agents: list[AgentEntry] = Field([], description="one `cellab agent` each, with its role and public key")
    devices: Devices = Field(Devices(), description="what the agents drive")
    tags: list[Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_.-]{0,31}$")]] = Field(
        [], description="what this bench has (phone model, eNB kind, ...): a campaign's `requires` picks benches by them")

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


keyindex.register_root("Inventory", Inventory, "inventory")  # where a misplaced key belongs (error hints)


def load_inventory(path: str | Path) -> Inventory:
    path = Path(path)
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise InputError(path, "", "a lab inventory is a YAML mapping (name, controller, hosts, agents, devices)")
    check_text_tree(data, path, ("secret_key", "public_key", "profile", "subscribers"))
    try:
        inventory = Inventory.model_validate(data)  # not **data: a YAML key may be no string
    except ValidationError as exc:
        raise from_validation_error(path, exc, model=Inventory) from exc
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
    errors = coherence.problems(inventory, path) + coherence.key_problems(inventory, path)
    errors += coherence.profile_problems(inventory, path)
    if errors:  # a bad address's own message first: the comparisons below assume addresses
        raise InputErrors(errors)
    problems = address_problems(inventory, core_ue_subnets(inventory))
    if problems:
        raise InputErrors([InputError(path, field, message) for field, message in problems])
    return inventory


PROFILE_MAX_BYTES = 1 << 20


def check_consistency(inventory: Inventory, source: str | Path) -> None:
    """The cross-room rules a run would otherwise meet on the lab's hosts: every eNB agrees with every core
    on PLMN, TAC and MME address (read from their profiles by the RAN and core rooms), or no UE attaches; a
    core's S1-MME address is not another host's."""
    from cellab.contracts.identity import identity_mismatches, load_identity

    errors: list[InputError] = []
    hosts = {h.name: h for h in inventory.hosts}
    host_of = {a.name: hosts.get(a.host) for a in inventory.agents}
    for j, core in enumerate(inventory.devices.core):
        core_host = host_of.get(core.agent)
        if core.profile is None or core_host is None:
            continue
        for address in load_identity("core", core.profile).mme_addrs:
            others = [h for h in inventory.hosts if (address == h.address or address in h.addresses)
                      and h.address != core_host.address]
            if others:
                errors.append(InputError(source, f"devices.core[{j}].profile", f"the S1-MME address {address} "
                                         f"({core.profile}) is host {others[0].name}'s address, but core {core.name}'s "
                                         f"agent {core.agent} runs on host {core_host.name} ({core_host.address})"))
    for j, core in enumerate(inventory.devices.core):
        if core.subscribers is not None and core.profile is not None:  # read as the core agent will provision it
            from cellab.contracts.registry import load

            try:
                load("cellab.services", "subscribers", "subscriber file check")(core.subscribers, core.profile,
                                                                                 core.flavour)
            except InputErrors as exc:
                errors += [InputError(source, f"devices.core[{j}].subscribers", e.render()) for e in exc.errors]
            except InputError as exc:
                errors.append(InputError(source, f"devices.core[{j}].subscribers", exc.render()))
    for k, box in enumerate(inventory.devices.attenuators):  # srsENB's cell_gain: channel n is the eNB's n-th cell
        enb_entry = next((e for e in inventory.devices.enb if e.agent == box.agent), None)
        if box.model != "srsenb-cell-gain" or "cell_ids" in box.options:
            continue
        if enb_entry is None or enb_entry.profile is None:
            errors.append(InputError(source, f"devices.attenuators[{k}].agent", f"srsENB's cell_gain needs the eNB "
                                     f"agent's devices.enb entry with a profile (its cells), or options.cell_ids; "
                                     f"agent {box.agent} has none"))
            continue
        cells = load_identity("enb", enb_entry.profile).cell_ids
        if box.channels > len(cells):
            errors.append(InputError(source, f"devices.attenuators[{k}].channels", f"{box.channels} channels, but "
                                     f"eNB {enb_entry.name} ({enb_entry.profile}) has {len(cells)} cell(s): channel "
                                     "n is its n-th cell", [f"1..{len(cells)}"]))
    for i, enb in enumerate(inventory.devices.enb):
        for j, core in enumerate(inventory.devices.core):
            if enb.profile is None or core.profile is None:
                continue
            problems = identity_mismatches(load_identity("enb", enb.profile), load_identity("core", core.profile))
            errors += [InputError(source, f"devices.enb[{i}].profile / devices.core[{j}].profile", p)
                       for p in problems]
    if errors:
        raise InputErrors(errors)


# ------------------------------------------------------------------ addresses and hosts
# What the inventory shows about addresses is checked against the hosts it lists:
# - a server's address is one of its agent's host (hosts[].address or hosts[].addresses): the UEs' traffic
#   reaches that host, and the server agent there answers and captures it. Not another host's address, and
#   not in a core's UE subnet (the gateway there is the core's tun device, the rest are phones) unless the
#   server runs on the core's host and the address is that gateway (srsEPC's SGi on a one-host lab).
# - a controller bound to loopback cannot be reached by an agent on a host that is not loopback.
# - a core's S1-MME address (from its profile) that is another host's address (check_consistency).
# Names are compared as text, never resolved: `validate` gives the same answer on every machine, offline.
# A host whose address is loopback is a one-host lab: its namespaces and tun devices have addresses the
# inventory does not list, so a server there may have any address no other host or core claims.


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return None


def _loopback(text: str) -> bool:
    ip = _ip(text)
    return text == "localhost" if ip is None else ip.is_loopback


def _endpoint_host(endpoint: str) -> str | None:
    """tcp://HOST:PORT -> HOST (None for another transport)."""
    if not endpoint.startswith("tcp://"):
        return None
    host, _, port = endpoint[len("tcp://"):].rpartition(":")
    return host.strip("[]") if host and port else None


def _endpoint_port(endpoint: str) -> int | None:
    port = endpoint.rpartition(":")[2]
    return int(port) if endpoint.startswith("tcp://") and port.isdigit() else None


def core_ue_subnets(inventory: Inventory) -> dict[str, ipaddress.IPv4Network]:
    """Core name -> the UE subnet its profile names (`ue_subnet`; the gateway is its first address). Read from
    the profile's YAML without the core room's model: a profile that does not say, or says it badly, gives
    nothing here (the core room refuses a bad one when it renders it)."""
    out: dict[str, ipaddress.IPv4Network] = {}
    for core in inventory.devices.core:
        if core.profile is None:
            continue
        try:
            data = read_yaml(core.profile)
            out[core.name] = ipaddress.IPv4Network(str(data["ue_subnet"]), strict=False)
        except (CellabError, KeyError, TypeError, ValueError):
            continue
    return out


def _gateway(net: ipaddress.IPv4Network) -> ipaddress.IPv4Address:
    return next(net.hosts())


def address_problems(inventory: Inventory, ue_subnets: dict[str, ipaddress.IPv4Network] | None = None
                     ) -> list[tuple[str, str]]:
    """(field, message) for every address that contradicts the host it is on (rules above)."""
    hosts = {h.name: h for h in inventory.hosts}
    host_of = {a.name: hosts.get(a.host) for a in inventory.agents}
    ue_subnets = ue_subnets or {}
    problems: list[tuple[str, str]] = []

    def same_machine(a: HostEntry, b: HostEntry) -> bool:
        return a.name == b.name or a.address == b.address

    def owners(address: str) -> list[HostEntry]:
        return [h for h in inventory.hosts if address == h.address or address in h.addresses]

    for field, endpoint in (("controller.bind", inventory.controller.bind),
                            ("controller.telemetry_bind", inventory.controller.telemetry_bind)):
        bound = _endpoint_host(endpoint)
        remote = [a for a in inventory.agents if host_of.get(a.name) and not _loopback(host_of[a.name].address)]
        if bound is not None and _loopback(bound) and remote:
            a = remote[0]
            problems.append((field, f"{endpoint} listens on loopback only, but agent {a.name} runs on host {a.host} "
                                    f"({host_of[a.name].address}) and cannot reach it: bind tcp://0.0.0.0:"
                                    f"{_endpoint_port(endpoint) or 'PORT'} or the controller host's lab address"))

    for i, server in enumerate(inventory.devices.servers):
        host = host_of.get(server.agent)
        if host is None:
            continue
        field = f"devices.servers[{i}].address"
        address = server.address
        owner = f"server {server.name}'s agent {server.agent}"
        who = f"{owner} runs on host {host.name} ({host.address})"
        ip = _ip(address)
        in_subnet = [(name, net) for name, net in ue_subnets.items() if ip is not None and ip in net]
        if in_subnet:
            name, net = in_subnet[0]
            core = next(c for c in inventory.devices.core if c.name == name)
            core_host = host_of.get(core.agent)
            if ip == _gateway(net):
                if core_host is not None and same_machine(core_host, host):
                    continue  # the server on the core's host, behind its tun device (srsEPC's SGi)
                where = f"on host {core_host.name}" if core_host else f"on core agent {core.agent}'s host"
                problems.append((field, f"{address} is the gateway of core {name}'s UE subnet {net} (the core's tun "
                                        f"device, e.g. Open5GS's ogstun, {where}), but {who}: give the address "
                                        f"at which the UEs' traffic, routed by the core, reaches host {host.name}"))
            else:
                problems.append((field, f"{address} is inside core {name}'s UE subnet {net}: a phone's address, "
                                        f"not the server's ({who})"))
            continue
        if address == host.address or address in host.addresses:
            continue
        others = [h for h in owners(address) if not same_machine(h, host)]
        if others:
            agents = ", ".join(a.name for a in inventory.agents if a.host == others[0].name) or "no agent"
            problems.append((field, f"{address} is host {others[0].name}'s address (agents: {agents}), but {who}"))
            continue
        if _loopback(host.address) or ip is None or _ip(host.address) is None:
            continue  # a one-host lab, or a name: nothing to compare without resolving it
        index = inventory.hosts.index(host)
        problems.append((field, f"{address} is not an address of host {host.name} ({host.address}), where {owner} "
                                f"runs: give the host's address, or list {address} under hosts[{index}].addresses "
                                f"when the host has it on another interface"))
    return problems


def address_notes(inventory: Inventory) -> list[str]:
    """What `cellab validate` could not check, or what agents must be told, in one line each."""
    notes = []
    hosts = {h.name: h for h in inventory.hosts}
    for server in inventory.devices.servers:
        agent = next((a for a in inventory.agents if a.name == server.agent), None)
        host = hosts.get(agent.host) if agent else None
        if host is None or server.address == host.address or server.address in host.addresses:
            continue
        if _ip(server.address) is None or (_ip(host.address) is None and not _loopback(host.address)):
            notes.append(f"server {server.name}: address {server.address} and host {host.name}'s address "
                         f"{host.address} were not compared (names are not resolved)")
    bind, telemetry = _endpoint_port(inventory.controller.bind), _endpoint_port(inventory.controller.telemetry_bind)
    if bind is not None and telemetry is not None and telemetry != bind + 1:
        notes.append(f"controller.telemetry_bind port {telemetry} is not the bind port + 1: start every agent with "
                     f"--telemetry tcp://CONTROLLER:{telemetry} (agents derive port + 1 otherwise)")
    return notes
