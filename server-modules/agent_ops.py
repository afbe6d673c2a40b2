"""The server agent's operations (mixed into ServerAgent by the lead): load, configure and unload the
BPF modules, and run the traffic sender whose logs become the run's artifacts."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any


from cellab.bus import OperationFailed, operation
from cellab.contracts.server import (
    ListModulesResult,
    LoadModulesParams,
    LoadModulesResult,
    SenderConfig,
    SetModuleParamParams,
    SetModuleParamResult,
    StartSenderParams,
    StartSenderResult,
    StopSenderParams,
    StopSenderResult,
    UnloadModulesParams,
    UnloadModulesResult,
)
from cellab.errors import CellabError

from . import modules
from .sender import Sender

class ModuleOps:
    """Mixin for the server agent (an Agent subclass provides artifact_dir and safe_state)."""

    artifact_dir: Path

    def _agent_netns(self) -> str | None:
        """The namespace the agent serves (ServerAgent's `netns`), the default for the sender and tc."""
        return getattr(self, "netns", None)

    def _sm_state(self) -> dict[str, Any]:
        state = getattr(self, "_server_modules_state", None)
        if state is None:
            state = {"loaded": [], "senders": {}}  # senders: run_id -> Sender (one per UE of a run)
            self._server_modules_state = state
        return state

    @operation
    def load_modules(self, params: LoadModulesParams) -> LoadModulesResult:
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
        return LoadModulesResult(loaded=list(params.names), available_cc=modules.available_congestion_controls())

    @operation
    def unload_modules(self, params: UnloadModulesParams) -> UnloadModulesResult:
        state = self._sm_state()
        names = list(params.names) if params.names is not None else list(state["loaded"])
        if not names:
            return UnloadModulesResult(unloaded=[])
        try:
            modules.unload(names, source="unload_modules")
        except CellabError as exc:
            raise OperationFailed(str(exc)) from None
        state["loaded"] = [n for n in state["loaded"] if n not in names]
        return UnloadModulesResult(unloaded=names)

    @operation
    def list_modules(self) -> ListModulesResult:
        try:
            described = modules.describe()
        except CellabError as exc:
            raise OperationFailed(str(exc)) from None
        return ListModulesResult(modules=list(described.values()),
                                 available_cc=modules.available_congestion_controls())

    @operation
    def set_module_param(self, params: SetModuleParamParams) -> SetModuleParamResult:
        try:
            modules.set_param(params.module, params.param, params.value, dst=params.dst, source="set_module_param")
        except CellabError as exc:
            raise OperationFailed(str(exc)) from None
        return SetModuleParamResult(module=params.module, param=params.param, value=params.value, dst=params.dst)

    @operation
    def start_sender(self, params: StartSenderParams) -> StartSenderResult:
        state = self._sm_state()
        if params.run_id in state["senders"]:
            raise OperationFailed(f"sender {params.run_id!r} is already running: stop_sender first")
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
        state["senders"][params.run_id] = sender
        return StartSenderResult(port=port, log_dir=params.run_id)

    @operation
    def stop_sender(self, params: StopSenderParams) -> StopSenderResult:
        """Stop a sender; returns its log files, relative to the artifact dir (fetch them from there)."""
        senders: dict[str, Sender] = self._sm_state()["senders"]
        if not senders:
            raise OperationFailed("no sender is running")
        run_id = params.run_id
        if run_id is None:
            if len(senders) > 1:
                raise OperationFailed("several senders run: name one", field="params.run_id", allowed=sorted(senders))
            run_id = next(iter(senders))
        if run_id not in senders:
            raise OperationFailed(f"sender {run_id!r} is not running", field="params.run_id", allowed=sorted(senders))
        sender = senders.pop(run_id)
        info = sender.stop()
        base = Path(self.artifact_dir)
        files = [str(p.relative_to(base)) for p in sender.log_files()]
        return StopSenderResult(run_id=run_id, files=files, flows=len(sender.summaries()), stopped=info)

    def safe_state(self) -> None:
        """Stop the sender and unload what this agent loaded (established flows keep their CC)."""
        state = self._sm_state()
        senders, state["senders"] = list(state["senders"].values()), {}
        for sender in senders:
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
