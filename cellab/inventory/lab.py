"""A real lab's counterpart of an embedded lab: nothing to build, every box configured through its agent.

Before the first run every agent the inventory names is health-checked (it answers, its version and
clock offset go into the manifest), the core is configured from its profile and started, and the eNB is
configured from its profile. Each run then applies its radio parameters to the eNB agent (srsenb restarts
only when a parameter that needs it changed, and the run waits until every UE has attached again); the
attenuation and the workloads are the runner's, through the attenuator, server and UE contracts.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, Field, create_model, model_validator

from cellab.bus import AgentLost, AgentTimeout, Controller, OperationError
from cellab.contracts.core import ConfigureParams as CoreConfigureParams
from cellab.contracts.core import CoreClient
from cellab.contracts.enb import ConfigureParams as EnbConfigureParams
from cellab.contracts.enb import EnbClient, RadioOverrides, StatusResult
from cellab.errors import CellabError
from cellab.inputs import read_text
from cellab.inventory.lab_faults import InventoryFaults
from cellab.inventory.model import PROFILE_MAX_BYTES, Inventory
from cellab.records import Strict

ATTACH_TIMEOUT_S = 90.0  # phones need tens of seconds to find a restarted cell
ATTACH_POLL_S = 1.0
RADIO_PARAMS = tuple(RadioOverrides.model_fields)


def inventory_params_model(inventory: Inventory, attenuation: tuple[float, float, str] | None) -> type[BaseModel] | None:
    """The run parameters an inventory acts on: the eNB's radio parameters when it has an eNB agent, the
    attenuation in front of its UEs when it names an attenuator (limits: (min_db, max_db, where))."""
    fields: dict[str, Any] = {}
    if inventory.devices.enb:
        for name, info in RadioOverrides.model_fields.items():
            fields[name] = (info.annotation, Field(None, description=f"{info.description or name}: the eNB's, "
                                                                       "applied by its agent"))
    if attenuation is not None:
        low, high, where = attenuation
        fields["attenuation_db"] = (float | None, Field(None, ge=low, le=high, allow_inf_nan=False,
                                                        description=f"attenuation on {where}; null: unchanged"))
    if not fields:
        return None
    model = create_model("InventoryParams", __base__=RadioChecked, **fields)
    enb = inventory.devices.enb[0] if inventory.devices.enb else None
    model.enb_profile = enb.profile if enb is not None else None  # (`cellab schema` passes a stand-in eNB: None)
    return model


class RadioChecked(Strict):
    """Run parameters whose radio values go onto the eNB profile: the combination srsENB would refuse (an SR
    offset past the period, a carrier outside its band) is refused when the run is planned, naming the profile;
    the RAN room's rules decide, as its agent applies them (entry point `cellab.services: enb_overrides`)."""

    enb_profile: ClassVar[Path | None] = None

    @model_validator(mode="after")
    def _profile_takes_them(self) -> RadioChecked:
        radio = {k: getattr(self, k) for k in RADIO_PARAMS if getattr(self, k, None) is not None}
        if radio and self.enb_profile is not None:
            from cellab.contracts.registry import load

            problems = load("cellab.services", "enb_overrides", "eNB profile check")(self.enb_profile, radio)
            if problems:
                raise ValueError(f"eNB profile {self.enb_profile} with these radio parameters: " + "; ".join(problems))
        return self


class InventoryLab(InventoryFaults):
    def __init__(self, inventory: Inventory, controller: Controller, ue_agents: list[str], request_s: float = 30.0):
        self.inventory = inventory
        self.overrides = RadioOverrides()  # the run's radio parameters (an eNB restarted by a fault gets them)
        self.controller = controller
        self.ue_agents = ue_agents
        self.request_s = request_s
        self.enb = (EnbClient(controller, inventory.devices.enb[0].agent, request_s)
                    if inventory.devices.enb else None)
        self.core = (CoreClient(controller, inventory.devices.core[0].agent, request_s)
                     if inventory.devices.core else None)
        self.health: dict[str, Any] = {}
        self._ground_truth: dict[str, Any] | None = None
        # srsenb's JSON report reaches its agent seconds after its timestamp; phones' samples over adb ~1 s
        self.telemetry_lag_s = 3.5 if self.enb is not None else 1.0

    # --- before the first run ---------------------------------------------------------------------
    def prepare(self) -> None:
        """Every listed agent answers (versions and roles recorded); the core runs; the eNB has its profile."""
        for agent in self.inventory.agents:
            try:
                described = self.controller.request(agent.name, "describe", {}, timeout_s=self.request_s)  # built-in
            except (AgentLost, AgentTimeout, OperationError) as exc:
                raise CellabError(f"{self.inventory.name}: agent {agent.name} ({agent.role} on {agent.host}) failed "
                                  f"its health check: {exc}") from None
            if described.get("role") not in (agent.role, "generic"):
                raise CellabError(f"{self.inventory.name}: agent {agent.name} answers as role "
                                  f"{described.get('role')!r}, the inventory lists it as {agent.role!r}")
            self.health[agent.name] = {"role": agent.role, "host": agent.host, "version": described.get("version")}
        self.check_phones(prepare=True)
        if self.core is not None:
            self._start_core()
        if self.enb is not None:
            self._configure_enb(RadioOverrides())

    def check_phones(self, prepare: bool = False) -> None:
        """Each Android UE is the phone its inventory entry names, by serial and (when given) model (swapped
        serials would put one phone's attenuation on the other, silently); with `prepare`, each is made ready for the cell: Wi-Fi off, mobile
        data on, awake (a phone left on Wi-Fi would bypass the cell)."""
        for i, ue in enumerate(self.inventory.devices.ues):
            if ue.kind != "android":
                continue
            try:
                info = self.controller.request(ue.agent, "phone_info", {}, timeout_s=self.request_s)
                if prepare:
                    done = self.controller.request(ue.agent, "prepare", {"airplane_toggle": False},
                                                   timeout_s=max(self.request_s, 60.0))
                    self.health.setdefault(ue.agent, {})["prepared"] = done.get("steps")
            except (AgentLost, AgentTimeout, OperationError) as exc:
                raise CellabError(f"{self.inventory.name}: devices.ues[{i}] ({ue.name}): agent {ue.agent} could not "
                                  f"{'prepare' if prepare else 'describe'} its phone: {exc}") from None
            if ue.serial and info.get("serial") != ue.serial:
                raise CellabError(f"{self.inventory.name}: devices.ues[{i}] ({ue.name}) is phone {ue.serial}, but its "
                                  f"agent {ue.agent} drives phone {info.get('serial')} ({info.get('model')}): the "
                                  "serials are swapped or the phone was replaced; fix the inventory or the agent's "
                                  "--serial")
            if ue.model and info.get("model") != ue.model:
                raise CellabError(f"{self.inventory.name}: devices.ues[{i}] ({ue.name}) is a {ue.model}, but phone "
                                  f"{info.get('serial')} is a {info.get('model')}: the phone was replaced, or the "
                                  "inventory's model is wrong")

    def after_run(self) -> None:
        """After each run: the phones are still the ones the inventory names."""
        self.check_phones(prepare=False)

    def _start_core(self) -> None:
        entry = self.inventory.devices.core[0]
        if entry.profile is None:
            raise CellabError(f"{self.inventory.name}: devices.core[0] ({entry.name}) names no profile: the core "
                              "agent renders its configuration from one (core-config/examples/)")
        subscribers = read_text(entry.subscribers, PROFILE_MAX_BYTES) if entry.subscribers else None
        assert self.core is not None
        self.core.configure(CoreConfigureParams(profile_yaml=read_text(entry.profile, PROFILE_MAX_BYTES),
                                                flavour=entry.flavour, subscribers_csv=subscribers))
        status = self.core.start()
        if not status.ok:
            raise CellabError(f"{self.inventory.name}: core {entry.name} did not start: "
                              + "; ".join(status.problems or [f"{d.name}: {d.error}" for d in status.daemons
                                                              if not d.running]))
        self.health[entry.agent]["core"] = status.model_dump(mode="json")

    def _configure_enb(self, overrides: RadioOverrides) -> bool:
        """Apply the profile and overrides; True when srsenb restarted (and the UEs re-attached)."""
        entry = self.inventory.devices.enb[0]
        if entry.profile is None:
            raise CellabError(f"{self.inventory.name}: devices.enb[0] ({entry.name}) names no profile: the eNB agent "
                              "renders srsENB's files from one (ran-config/examples/)")
        assert self.enb is not None
        self.overrides = overrides
        result = self.enb.configure(self._enb_params(overrides))
        if result.restarted:
            self._ground_truth = None
            self._wait_for_attach()
        return result.restarted

    def _enb_params(self, overrides: RadioOverrides) -> EnbConfigureParams:
        entry = self.inventory.devices.enb[0]
        assert entry.profile is not None  # _configure_enb refused an eNB without one
        return EnbConfigureParams(profile_yaml=read_text(entry.profile, PROFILE_MAX_BYTES),
                                  profile_name=Path(entry.profile).name, overrides=overrides)

    def _wait_for_attach(self) -> StatusResult:
        """Every UE of the inventory attached (the eNB counts its connected RNTIs), or the run fails with the
        eNB's and the core's own reasons."""
        assert self.enb is not None
        wanted = len(self.inventory.devices.ues)
        deadline = time.monotonic() + ATTACH_TIMEOUT_S
        while True:
            status = self.enb.status()
            if status.state not in ("starting", "running"):
                raise CellabError(f"eNB agent {self.enb.agent}: srsenb is {status.state}"
                                  + (f": {status.error_line}" if status.error_line else ""))
            if len(status.connected_rntis) >= wanted:
                return status
            if time.monotonic() > deadline:
                reasons = ""
                if self.core is not None:
                    core = self.core.status()
                    reasons = "; core: " + ("; ".join(f"{f.daemon}: {f.line}" for f in core.findings
                                                       if f.kind != "attach_ok") or "no error in its logs")
                raise CellabError(f"{len(status.connected_rntis)} of {wanted} UEs attached within "
                                  f"{ATTACH_TIMEOUT_S:g} s of the eNB's restart{reasons}")
            time.sleep(ATTACH_POLL_S)

    # --- per run -----------------------------------------------------------------------------------
    def configure(self, params: dict[str, Any]) -> None:
        """The run's radio parameters to the eNB agent, every run: the agent restarts srsenb only when one that
        needs it changed, or when srsenb is not running (a restarted agent, a crash) — then the UEs re-attach.
        A core whose daemons stopped (a restarted core agent) is started again first."""
        overrides = RadioOverrides(**{k: params[k] for k in RADIO_PARAMS if params.get(k) is not None})
        if self.core is not None and not self.core.status().ok:
            self._start_core()
        if self.enb is None:
            if overrides.model_dump(exclude_none=True):
                raise CellabError(f"{self.inventory.name}: radio parameters need an eNB agent (devices.enb)")
            return
        self._configure_enb(overrides)

    def fault(self) -> str | None:
        """A crashed srsenb or a stopped core daemon, named when a run fails."""
        if self.enb is not None:
            status = self.enb.status()
            if status.state not in ("starting", "running"):
                return (f"eNB agent {self.enb.agent}: srsenb {status.state}"
                        + (f": {status.error_line}" if status.error_line else ""))
        if self.core is not None:
            status = self.core.status()
            if not status.ok:
                return f"core agent {self.core.agent}: " + "; ".join(status.problems or ["a daemon stopped"])
        return None

    def clock_mark(self) -> dict[str, float]:
        return {}

    def timing_faults(self) -> dict[str, Any]:
        return {}

    def stack_clock_excused(self) -> list[tuple[float, float, str]]:
        return []  # no stack clock of its own to excuse stalls on (EmbeddedLab.stack_clock_excused)

    def ground_truth(self, params: dict[str, Any]) -> dict[str, Any] | None:
        """The SR configuration the eNB signalled (RRC), once a UE attached."""
        if self.enb is None:
            return None
        truth = self.enb.status().ground_truth
        return truth.model_dump(mode="json") if truth is not None else None

    def collect(self, run_dir: Path) -> dict[str, Path]:
        path = run_dir / "lab-inventory.json"
        path.write_text(self.inventory.model_dump_json(indent=2))
        out = {"lab": path}
        if self.enb is not None:
            status = run_dir / "enb-status.json"
            status.write_text(self.enb.status().model_dump_json(indent=2))
            out["enb-status"] = status
        if self.core is not None:
            status = run_dir / "core-status.json"
            status.write_text(json.dumps(self.core.status().model_dump(mode="json"), indent=2))
            out["core-status"] = status
        return out

    def down(self) -> None:
        """The eNB stops transmitting and the core stops; failures are reported, not raised (closing)."""
        for stop in ((self.enb.safe_state if self.enb else None), (self.core.stop if self.core else None)):
            if stop is None:
                continue
            try:
                stop()
            except (AgentLost, AgentTimeout, OperationError, CellabError):
                pass
