"""A lab session: the controller, the agents and (for an embedded lab) the namespaces, for one campaign.

Embedded labs (wired, virtual) start their agents here as local processes inside the lab's namespaces,
with fresh CURVE keys, so a campaign on the virtual lab goes through the same bus as one on hardware.
An inventory lab's agents already run on their hosts; the controller binds where the inventory says.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cellab.contracts.attenuator import WIRE_FORBIDDEN_OPTIONS, AttenuatorClient
from cellab.contracts.server import ServerClient
from cellab.bus import Controller
from cellab.bus.errors import OperationError
from cellab.bus.keys import generate_keypair
from cellab.errors import CellabError
from cellab.inventory.model import Inventory, load_inventory
from cellab.inventory.lab_attenuator import LabAttenuator, inventory_attenuator, lab_attenuator
from cellab.labs import EMBEDDED_LABS, embedded_lab_class, instances
from cellab.inventory.lab import InventoryLab
from cellab.labs.base import AgentSpec, EmbeddedLab, Host, Topology
from cellab.labs.proc import die_with_parent
from cellab.run.telemetry import TelemetryRecorder

AGENT_START_TIMEOUT_S = 20.0
REMOTE_AGENT_TIMEOUT_S = 60.0


@dataclass
class LocalAgent:
    name: str
    role: str
    netns: str
    proc: subprocess.Popen | None = None
    args: list[str] = field(default_factory=list)


class LabSession:
    def __init__(self, lab: str, prefix: str | None = None, ue_count: int = 1, purpose: str = ""):
        self.lab_name = lab
        self.prefix = prefix  # embedded labs: the instance's prefix (None: the first free one)
        self.purpose = purpose  # what the instance is for, shown to whoever finds it live
        self.ue_count = ue_count  # embedded labs: how many UEs to build (the most any run uses)
        self.lab: EmbeddedLab | InventoryLab | None = None
        self.topology: Topology | None = None
        self.controller: Controller | None = None
        self.agents: dict[str, str] = {}  # every agent of the session: name -> role
        self._local: dict[str, LocalAgent] = {}  # the ones this session started (embedded labs)
        self.roles: dict[str, str] = {}  # role -> agent name (ue: the first UE's)
        self.ue_agents: list[str] = []  # the UE agents in lab order (the virtual cell's UE index, the inventory's)
        self.loaded_modules: set[str] = set()  # BPF congestion controls the server agent registered
        self.module_values: dict[tuple[str, str], float] = {}  # (module, param) -> its value now, registered ones
        self.module_defaults: dict[tuple[str, str], float] = {}  # (module, param) -> its value when loaded
        self.attenuator: LabAttenuator | None = None  # in front of the UEs, driven by roles["attenuator"]
        self.telemetry = TelemetryRecorder()  # every agent's samples, into the current run's folder
        self.schedules: dict[str, Any] = {}  # results folder -> its Schedules (drive-log replays built here)
        self._tmp: Path | None = None
        self._bench_lease: instances.InstanceLease | None = None
        self._bridge: subprocess.Popen | None = None
        self._pty_link: Path | None = None
        self._relay: Any = None  # the cell-gain relay agent (an inventory whose attenuator is srsENB's cell_gain)

    # --- lifecycle -----------------------------------------------------------------------
    def __enter__(self) -> LabSession:
        try:
            self.open()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self) -> None:
        if self.lab_name == "bench":
            raise CellabError("lab `bench` (any bench of a cluster) runs with --cluster ADDRESS, whose `cellab worker "
                              "--lab` processes offer the benches")
        if self.lab_name in EMBEDDED_LABS:
            self._open_embedded()
        else:
            self._open_inventory(load_inventory(self.lab_name))

    def _open_inventory(self, inventory: Inventory) -> None:
        """A real lab: its agents already run on their hosts; the controller binds where the inventory says."""
        # the bench is ours until close (a hand `cellab run` while a cluster worker drives it fails here,
        # naming the holder; the kernel frees the lease if this process dies)
        self._bench_lease = instances.claim_bench(inventory.name, self.purpose or "a campaign")
        servers, ues = inventory.devices.servers, inventory.devices.ues
        if not servers or not ues:
            raise CellabError(f"{self.lab_name}: devices.servers and devices.ues need one entry each for a workload")
        roles = {a.name: a.role for a in inventory.agents}
        wanted = [("devices.servers[0]", servers[0], "server")] + [(f"devices.ues[{i}]", ue, "ue")
                                                                    for i, ue in enumerate(ues)]
        for where, entry, role in wanted:
            if roles[entry.agent] != role:
                raise CellabError(f"{self.lab_name}: {where}: agent {entry.agent!r} has role {roles[entry.agent]!r}, "
                                  f"not {role!r}")
        self.attenuator = inventory_attenuator(inventory)
        self.topology = Topology(server=Host(servers[0].name, "", servers[0].address),
                                 ues=tuple(Host(ue.name, "", "") for ue in ues))
        self.ue_agents = [ue.agent for ue in ues]
        ctl = inventory.controller
        relay: tuple[str, Path, Path] | None = None  # the cell-gain relay's name and key pair
        if self.attenuator is not None and self.attenuator.config.model == "srsenb-cell-gain":
            self.attenuator = self._with_cell_ids(inventory, self.attenuator)
            relay = self._relay_key(inventory)
        self.controller = Controller(ctl.bind, telemetry_endpoint=ctl.telemetry_bind, secret_key_file=ctl.secret_key,
                                     allowed_agent_keys=[a.public_key for a in inventory.agents] +
                                     ([relay[1]] if relay else []))
        self.roles = {"server": servers[0].agent, "ue": ues[0].agent}
        if self.attenuator is not None:
            assert self.attenuator.agent is not None
            self.roles["attenuator"] = self.attenuator.agent
            if relay is not None:
                self._start_cell_gain_relay(inventory, relay[0], relay[2])
                self.roles["attenuator"] = relay[0]
                roles[relay[0]] = "attenuator"
        self.agents = {name: roles[name] for name in [*self.roles.values(), *self.ue_agents]}
        for agent in inventory.agents:  # every agent listed is health-checked, not only the ones a run uses
            self.agents.setdefault(agent.name, agent.role)
        self.controller.subscribe(self.telemetry.on_sample)
        self.controller.wait_for_agents(list(self.agents), timeout_s=REMOTE_AGENT_TIMEOUT_S)
        if self.attenuator is not None:
            self._configure_inventory_attenuator(self.attenuator)
        self.lab = InventoryLab(inventory, self.controller, self.ue_agents)
        self.lab.prepare()

    def _relay_key(self, inventory: Inventory) -> tuple[str, Path, Path]:
        """The cell-gain relay's name (one no inventory agent has) and a key pair made for this session (the
        controller admits it beside the inventory's agents)."""
        taken = {a.name for a in inventory.agents}
        name = next(name for n in range(1, 100) if (name := f"cell-gain-relay{n}") not in taken)
        self._tmp = Path(tempfile.mkdtemp(prefix="cellab-session-"))
        return (name, *generate_keypair(self._tmp / "keys", name))

    def _start_cell_gain_relay(self, inventory: Inventory, name: str, secret_key: Path) -> None:
        """srsENB's cell_gain is the eNB agent's operation, not an attenuator agent's: an attenuator agent in
        this process relays the attenuator contract to it (cellab.attenuator.relay)."""
        from cellab.contracts.enb import EnbClient
        from cellab.contracts.registry import load

        assert self.controller is not None and self.attenuator is not None and self._tmp is not None
        enb = EnbClient(self.controller, self.attenuator.agent, 15.0)
        start = load("cellab.services", "cell_gain_relay", "cell-gain relay")
        self._relay = start(name, self.controller.endpoint, cell_gain=enb.cell_gain, secret_key_file=secret_key,
                            controller_key_file=inventory.controller.secret_key,
                            artifact_dir=self._tmp / "artifacts" / name,
                            telemetry_endpoint=self.controller.telemetry_endpoint)

    def _with_cell_ids(self, inventory: Inventory, attenuator: LabAttenuator) -> LabAttenuator:
        """A `srsenb-cell-gain` box's channel n is the eNB profile's n-th cell unless its options say
        `cell_ids`: the relay's driver names a cell by its cell_id, which the profile chooses."""
        if "cell_ids" in attenuator.config.options:
            return attenuator
        from cellab.contracts.identity import load_identity

        enb = next((e for e in inventory.devices.enb if e.agent == attenuator.agent and e.profile), None)
        if enb is None:
            raise CellabError(f"{self.lab_name}: attenuator {attenuator.name} is srsENB's cell_gain, but no "
                              f"devices.enb entry of agent {attenuator.agent} names a profile (its cells' ids) and "
                              "its options give no cell_ids")
        ids = load_identity("enb", enb.profile).cell_ids
        options = {**attenuator.config.options, "cell_ids": ",".join(str(i) for i in ids)}
        return LabAttenuator(attenuator.config.model_copy(update={"options": options}), attenuator.ue_channels,
                             attenuator.agent)

    def _configure_inventory_attenuator(self, attenuator: LabAttenuator) -> None:
        """The inventory is the one description of the device: send it to the agent, unless it names code
        to load (an SDK or VISA library), which only the agent host's own config may do; then the agent
        must already hold the entry."""
        agent, name = self.roles["attenuator"], attenuator.name
        client = AttenuatorClient(self.controller, agent, 15.0)
        if WIRE_FORBIDDEN_OPTIONS & set(attenuator.config.options):
            try:
                client.info(name)
            except OperationError as exc:
                raise CellabError(f"{self.lab_name}: attenuator {name}: its options "
                                  f"({', '.join(sorted(WIRE_FORBIDDEN_OPTIONS))}) are read from agent {agent}'s own "
                                  f"config (CELLAB_ATTENUATOR_CONFIG), and the agent answered: {exc}") from None
        else:
            client.configure([attenuator.config])

    def _open_embedded(self) -> None:
        lab_cls = embedded_lab_class(self.lab_name)
        kwargs: dict[str, Any] = {}
        if self.ue_count > 1:
            if not getattr(lab_cls, "max_ues", 1) >= self.ue_count:
                raise CellabError(f"the {self.lab_name} lab runs at most {getattr(lab_cls, 'max_ues', 1)} UEs, "
                                  f"a run asks for {self.ue_count}")
            kwargs["ues"] = self.ue_count
        # the instance's lease first: a given prefix that is live elsewhere fails naming its holder, none given
        # takes the first free one, so two campaigns on one host never share namespaces
        purpose = self.purpose or "a campaign"
        lease = instances.claim(self.prefix, self.lab_name, purpose) if self.prefix else \
            instances.allocate(self.lab_name, purpose)
        try:
            self.lab = lab_cls(prefix=lease.prefix, **kwargs)
        except BaseException:
            lease.release()
            instances.forget(lease.prefix)
            raise
        self.lab.lease = lease
        self.topology = self.lab.up()
        self._tmp = Path(tempfile.mkdtemp(prefix="cellab-session-"))
        self.ue_agents = [f"ue{i}" for i in range(len(self.topology.ues))]
        plan = [AgentSpec("server", "server", netns=self.topology.server.netns)]
        plan += [self._ue_agent_spec(name, i, host)
                 for i, (name, host) in enumerate(zip(self.ue_agents, self.topology.ues, strict=True))]
        plan += self.lab.extra_agents()
        attenuation_ctl = self.topology.extra.get("attenuation_ctl") or self.topology.extra.get("ctl")
        if attenuation_ctl:
            # The lab's attenuator: a Mini-Circuits serial emulator bridged to the cell (a channel per UE), so
            # runs go through the real serial driver (and its quantization and readback checks).
            self._start_attenuator_bridge(attenuation_ctl, len(self.ue_agents))
            plan.append(AgentSpec("atten", "attenuator"))
            self.attenuator = lab_attenuator(self.lab_name, len(self.ue_agents))
        keys = self._tmp / "keys"
        ctl_public, ctl_secret = generate_keypair(keys, "controller")
        agent_keys = {spec.name: generate_keypair(keys, spec.name) for spec in plan}
        self.controller = Controller(
            "tcp://127.0.0.1:*", telemetry_endpoint="tcp://127.0.0.1:*", secret_key_file=ctl_secret,
            allowed_agent_keys=[pub for pub, _ in agent_keys.values()])
        self.controller.subscribe(self.telemetry.on_sample)
        for spec in plan:
            name, role, ns = spec.name, spec.role, spec.netns
            artifacts = self._tmp / "artifacts" / name
            artifacts.mkdir(parents=True)
            args = [sys.executable, "-m", "cellab", "agent", "--role", role, "--name", name,
                    "--controller", self.controller.endpoint, "--telemetry", self.controller.telemetry_endpoint,
                    "--key", str(agent_keys[name][1]), "--controller-key", str(ctl_public),
                    "--artifact-dir", str(artifacts)] + (["--netns", ns] if ns else [])
            args += (["--kind", spec.kind] if spec.kind else []) + list(spec.args)
            self._local[name] = LocalAgent(name, role, ns or "", args=args)
            self.agents[name] = role
            self.roles.setdefault(role, name)
            self._spawn(self._local[name])
        self.controller.wait_for_agents(list(self.agents), timeout_s=AGENT_START_TIMEOUT_S)
        if "attenuator" in self.roles:
            self._configure_attenuator()
        self.lab.bind(self.controller, dict(self.agents))

    def _ue_agent_spec(self, name: str, index: int, host: Host) -> AgentSpec:
        """A lab may give its UEs an agent of its own kind (a virtual phone behind adb); by default the virtual
        UE agent in the UE's namespace, whose radio is the emulated cell when the lab has one."""
        own = getattr(self.lab, "ue_agent_spec", None)
        if own is not None:
            return own(name, index, host)
        assert self.topology is not None
        cell = ("--cell-ctl", self.topology.extra["ctl"], "--cell-ue", str(index)) if "ctl" in self.topology.extra else ()
        return AgentSpec(name, "ue", netns=host.netns, args=cell)

    def _start_attenuator_bridge(self, cell_ctl: str, ues: int) -> None:
        self._pty_link = self._tmp / "attenuator.pty"
        self._bridge = subprocess.Popen(
            [sys.executable, "-m", "cellab.attenuator.bridge", "--cell-ctl", cell_ctl, "--pty-link",
             str(self._pty_link), "--ues", str(ues)],
            stdout=subprocess.PIPE, stderr=open(self._tmp / "bridge.log", "wb"), stdin=subprocess.DEVNULL,
            start_new_session=True, preexec_fn=die_with_parent, text=True)
        ready = self._bridge.stdout.readline() if self._bridge.stdout else ""
        if '"ready"' not in ready:
            raise CellabError(f"the virtual attenuator bridge did not start: {(self._tmp / 'bridge.log').read_text()[-400:]}")

    def _configure_attenuator(self) -> None:
        assert self.attenuator is not None
        config = self.attenuator.config.model_copy(update={"address": str(self._pty_link)})
        AttenuatorClient(self.controller, self.roles["attenuator"], 15.0).configure([config])

    def _spawn(self, agent: LocalAgent) -> None:
        log = open(self._tmp / f"agent-{agent.name}.log", "ab")
        agent.proc = subprocess.Popen(agent.args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                      start_new_session=True, preexec_fn=die_with_parent,
                                      env=os.environ | {"PYTHONUNBUFFERED": "1"})
        log.close()

    def ensure_agents(self) -> list[str]:
        """Restart local agents that died (they reconnect by themselves); returns the restarted names. An
        inventory's agents are restarted by their hosts: wait for every one to answer again, and give a
        restarted attenuator agent its entry and a restarted server agent's modules back to the runner."""
        if isinstance(self.lab, InventoryLab):
            self.controller.wait_for_agents(list(self.agents), timeout_s=REMOTE_AGENT_TIMEOUT_S)
            if self.attenuator is not None:
                try:
                    AttenuatorClient(self.controller, self.roles["attenuator"], 15.0).info(self.attenuator.name)
                except OperationError:  # a fresh agent does not hold the entry yet
                    self._configure_inventory_attenuator(self.attenuator)
            self._forget_unregistered_modules()
            return []
        restarted = [a.name for a in self._local.values() if a.proc is None or a.proc.poll() is not None]
        for name in restarted:
            self._spawn(self._local[name])
        if restarted:
            self.controller.wait_for_agents(restarted, timeout_s=AGENT_START_TIMEOUT_S)
            if self.roles.get("attenuator") in restarted:
                self._configure_attenuator()
            if self.roles.get("server") in restarted:
                self._forget_modules()  # a dead agent's safe state may not have run: reload to be sure
        # an op that failed fatally put a live server agent in its safe state, which unloads its modules
        self._forget_unregistered_modules()
        return restarted

    def lost_agents(self) -> list[str]:
        """An inventory's agents the controller has lost or does not see (an embedded lab restarts its own)."""
        if not isinstance(self.lab, InventoryLab) or self.controller is None:
            return []
        seen = self.controller.agents()
        return [name for name in self.agents if name not in seen or seen[name].lost]

    def _forget_modules(self) -> None:
        self.loaded_modules.clear()
        self.module_values.clear()
        self.module_defaults.clear()

    def _forget_unregistered_modules(self) -> None:
        """The next run loads its modules again if the server agent no longer has one registered."""
        if not self.loaded_modules:
            return
        registered = {m.name for m in ServerClient(self.controller, self.roles["server"], 15.0)
                      .list_modules().modules if m.registered}
        if self.loaded_modules - registered:
            self._forget_modules()

    def close(self) -> None:
        for agent in self._local.values():
            if agent.proc and agent.proc.poll() is None:
                # SIGTERM: the agent puts its devices in their safe state and exits.
                os.killpg(agent.proc.pid, signal.SIGTERM)
        for agent in self._local.values():
            if agent.proc:
                try:
                    agent.proc.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(agent.proc.pid, signal.SIGKILL)
                    agent.proc.wait(5)
        if self._bridge and self._bridge.poll() is None:
            self._bridge.terminate()
            try:
                self._bridge.wait(5)
            except subprocess.TimeoutExpired:
                self._bridge.kill()
        self._bridge = None
        if self._relay is not None:  # while the controller is up: its safe state goes to the eNB agent
            self._relay.stop()
            self._relay = None
        self.telemetry.stop()
        try:
            if self.lab:  # before the controller goes: an inventory's eNB and core are stopped through it
                self.lab.down()
        finally:
            if self.controller:
                self.controller.close()
                self.controller = None
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
        if self._bench_lease is not None:
            self._bench_lease.release()
            self._bench_lease = None
