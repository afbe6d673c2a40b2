"""The shapes a campaign's plan and result folder share, with no dependency on how they are made: a planned
run, a strict model base, and atomic file writes. The campaign loader, the store, the traces and the
inventory lab import these from here, so none of them imports another to get them."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PlannedRun(BaseModel):
    index: int
    run_id: str
    repeat: int
    factors: dict[str, Any]
    params: dict[str, Any]  # factors + fixed + defaults: everything the run is configured with


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write then rename: a reader sees the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode() if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, obj: Any) -> None:
    write_atomic(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")
