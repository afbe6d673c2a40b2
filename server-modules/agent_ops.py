"""The server agent's operations (mixed into ServerAgent by the lead): load, configure and unload the
BPF modules, and run the traffic sender whose logs become the run's artifacts."""

from __future__ import annotations

import ipaddress
import shutil
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cellab.bus import OperationFailed, operation
from cellab.errors import CellabError

from . import modules
from .sender import Sender, SenderConfig

ModuleName = Literal["c2tcp", "scubic", "exll", "cubic_qarr", "cubic_barr", "or_ingress", "burst_drop"]
_RUN_ID_RE = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class LoadModulesParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    names: list[ModuleName] = Field(min_length=1, max_length=8)
    netns: str | None = Field(None, pattern=r"^[a-z][a-z0-9-]{0,30}$", description="tc modules: namespace of dev")
    dev: str | None = Field(None, pattern=r"^[A-Za-z0-9_.-]{1,15}$", description="tc modules: interface")


class UnloadModulesParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    names: list[ModuleName] | None = Field(None, description="None: every module this agent loaded")


class SetModuleParamParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    module: ModuleName
    param: str = Field(pattern=r"^[a-z_]{1,32}$")
    value: float
    dst: str | None = Field(None, description="c2tcp target_ms only: destination prefix (CIDR)")

    @field_validator("dst")
    @classmethod
    def _cidr(cls, v: str | None) -> str | None:
        if v is not None:
            ipaddress.ip_network(v, strict=False)  # ValueError names the bad text
        return v


class StartSenderParams(SenderConfig):
    model_config = ConfigDict(extra="forbid")

    run_id: str = Field("sender", pattern=_RUN_ID_RE, description="log folder under the artifact dir")


class ModuleOps:
    """Mixin for the server agent (an Agent subclass provides artifact_dir and safe_state)."""

    artifact_dir: Path

    def _agent_netns(self) -> str | None:
        """The namespace the agent serves (ServerAgent's `netns`), the default for the sender and tc."""
        return getattr(self, "netns", None)

    def _sm_state(self) -> dict[str, Any]:
        state = getattr(self, "_server_modules_state", None)
        if state is None:
            state = {"loaded": [], "sender": None}
            self._server_modules_state = state
        return state

    @operation
    def load_modules(self, params: LoadModulesParams) -> dict:
        state = self._sm_state()
        try:
            before = set(modules.loaded())
            modules.load(params.names, netns=params.netns or self._agent_netns(), dev=params.dev,
                         source="load_modules")
        except CellabError as exc:
            raise OperationFailed(str(exc)) from None
        for name in params.names:
            # only what this agent registered is its to unload (safe_state, unload_modules without names)
            if name not in state["loaded"] and name not in before:
                state["loaded"].append(name)
        return {"loaded": list(params.names), "available_cc": modules.available_congestion_controls()}

    @operation
    def unload_modules(self, params: UnloadModulesParams) -> dict:
        state = self._sm_state()
        names = list(params.names) if params.names is not None else list(state["loaded"])
        if not names:
            return {"unloaded": []}
        try:
            modules.unload(names, source="unload_modules")
        except CellabError as exc:
            raise OperationFailed(str(exc)) from None
        state["loaded"] = [n for n in state["loaded"] if n not in names]
        return {"unloaded": names}

    @operation
    def list_modules(self) -> dict:
        try:
            described = modules.describe()
        except CellabError as exc:
            raise OperationFailed(str(exc)) from None
        return {"modules": [m.model_dump() for m in described.values()],
                "available_cc": modules.available_congestion_controls()}

    @operation
    def set_module_param(self, params: SetModuleParamParams) -> dict:
        try:
            modules.set_param(params.module, params.param, params.value, dst=params.dst, source="set_module_param")
        except CellabError as exc:
            raise OperationFailed(str(exc)) from None
        return {"module": params.module, "param": params.param, "value": params.value, "dst": params.dst}

    @operation
    def start_sender(self, params: StartSenderParams) -> dict:
        state = self._sm_state()
        if state["sender"] is not None:
            raise OperationFailed("the sender is already running: stop_sender first")
        log_dir = Path(self.artifact_dir) / params.run_id
        if log_dir.exists():
            raise OperationFailed(f"run_id {params.run_id!r} already has logs in the artifact dir; pick a new one")
        config = SenderConfig(**params.model_dump(exclude={"run_id"}))
        if config.netns is None and self._agent_netns():
            config = config.model_copy(update={"netns": self._agent_netns()})
        sender = Sender(config, log_dir)
        try:
            port = sender.start()
        except CellabError as exc:
            shutil.rmtree(log_dir, ignore_errors=True)
            raise OperationFailed(str(exc)) from None
        state["sender"] = sender
        return {"port": port, "log_dir": params.run_id}

    @operation
    def stop_sender(self) -> dict:
        """Stop the sender; returns its log files, relative to the artifact dir (fetch them from there)."""
        state = self._sm_state()
        sender: Sender | None = state["sender"]
        if sender is None:
            raise OperationFailed("the sender is not running")
        state["sender"] = None
        info = sender.stop()
        base = Path(self.artifact_dir)
        files = [str(p.relative_to(base)) for p in sender.log_files()]
        return {"files": files, "flows": len(sender.summaries()), "stopped": info}

    def safe_state(self) -> None:
        """Stop the sender and unload what this agent loaded (established flows keep their CC)."""
        state = self._sm_state()
        sender = state["sender"]
        state["sender"] = None
        if sender is not None:
            try:
                sender.stop()
            except CellabError:
                pass
        if state["loaded"]:
            try:
                modules.unload(list(state["loaded"]))
                state["loaded"] = []
            except CellabError:
                pass
        parent = super()
        if hasattr(parent, "safe_state"):
            parent.safe_state()  # type: ignore[misc]
