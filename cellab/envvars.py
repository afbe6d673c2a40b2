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


MAX_BYTES = 1 << 50


def env_bytes(name: str, default: int, minimum: int = 1) -> int:
    """$name as a byte count (default when unset or empty): 0 (no bound) or a whole number in [minimum, 2**50]."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    value = int(raw) if raw.isascii() and raw.isdigit() else -1
    if value != 0 and not minimum <= value <= MAX_BYTES:
        raise InputError(f"${name}", "", f"{raw[:40]!r} is not a number of bytes",
                         ["0 (no bound)", f"{minimum}..{MAX_BYTES}"])
    return value


LAB_LOG_MAX_ENV = "CELLAB_LAB_LOG_MAX_BYTES"
LAB_LOG_MAX_DEFAULT_BYTES = 256 << 20
LAB_LOG_MIN_BYTES = 65536  # the virtual cell's floor (emulator/args.c): two segments of a header and a 16-UE TTI


def lab_log_max_bytes() -> int:
    """The bound of each long-lived log an embedded lab writes (docs/log-bounds.md): $CELLAB_LAB_LOG_MAX_BYTES
    (0: none), else 256 MiB."""
    return env_bytes(LAB_LOG_MAX_ENV, LAB_LOG_MAX_DEFAULT_BYTES, LAB_LOG_MIN_BYTES)
