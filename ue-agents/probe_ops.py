"""Bus operations of the receiver probe, as a mixin for the virtual UE agent (and later the Android one).

    class VirtualUEAgent(ProbeOps, Agent): ...     # the lead mixes it in; self.netns = the UE namespace

Operations take typed, validated parameters only; the probe runs from an argv list inside the agent's
namespace, and every file it writes lands in self.artifact_dir under the caller's tag.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cellab.bus import OperationFailed, operation
from cellab.contracts.ue import TAG_PATTERN, FetchRequest, FetchResult, ProbeFetchParams
from cellab.errors import CellabError

from .probe_runner import AnalyzeRequest, ProbeResult, run_analyze, run_fetch



class AnalyzePcapParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="a capture in the agent's artifact directory (relative name)")
    tag: str = Field("analyze", pattern=TAG_PATTERN)

    @field_validator("name")
    @classmethod
    def _inside(cls, value: str) -> str:
        path = PurePosixPath(value)
        if path.is_absolute() or ".." in path.parts or not value or not re.fullmatch(r"[A-Za-z0-9_./-]{1,200}", value):
            raise ValueError("must be a relative path inside the artifact directory (no '/' prefix, no '..')")
        return value


def _result(result: ProbeResult, artifact_dir: Path) -> FetchResult:
    names = sorted(str(p.relative_to(artifact_dir)) for p in result.artifacts.values())
    return FetchResult(status=result.status, artifacts=names, summary=result.summary)


def _errors(result: ProbeResult) -> str:
    return "; ".join(result.summary.get("errors") or ["unknown error"])


class ProbeOps:
    """fetch / analyze_pcap. Needs from the agent: artifact_dir (Path), and netns (str | None)."""

    artifact_dir: Path
    netns: str | None

    def _probe_register(self, proc: subprocess.Popen) -> None:
        with self._probe_lock():
            self.__dict__.setdefault("_probe_procs", set()).add(proc)

    def _probe_lock(self) -> threading.Lock:
        return self.__dict__.setdefault("_probe_lock_obj", threading.Lock())

    def _probe_forget_finished(self) -> None:
        with self._probe_lock():
            procs = self.__dict__.setdefault("_probe_procs", set())
            for proc in [p for p in procs if p.poll() is not None]:
                procs.discard(proc)

    @operation
    def fetch(self, params: ProbeFetchParams) -> FetchResult:
        """Run cellab-probe fetch in this UE; returns its summary and the artifact names.

        A run that got no data at all (unreachable server, refused flow) fails with the probe's
        errors; its summary stays in the artifact directory. Partial runs return status "partial".
        """
        request = FetchRequest(**params.model_dump(exclude={"tag"}))
        result = self._probe_call(lambda: run_fetch(request, self.artifact_dir, params.tag,
                                                    netns=getattr(self, "netns", None),
                                                    on_start=self._probe_register))
        if result.status == "error":
            raise OperationFailed(f"probe fetch failed: {_errors(result)} (summary: {result.summary_path.name})")
        return _result(result, self.artifact_dir)

    @operation
    def analyze_pcap(self, params: AnalyzePcapParams) -> FetchResult:
        """The probe's estimators on a capture already in the artifact directory."""
        root = self.artifact_dir.resolve()
        path = (root / params.name).resolve()
        if root not in path.parents or not path.is_file():
            raise OperationFailed(f"{params.name}: no such capture in the artifact directory")
        result = self._probe_call(lambda: run_analyze(AnalyzeRequest(pcap=path), self.artifact_dir, params.tag,
                                                      on_start=self._probe_register))
        if result.status == "error":
            raise OperationFailed(f"analyze failed: {_errors(result)}")
        return _result(result, self.artifact_dir)

    def _probe_call(self, call: Callable[[], ProbeResult]) -> ProbeResult:
        """One probe invocation: its input errors become the operation's failure; the registry is tidied."""
        try:
            return call()
        except CellabError as exc:
            raise OperationFailed(str(exc)) from None
        finally:
            self._probe_forget_finished()

    def probe_safe_state(self) -> None:
        """Stop running probes (SIGTERM: the probe writes its partial summary and exits)."""
        with self._probe_lock():
            procs = list(self.__dict__.get("_probe_procs", ()))
        for proc in procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass

    def safe_state(self) -> None:
        self.probe_safe_state()
        parent = super()
        if hasattr(parent, "safe_state"):
            parent.safe_state()  # type: ignore[misc]
