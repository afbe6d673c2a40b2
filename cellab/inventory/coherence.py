"""What an inventory's parts must agree on beyond names and references, checked when it is loaded: every
device driven by an agent of its role, one phone per serial, one key per agent (the controller's own
included), addresses and endpoints that are addresses, and each eNB and core as its profile describes it.
Each problem is an InputError naming the inventory file, the field and what is allowed."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import TYPE_CHECKING

from cellab.errors import CellabError, InputError, InputErrors

if TYPE_CHECKING:
    from cellab.inventory.model import Inventory

# the role of the agent each device group needs (attenuators: the model's own rule, in model.py)
DEVICE_ROLES = {"enb": "enb", "core": "core", "ues": "ue", "servers": "server"}
_LABEL = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")  # RFC 1123 host name label
ADDRESS_FORM = "an IP address (192.0.2.1, 2001:db8::1) or a host name (RFC 1123: letters, digits, '-', '.')"
ENDPOINT_FORM = "tcp://HOST:PORT with HOST an IP address, [IPv6], a host or interface name or *, PORT 1..65535"


def address_problem(text: object) -> str | None:
    """Why `text` is neither an IP address nor a host name, or None. A dotted name of digits only is an
    IPv4 address or nothing (192.0.2.300 is no host name a resolver would look up)."""
    if not isinstance(text, str):
        return f"must be text, not {type(text).__name__}"
    try:
        ipaddress.ip_address(text)
        return None
    except ValueError:
        pass
    name = text.removesuffix(".")
    labels = name.split(".")
    if not name or len(name) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        return f"{text!r} is not an address"
    if labels[-1].isdigit():
        return f"{text!r} is not an IP address (a host name does not end in a number)"
    return None


def endpoint_problem(endpoint: object) -> str | None:
    """Why `endpoint` is not a ZeroMQ TCP endpoint the controller can bind, or None."""
    if not isinstance(endpoint, str) or not endpoint.startswith("tcp://"):
        return f"{endpoint!r} is not a tcp:// endpoint"
    host, colon, port = endpoint[len("tcp://"):].rpartition(":")
    if not colon or not port.isascii() or not port.isdigit() or not 1 <= int(port) <= 65535:
        return f"{endpoint!r} has no port in 1..65535"
    if host == "*":
        return None
    if host.startswith("[") and host.endswith("]"):
        try:
            ipaddress.IPv6Address(host[1:-1])
            return None
        except ValueError:
            return f"{endpoint!r}: {host} is not an IPv6 address"
    problem = address_problem(host)
    return f"{endpoint!r}: {problem}" if problem else None


def problems(inventory: Inventory, source: str | Path) -> list[InputError]:
    """Roles, serials and address grammar: what the inventory's own text shows."""
    found: list[InputError] = []
    roles = {a.name: a.role for a in inventory.agents}
    for group, role in DEVICE_ROLES.items():
        for i, entry in enumerate(getattr(inventory.devices, group)):
            if roles.get(entry.agent, role) != role:
                found.append(InputError(source, f"devices.{group}[{i}].agent", f"agent {entry.agent!r} has role "
                                        f"{roles[entry.agent]!r}, but {entry.name} needs an agent of role {role!r}",
                                        [a.name for a in inventory.agents if a.role == role] or [f"an agent of role {role}"]))
    serials: dict[str, str] = {}
    for i, ue in enumerate(inventory.devices.ues):
        if ue.serial and ue.serial in serials:
            found.append(InputError(source, f"devices.ues[{i}].serial", f"{ue.serial} is also UE "
                                    f"{serials[ue.serial]}'s serial: one phone cannot be two UEs",
                                    ["a serial no other UE has"]))
        elif ue.serial:
            serials[ue.serial] = ue.name
    for i, host in enumerate(inventory.hosts):
        for field, value in ((f"hosts[{i}].address", host.address),
                             *((f"hosts[{i}].addresses[{j}]", a) for j, a in enumerate(host.addresses))):
            problem = address_problem(value)
            if problem:
                found.append(InputError(source, field, problem, [ADDRESS_FORM]))
    for i, server in enumerate(inventory.devices.servers):
        problem = address_problem(server.address)
        if problem:
            found.append(InputError(source, f"devices.servers[{i}].address", problem, [ADDRESS_FORM]))
    for field in ("bind", "telemetry_bind"):
        problem = endpoint_problem(getattr(inventory.controller, field))
        if problem:
            found.append(InputError(source, f"controller.{field}", problem, [ENDPOINT_FORM]))
    return found


def key_problems(inventory: Inventory, source: str | Path) -> list[InputError]:
    """Each agent its own CURVE key, and the controller's secret key not an agent's: the allowlist tells peers
    apart by key, so a shared key lets one agent answer as another (or as the controller). Run after the key
    files were checked readable."""
    from cellab.bus.keys import load_public_key, load_secret_key

    controller = load_secret_key(inventory.controller.secret_key)[0]
    owners: dict[bytes, str] = {}
    found: list[InputError] = []
    for i, agent in enumerate(inventory.agents):
        key = load_public_key(agent.public_key)
        if key == controller:
            found.append(InputError(source, "controller.secret_key", f"its public half is agent {agent.name}'s key "
                                    f"(agents[{i}].public_key, {agent.public_key})",
                                    ["the controller's own key pair (cellab keys controller)"]))
        elif key in owners:
            found.append(InputError(source, f"agents[{i}].public_key", f"{agent.public_key} holds the same key as "
                                    f"{owners[key]}", ["a key pair of the agent's own (cellab keys NAME)"]))
        owners.setdefault(key, f"agent {agent.name}")
    return found


def profile_problems(inventory: Inventory, source: str | Path) -> list[InputError]:
    """Each eNB's `rf` is its profile's radio and each core's flavour its profile's (when the profile says
    one): the agent renders from the profile, so the inventory's word would be silently overridden."""
    from cellab.contracts.identity import load_identity

    errors: list[InputError] = []
    for kind, group, field, attr in (("enb", "enb", "rf", "radio"), ("core", "core", "flavour", "flavour")):
        for i, entry in enumerate(getattr(inventory.devices, group)):
            if entry.profile is None:
                continue
            try:
                said = getattr(load_identity(kind, entry.profile), attr)
            except InputErrors as exc:
                errors += [InputError(source, f"devices.{group}[{i}].profile", e.render()) for e in exc.errors]
                continue
            except CellabError as exc:
                errors.append(InputError(source, f"devices.{group}[{i}].profile", str(exc)))
                continue
            mine = getattr(entry, field)
            if said and said != mine:
                errors.append(InputError(source, f"devices.{group}[{i}].{field}", f"{mine}, but its profile "
                                         f"{entry.profile} says {said}", [said]))
    return errors
