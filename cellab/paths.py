"""Where the project's built programs and run records live."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from cellab.errors import CellabError

PROJECT_ROOT = Path(__file__).resolve().parent.parent
BUILD_BIN = PROJECT_ROOT / "build" / "bin"
RUNS_OUT = PROJECT_ROOT / "runs" / "out"


def find_program(name: str) -> Path:
    """A program built by `make build` ($CELLAB_BIN first), else one on PATH."""
    for folder in filter(None, [os.environ.get("CELLAB_BIN"), str(BUILD_BIN)]):
        candidate = Path(folder) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(name)
    if found:
        return Path(found)
    raise CellabError(f"program {name!r} not found in {BUILD_BIN} or PATH: run `make build`")
