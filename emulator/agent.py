"""Bus operations of the virtual lab: a mixin the lead mixes into the room's Agent class.

    class VirtualLabAgent(VirtualLabOps, Agent): ...

The agent owns one VirtualLab (namespaces + cell); the virtual attenuator is its set_attenuation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cellab.bus import OperationFailed, operation
from cellab.errors import CellabError, InputErrors

from .vlab import VirtualLab


class LabUpParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    prefix: str = Field("clv", pattern=r"^[a-z][a-z0-9]{1,11}$")
    params: dict[str, Any] = Field(default_factory=dict)
    ues: int | None = Field(None, ge=1, le=16)  # UE count (the cell parameter n_ues)


class ConfigureParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    params: dict[str, Any]


class SetAttenuationParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ue: int = Field(0, ge=0, le=15)
    attenuation_db: float = Field(ge=0, le=200)


class UeParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ue: int = Field(0, ge=0, le=15)


class VirtualLabOps:
    """lab_up, lab_configure, lab_down, set_attenuation, get_attenuation, cell_stats, collect_tti_log."""

    _vlab: VirtualLab | None = None
    artifact_dir: Path

    def _lab(self) -> VirtualLab:
        if self._vlab is None:
            raise OperationFailed("the virtual lab is not up (lab_up first)")
        return self._vlab

    @operation
    def lab_up(self, params: LabUpParams) -> dict:
        try:
            self._vlab = VirtualLab(params.prefix, params.params, ues=params.ues)
            topo = self._vlab.up()
        except (CellabError, InputErrors) as exc:
            raise OperationFailed(str(exc)) from None
        return {"server": topo.server.__dict__, "ues": [u.__dict__ for u in topo.ues], **topo.extra}

    @operation
    def lab_configure(self, params: ConfigureParams) -> dict:
        try:
            self._lab().configure(params.params)
        except (CellabError, InputErrors) as exc:
            raise OperationFailed(str(exc)) from None
        return {"ok": True}

    @operation
    def lab_down(self) -> dict:
        if self._vlab is not None:
            self._vlab.down()
            self._vlab = None
        return {"ok": True}

    @operation
    def set_attenuation(self, params: SetAttenuationParams) -> dict:
        try:
            with self._lab().control() as ctl:
                return ctl.set_attenuation(params.ue, params.attenuation_db)
        except CellabError as exc:
            raise OperationFailed(str(exc)) from None

    @operation
    def get_attenuation(self, params: UeParams) -> dict:
        try:
            with self._lab().control() as ctl:
                return ctl.get_attenuation(params.ue)
        except CellabError as exc:
            raise OperationFailed(str(exc)) from None

    @operation
    def cell_stats(self) -> dict:
        try:
            with self._lab().control() as ctl:
                return ctl.stats()
        except CellabError as exc:
            raise OperationFailed(str(exc)) from None

    @operation
    def collect_tti_log(self) -> dict:
        """Copy the TTI log (and cell log) into artifact_dir; returns the file names to fetch."""
        files = self._lab().collect(self.artifact_dir)
        return {name: path.name for name, path in files.items()}

    def safe_state(self) -> None:
        # the safe state of a virtual cell: nothing left running or configured
        if self._vlab is not None:
            self._vlab.down()
            self._vlab = None


__all__ = ["VirtualLabOps"]
