"""The operations every agent has: ping, clock, describe, list_artifacts, read_artifact. They only look at
memory or read one bounded chunk, so they run on the I/O thread itself (inline), even while a serial
operation runs. And `provenance`: what the agent runs (its cellab, the host's kernel, its role's programs by
hash and version), concurrent, since hashing a binary the first time reads it whole."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cellab.bus import wire
from cellab.inputs import INT64_MAX
from cellab.bus.errors import InvalidParams, OperationFailed
from cellab.bus.operation import BoundOperation, operation
from cellab.software import host_record


class ReadArtifactParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=4096)
    offset_bytes: int = Field(0, ge=0, le=INT64_MAX, description="a file offset (off_t): 0..2**63-1")
    length_bytes: int = Field(wire.DEFAULT_CHUNK_BYTES, gt=0, le=wire.MAX_CHUNK_BYTES)

    @field_validator("name")
    @classmethod
    def _relative_inside(cls, value: str) -> str:
        # Cheap lexical checks; symlinks are checked against the resolved path in the operation.
        if "\0" in value or value.startswith("/") or ".." in Path(value).parts:
            raise ValueError("must be a relative path inside artifact_dir (no '/' prefix, no '..')")
        return value


@dataclass(frozen=True)
class RawReply:
    """An operation result sent as raw bytes, with a small JSON meta in the header."""

    meta: dict[str, Any]
    data: bytes


class BuiltinOps:
    """Mixed into Agent."""

    name: str
    role: str
    version: str
    artifact_dir: Path
    _clock: Callable[[], float]
    _ops: dict[str, BoundOperation]

    @operation(_inline=True)
    def ping(self) -> dict:
        return {"agent": self.name, "role": self.role}

    @operation(_inline=True)
    def clock(self) -> dict:
        return {"t_s": self._clock()}

    @operation(_inline=True)
    def describe(self) -> dict:
        return {"name": self.name, "role": self.role, "version": self.version,
                "operations": [{"name": op.name, "concurrent": op.spec.concurrent, "params_schema": op.schema()}
                               for op in sorted(self._ops.values(), key=lambda o: o.name)]}

    @operation(concurrent=True)
    def provenance(self) -> dict:
        """This agent's cellab and host (cellab.software.host_record) and its role's software (software_report)."""
        return {"agent": self.name, "role": self.role, **host_record(), "software": self.software_report()}

    def software_report(self) -> dict[str, Any]:
        """The programs this agent's role runs, by sha256 and printed version, and what else decides its
        behaviour (a server's loaded BPF programs, its sysctls): each agent class says its own."""
        return {}

    @operation(_inline=True)
    def list_artifacts(self) -> dict:
        root = self.artifact_dir.resolve()
        items = []
        for path in sorted(root.rglob("*")):
            if path.is_file() and not path.is_symlink():
                st = path.stat()
                items.append({"name": str(path.relative_to(root)), "size_bytes": st.st_size, "mtime_s": st.st_mtime})
        return {"artifacts": items}

    @operation(_inline=True)
    def read_artifact(self, params: ReadArtifactParams) -> RawReply:
        root = self.artifact_dir.resolve()
        try:
            path = (root / params.name).resolve()
        except (RuntimeError, OSError) as exc:  # a link loop (RuntimeError before Python 3.13), a name too long
            raise InvalidParams(f"{params.name!r} cannot be resolved: a symbolic link loop or an unreadable name "
                                f"({exc})", field="params.name") from None
        if not path.is_relative_to(root):
            raise InvalidParams("resolves outside artifact_dir", field="params.name")
        if not path.is_file():
            raise OperationFailed(f"no artifact {params.name!r}", field="params.name",
                                  allowed=[a["name"] for a in self.list_artifacts()["artifacts"]][:20])
        with path.open("rb") as src:
            size = os.fstat(src.fileno()).st_size
            data = b""
            if params.offset_bytes < size:  # past the end: nothing to read (a seek there may fail on some file systems)
                src.seek(params.offset_bytes)
                data = src.read(params.length_bytes)
        return RawReply({"size_bytes": size, "offset_bytes": params.offset_bytes,
                         "eof": params.offset_bytes + len(data) >= size}, data)
