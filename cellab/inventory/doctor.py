"""`cellab doctor --lab LAB.yaml`: a go/no-go table of a real lab, from the controller, per agent and device.

The controller binds where the inventory says (holding the bench's lease, as a campaign does) and waits a
short while for the listed agents. Each agent that connects is asked, through read-only operations only, its
role and version (`describe`), its clock (`clock`, the runner's offset measurement) and what its role needs
(`self_check`, typed per role contract: binaries, devices, channels, ports, the host clock). An Android phone
is compared with its inventory entry through the inventory lab's own check. An agent that does not connect is
named with its host's address, and the controller says whether it refused an unknown key meanwhile: over
CURVE, a stopped agent, an unreachable one and one whose key is not the inventory's look alike except for that.

Nothing is changed on any device, unless `fix` is given: then each matching phone is prepared for the cell
(Wi-Fi off, mobile data on, awake) through the agent's `prepare`, as a campaign does before its first run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import zmq
from pydantic import ValidationError

import cellab
from cellab.bus import AgentLost, AgentTimeout, Controller, OperationError
from cellab.bus.keys import fingerprint, load_public_key
from cellab.contracts.attenuator import (
    AttenuatorClient,
    AttenuatorConfig,
    AttenuatorSelfCheckParams,
    ChannelsToRead,
)
from cellab.contracts.core import CoreClient, CoreSelfCheckParams
from cellab.contracts.enb import EnbClient, EnbSelfCheckParams
from cellab.contracts.health import SelfCheckResult, clock_sync_check
from cellab.contracts.server import (
    IPERF3_PORT,
    SENDER_PORT,
    SERVER_MODULES,
    ServerClient,
    ServerSelfCheckParams,
)
from cellab.contracts.ue import UEClient
from cellab.errors import CellabError
from cellab.inputs import read_text
from cellab.inventory.lab import InventoryLab
from cellab.inventory.model import PROFILE_MAX_BYTES, AgentEntry, Inventory, load_inventory
from cellab.labs import instances

Status = Literal["ok", "warn", "fail"]

CONNECT_TIMEOUT_S = 5.0  # agents dial the controller themselves and back off up to 2 s between tries
REQUEST_TIMEOUT_S = 20.0  # a self-check may wait for adb or uhd_find_devices
MAX_CLOCK_OFFSET_MS = 10.0  # beyond this an agent host is not following the lab's time source
CLOCK_SAMPLES = 4
BUS_ERRORS = (AgentLost, AgentTimeout, OperationError)


@dataclass(frozen=True)
class Row:
    name: str  # the agent, device or controller the row is about
    check: str
    status: Status
    detail: str


@dataclass(frozen=True)
class DoctorOptions:
    connect_timeout_s: float = CONNECT_TIMEOUT_S
    request_timeout_s: float = REQUEST_TIMEOUT_S
    max_clock_offset_ms: float = MAX_CLOCK_OFFSET_MS
    fix: bool = False


class KeyEvents(logging.Handler):
    """What the controller logs about keys while the doctor waits: connections refused for an unknown CURVE
    key (`curve_rejected`: the handshake fails before any name is known), a listed key speaking as another
    agent's name (`agent_impersonation`), and each agent's hello as the controller saw it (`agent_hello`: the
    same line the agent printed at its start, with the key the handshake presented)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.refused: set[str] = set()  # fingerprints
        self.impostors: dict[str, str] = {}  # agent name -> fingerprint of the key it came with
        self.hellos: dict[str, str] = {}  # agent name -> the controller's line for it
        self._level = logging.NOTSET

    def emit(self, record: logging.LogRecord) -> None:
        event = getattr(record, "event", None)
        if event == "curve_rejected":
            self.refused.add(str(getattr(record, "fingerprint", "?")))
        elif event == "agent_impersonation":
            self.impostors[str(getattr(record, "agent", "?"))] = str(getattr(record, "fingerprint", "?"))
        elif event == "agent_hello":
            self.hellos[str(getattr(record, "agent", "?"))] = record.getMessage()

    def __enter__(self) -> KeyEvents:
        logger = logging.getLogger("cellab.bus.controller")
        self._level = logger.level
        logger.setLevel(min(logger.getEffectiveLevel(), logging.INFO))  # the hellos are INFO records
        logger.addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logger = logging.getLogger("cellab.bus.controller")
        logger.removeHandler(self)
        logger.setLevel(self._level)


def lab_doctor(path: str | Path, options: DoctorOptions = DoctorOptions()) -> list[Row]:
    """The go/no-go rows of the lab an inventory describes. A bad inventory raises (InputError)."""
    inventory = load_inventory(path)
    try:
        lease = instances.claim_bench(inventory.name, "cellab doctor")
    except instances.InstanceBusy as exc:
        return [Row(inventory.name, "bench", "fail", f"{exc} (the doctor binds the controller's ports)")]
    try:
        with KeyEvents() as keys:
            try:
                controller = _bind(inventory)
            except zmq.ZMQError as exc:
                return [Row("controller", "ports", "fail", f"cannot bind {inventory.controller.bind} / "
                                                           f"{inventory.controller.telemetry_bind}: {exc} (another "
                                                           "controller on this host?)")]
            try:
                return _Doctor(inventory, controller, options, keys).rows()
            finally:
                controller.close()
    finally:
        lease.release()


def _bind(inventory: Inventory) -> Controller:
    ctl = inventory.controller
    return Controller(ctl.bind, telemetry_endpoint=ctl.telemetry_bind, secret_key_file=ctl.secret_key,
                      allowed_agent_keys=[a.public_key for a in inventory.agents])


class _Doctor:
    def __init__(self, inventory: Inventory, controller: Controller, options: DoctorOptions, keys: KeyEvents):
        self.inventory, self.controller, self.options, self.keys = inventory, controller, options, keys
        self.hosts = {h.name: h for h in inventory.hosts}

    def rows(self) -> list[Row]:
        rows = [Row("controller", "ports", "ok", f"bound {self.controller.endpoint} (requests) and "
                                                 f"{self.controller.telemetry_endpoint} (telemetry)"),
                _row("controller", SelfCheckResult(items=[clock_sync_check()]))[0]]
        connected = self._wait_for_agents()
        for agent in self.inventory.agents:
            rows += self._agent_rows(agent) if agent.name in connected else self._missing_rows(agent, connected)
        return clock_sync_once_per_host(rows, self._host_of)

    def _host_of(self, name: str) -> str:
        """The inventory host a row's agent runs on; the controller's: the host whose address it binds."""
        if name == "controller":
            bound = self.inventory.controller.bind.partition("://")[2].rpartition(":")[0].strip("[]")
            return next((h.name for h in self.inventory.hosts if bound in (h.address, *h.addresses)), name)
        return next((a.host for a in self.inventory.agents if a.name == name), name)

    # --- reachability and keys ------------------------------------------------------------------
    def _wait_for_agents(self) -> set[str]:
        names = [a.name for a in self.inventory.agents]
        try:
            self.controller.wait_for_agents(names, timeout_s=self.options.connect_timeout_s)
        except AgentLost:
            pass  # the ones missing are named below, each with its host
        known = self.controller.agents()
        return {n for n in names if n in known and not known[n].lost}

    def _missing_rows(self, agent: AgentEntry, connected: set[str]) -> list[Row]:
        host = self.hosts.get(agent.host)
        where = f"host {agent.host} ({host.address if host else '?'})"
        reach = (f"did not connect within {self.options.connect_timeout_s:g} s to {self.controller.endpoint}: is "
                 f"`cellab agent --name {agent.name}` running on {where} (`systemctl status cellab-agent-"
                 f"{agent.name}`), and can it reach this address?")
        return [Row(agent.name, "reachable", "fail", reach), Row(agent.name, "key", "fail",
                                                               self._key_mismatch_detail(agent, connected))]

    def _key_mismatch_detail(self, agent: AgentEntry, connected: set[str]) -> str:
        listed = f"agents[].public_key {agent.public_key} (fingerprint {_fingerprint(agent.public_key)})"
        missing = [a for a in self.inventory.agents if a.name not in connected]
        refused = sorted(self.keys.refused)
        if len(refused) == 1 and len(missing) == 1:
            return (f"key mismatch: the controller refused a connection with key {refused[0]}, which the inventory "
                    f"does not list, while {agent.name} was missing: its key pair is not {listed}; copy its "
                    f"NAME.key to the controller again (docs/real-lab.md, Keys)")
        if refused:
            return (f"key mismatch or not reachable: the controller refused keys {', '.join(refused)} (not in the "
                    f"inventory) while {len(missing)} agents were missing; compare with {listed}")
        return (f"key mismatch or not reachable: no connection attempt with an unknown key reached the "
                f"controller, so either the agent is not running or cannot reach it, or it holds another "
                f"controller key (its --controller-key must be this controller's public key); listed: {listed}")

    # --- an agent that answers ------------------------------------------------------------------
    def _agent_rows(self, agent: AgentEntry) -> list[Row]:
        started = time.perf_counter()
        try:
            described = self.controller.request(agent.name, "describe", {}, timeout_s=self.options.request_timeout_s)
        except BUS_ERRORS as exc:
            return [Row(agent.name, "reachable", "fail", f"connected but does not answer: {exc}")]
        rtt_ms = (time.perf_counter() - started) * 1000
        hello = self.keys.hellos.get(agent.name)
        said = f"answered in {rtt_ms:.1f} ms" + (f"; the controller saw: {hello}" if hello else "")
        rows = [Row(agent.name, "reachable", "ok", said), self._key_row(agent),
                *self._identity_rows(agent, described), self._clock_row(agent)]
        for i, ue in enumerate(self.inventory.devices.ues):  # before the self-check: --fix prepares the phone
            if ue.kind == "android" and ue.agent == agent.name:
                rows += self._phone_rows(i)
        return rows + self._self_check_rows(agent)

    def _key_row(self, agent: AgentEntry) -> Row:
        if agent.name in self.keys.impostors:
            return Row(agent.name, "key", "fail", f"a message as {agent.name} came with another listed key "
                                                  f"({self.keys.impostors[agent.name]}): two agents share a name")
        return Row(agent.name, "key", "ok", f"CURVE handshake with {agent.public_key.name} "
                                           f"(fingerprint {_fingerprint(agent.public_key)})")

    @staticmethod
    def _identity_rows(agent: AgentEntry, described: dict) -> list[Row]:
        role, version = described.get("role"), str(described.get("version"))
        rows = []
        if role not in (agent.role, "generic"):
            rows.append(Row(agent.name, "role", "fail", f"answers as role {role!r}, the inventory lists it as "
                                                        f"{agent.role!r}: start it with --role {agent.role}"))
        if version == cellab.__version__:
            rows.append(Row(agent.name, "version", "ok", f"cellab {version}"))
        else:
            rows.append(Row(agent.name, "version", "warn", f"cellab {version} on the agent, {cellab.__version__} "
                                                           "here: update its host's checkout (`make setup`)"))
        return rows

    def _clock_row(self, agent: AgentEntry) -> Row:
        try:
            offset = self.controller.measure_clock_offset(agent.name, CLOCK_SAMPLES, self.options.request_timeout_s)
        except BUS_ERRORS as exc:
            return Row(agent.name, "clock offset", "fail", f"no clock reading: {exc}")
        offset_ms, rtt_ms = offset.offset_s * 1000, offset.rtt_s * 1000
        detail = f"{offset_ms:+.2f} ms (round trip {rtt_ms:.2f} ms)"
        if abs(offset_ms) > self.options.max_clock_offset_ms + rtt_ms / 2:
            return Row(agent.name, "clock offset", "warn", f"{detail}: more than {self.options.max_clock_offset_ms:g}"
                                                           " ms off the controller: synchronise its host (chrony, "
                                                           "docs/real-lab.md, Clocks)")
        return Row(agent.name, "clock offset", "ok", detail)

    def _self_check_rows(self, agent: AgentEntry) -> list[Row]:
        try:
            result = self._self_check(agent)
        except OperationError as exc:
            if exc.kind == "unknown_op":
                return [Row(agent.name, "self check", "warn", "the agent has no self_check operation (an older "
                                                              "cellab): update its host's checkout")]
            return [Row(agent.name, "self check", "fail", str(exc))]
        except (AgentLost, AgentTimeout, CellabError, ValidationError) as exc:
            return [Row(agent.name, "self check", "fail", str(exc).replace("\n", "; "))]
        return _row(agent.name, result)

    def _self_check(self, agent: AgentEntry) -> SelfCheckResult:
        """The agent's role's self_check, with what the inventory says that role must have."""
        timeout_s = self.options.request_timeout_s
        if agent.role == "server":
            return ServerClient(self.controller, agent.name, timeout_s).self_check(self._server_params(agent))
        if agent.role == "ue":
            return UEClient(self.controller, agent.name, timeout_s).self_check()
        if agent.role == "enb":
            entry = next((e for e in self.inventory.devices.enb if e.agent == agent.name), None)
            params = EnbSelfCheckParams(rf=entry.rf, device_args=entry.device_args) if entry else EnbSelfCheckParams()
            return EnbClient(self.controller, agent.name, timeout_s).self_check(params)
        if agent.role == "core":
            return CoreClient(self.controller, agent.name, timeout_s).self_check(self._core_params(agent))
        return AttenuatorClient(self.controller, agent.name, timeout_s).self_check(self._attenuator_params(agent))

    def _server_params(self, agent: AgentEntry) -> ServerSelfCheckParams:
        ues = max(1, len(self.inventory.devices.ues))  # UE i of a run uses port + i
        ports = [*range(IPERF3_PORT, IPERF3_PORT + ues), *range(SENDER_PORT, SENDER_PORT + ues)]
        named = [m for s in self.inventory.devices.servers if s.agent == agent.name for m in s.modules]
        unknown = sorted(set(named) - set(SERVER_MODULES))
        if unknown:
            raise CellabError(f"devices.servers[].modules names {', '.join(unknown)} (allowed: "
                              f"{', '.join(SERVER_MODULES)})")
        return ServerSelfCheckParams(ports=ports, modules=sorted(set(named)))

    def _core_params(self, agent: AgentEntry) -> CoreSelfCheckParams:
        entry = next(e for e in self.inventory.devices.core if e.agent == agent.name) \
            if any(e.agent == agent.name for e in self.inventory.devices.core) else None
        if entry is None:
            raise CellabError("no devices.core entry names this agent: nothing to check")
        profile = read_text(entry.profile, PROFILE_MAX_BYTES) if entry.profile else None
        return CoreSelfCheckParams(flavour=entry.flavour, profile_yaml=profile)

    def _attenuator_params(self, agent: AgentEntry) -> AttenuatorSelfCheckParams:
        """Every box this agent drives, with the channels the inventory's UEs are wired to."""
        boxes = []
        for entry in self.inventory.devices.attenuators:
            if entry.agent != agent.name:
                continue
            channels = sorted({ue.attenuator.channel for ue in self.inventory.devices.ues
                               if ue.attenuator and ue.attenuator.attenuator == entry.name}) or [1]
            config = AttenuatorConfig(**entry.model_dump(exclude={"agent"}))
            boxes.append(ChannelsToRead(config=config, channels=channels))
        return AttenuatorSelfCheckParams(attenuators=boxes)

    # --- phones ---------------------------------------------------------------------------------
    def _phone_rows(self, index: int) -> list[Row]:
        """The phone is the one its entry names (the inventory lab's own check); with `fix`, then prepared."""
        ue = self.inventory.devices.ues[index]
        name = f"{ue.name} ({ue.agent})"
        lab = InventoryLab(self._only_phone(index), self.controller, [], self.options.request_timeout_s)
        try:
            lab.check_phones(prepare=False)
        except CellabError as exc:
            return [Row(name, "serial", "fail", str(exc))]
        rows = [Row(name, "serial", "ok" if ue.serial else "warn",
                    f"the phone {ue.serial} the inventory names" if ue.serial else
                    "the inventory names no serial: a swapped phone would go unnoticed")]
        if self.options.fix:
            rows.append(self._prepare_row(name, lab))
        return rows

    def _only_phone(self, index: int) -> Inventory:
        """The inventory with every other UE left out of the phone checks (made virtual, so the check skips
        it), keeping the indices its messages name."""
        ues = [ue if i == index else ue.model_copy(update={"kind": "virtual"})
               for i, ue in enumerate(self.inventory.devices.ues)]
        return self.inventory.model_copy(update={"devices": self.inventory.devices.model_copy(update={"ues": ues})})

    @staticmethod
    def _prepare_row(name: str, lab: InventoryLab) -> Row:
        try:
            lab.check_phones(prepare=True)
        except CellabError as exc:
            return Row(name, "fix", "fail", str(exc))
        steps = next(iter(lab.health.values()), {}).get("prepared") or []
        return Row(name, "fix", "ok", "prepared: " + ", ".join(steps))


def clock_sync_once_per_host(rows: list[Row], host_of: Callable[[str], str]) -> list[Row]:
    """A host has one clock: its agents' (and the controller's) `clock sync` rows become one, at the first one's
    place, naming who shares it; the worst status of them is kept."""
    shared: dict[str, list[Row]] = {}
    for row in rows:
        if row.check == "clock sync":
            shared.setdefault(host_of(row.name), []).append(row)
    out: list[Row] = []
    for row in rows:
        if row.check != "clock sync":
            out.append(row)
            continue
        host = host_of(row.name)
        group = shared.pop(host, None)
        if group is None:
            continue  # said already, at the host's first row
        worst = max(group, key=lambda r: ("ok", "warn", "fail").index(r.status))
        names = ", ".join(r.name for r in group)
        out.append(Row(f"host {host}", row.check, worst.status,
                       f"{worst.detail} ({names})" if len(group) > 1 else worst.detail))
    return out


def _row(name: str, result: SelfCheckResult) -> list[Row]:
    return [Row(name, item.check, item.status, item.detail) for item in result.items]


def _fingerprint(path: Path) -> str:
    try:
        return fingerprint(load_public_key(path))
    except CellabError:
        return "unreadable"


def failed(rows: list[Row]) -> bool:
    return any(r.status == "fail" for r in rows)
