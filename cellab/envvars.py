"""Settings read from the environment (waits and timeouts tests and labs shorten or lengthen): read when used,
so a bad value is an error naming the variable, not a traceback at import."""

from __future__ import annotations

import math
import os

from cellab.errors import InputError

MAX_SECONDS = 86_400.0


def env_seconds(name: str, default: float, minimum: float = 0.0) -> float:
    """$name as seconds (default when unset or empty); refused unless a finite number in [minimum, one day]."""
    raw = os.environ.get(name, "")
    if not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and minimum <= value <= MAX_SECONDS):
        raise InputError(f"${name}", "", f"{raw[:40]!r} is not a number of seconds",
                         [f"{minimum:g}..{MAX_SECONDS:g}"])
    return value
