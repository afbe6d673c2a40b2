"""The server agent's operations (mixed into ServerAgent by the lead): load, configure and unload the
BPF modules, and run the traffic sender whose logs become the run's artifacts.

An agent that serves a network namespace (a lab instance's server namespace, its `--netns`) keeps its
modules to that namespace: its loads are held by the namespace (another instance unloading the same
module does not pull it from under this one's flows), every per-namespace parameter it sets applies to its
namespace's flows only, and its listing shows the values its flows see. Several instances on one host then
need no change in the runner. An agent without a namespace holds modules as its process and sets
parameters host-wide, as before."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any


from cellab.bus import OperationFailed, operation
from cellab.labs.feed import FileFeed, flow_sample
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
            # loaded: module -> the namespace that holds it for this agent (None: the agent's process);
            # senders: run_id -> Sender (one per UE of a run); feeds: run_id -> its flows' RTT as telemetry
            state = {"loaded": {}, "senders": {}, "feeds": {}}
            self._server_modules_state = state
        return state

    @operation
    def load_modules(self, params: LoadModulesParams) -> LoadModulesResult:
        state = self._sm_state()
        netns = params.netns or self._agent_netns()
        try:
            before = set(modules.loaded())
            modules.load(params.names, netns=netns, dev=params.dev, source="load_modules")
        except CellabError as exc:
            raise OperationFailed(str(exc)) from None
        for name in params.names:
            # a congestion control is held for this agent whoever registered it (unload lets go of that hold
            # only); a tc program is this agent's to detach only if it attached it
            if name in modules.CC_MODULES:
                state["loaded"].setdefault(name, netns)
            elif name not in before:
                state["loaded"].setdefault(name, None)
        return LoadModulesResult(loaded=list(params.names), available_cc=modules.available_congestion_controls())

    def _release(self, names: list[str]) -> None:
        held: dict[str, str | None] = self._sm_state()["loaded"]
        for netns in sorted({held.get(n) for n in names}, key=lambda ns: ns or ""):
            group = [n for n in names if held.get(n) == netns]
            modules.unload(group, netns=netns, source="unload_modules")
        for name in names:
            held.pop(name, None)

    @operation
    def unload_modules(self, params: UnloadModulesParams) -> UnloadModulesResult:
        state = self._sm_state()
        names = list(params.names) if params.names is not None else list(state["loaded"])
        if not names:
            return UnloadModulesResult(unloaded=[])
        try:
            self._release(names)
        except CellabError as exc:
            raise OperationFailed(str(exc)) from None
        return UnloadModulesResult(unloaded=names)

    @operation
    def list_modules(self) -> ListModulesResult:
        try:
            try:
                described = modules.describe(netns=self._agent_netns())  # the values this namespace's flows see
            except modules.ModuleError:  # the namespace is not there (yet): the host-wide values
                described = modules.describe()
        except CellabError as exc:
            raise OperationFailed(str(exc)) from None
        return ListModulesResult(modules=list(described.values()),
                                 available_cc=modules.available_congestion_controls())

    @operation
    def set_module_param(self, params: SetModuleParamParams) -> SetModuleParamResult:
        netns = params.netns
        try:
            if netns is None and self._agent_netns() and \
                    modules.param_scope(params.module, params.param) == "netns":
                netns = self._agent_netns()  # this instance's flows only; a host-scoped one stays host-wide
            modules.set_param(params.module, params.param, params.value, dst=params.dst, netns=netns,
                              source="set_module_param")
        except CellabError as exc:
            raise OperationFailed(str(exc)) from None
        return SetModuleParamResult(module=params.module, param=params.param, value=params.value, dst=params.dst,
                                    netns=netns)

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
        state["feeds"][params.run_id] = FileFeed(lambda: sorted(log_dir.glob("flow-*.jsonl")), flow_sample,
                                                 self.publish, "flow").start()  # the live view's RTT
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
        feed = self._sm_state()["feeds"].pop(run_id, None)
        if feed is not None:
            feed.stop()
        info = sender.stop()
        base = Path(self.artifact_dir)
        files = [str(p.relative_to(base)) for p in sender.log_files()]
        return StopSenderResult(run_id=run_id, files=files, flows=len(sender.summaries()), stopped=info)

    def safe_state(self) -> None:
        """Stop the sender and let go of what this agent loaded (a module goes when no other lab instance
        holds it; established flows keep their CC). Its namespace's parameters stay while the module does
        (they go with the namespace): an agent back after a lost controller finds them as the runner set them."""
        state = self._sm_state()
        senders, state["senders"] = list(state["senders"].values()), {}
        for feed in state["feeds"].values():
            feed.stop()
        state["feeds"] = {}
        for sender in senders:
            try:
                sender.stop()
            except CellabError:
                pass
        try:
            if state["loaded"]:
                self._release(list(state["loaded"]))
            if self._agent_netns():
                # whatever this namespace still holds (a restarted agent's predecessor's loads)
                modules.unload(None, netns=self._agent_netns())
        except CellabError:
            pass
        parent = super()
        if hasattr(parent, "safe_state"):
            parent.safe_state()  # type: ignore[misc]
