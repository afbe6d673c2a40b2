"""The `options` an attenuator entry may carry, each with its type and range: a wrong one is refused when the
inventory is read, naming the option and what it allows, not met as a traceback when the driver opens the device.
The attenuator room's drivers read exactly these (attenuator/drivers/, attenuator/driver.py)."""

from __future__ import annotations

import math
import re

BAUD_RATES = (1200, 2400, 4800, 9600, 19200, 38400, 57600, 115200, 230400)
_CELL_IDS = re.compile(r"^\s*\d{1,3}(\s*,\s*\d{1,3})*\s*$")
_BANK_MODEL = re.compile(r"^bank\d{1,2}_[xy]_model$")


def _seconds(value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or not 0 <= value <= 60:
        return "a number of seconds in 0..60"
    return None


def _positive_db(value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or not 0 < value <= 10:
        return "a number of dB in (0, 10]"
    return None


def _baudrate(value: object) -> str | None:
    return None if type(value) is int and value in BAUD_RATES else "one of " + ", ".join(map(str, BAUD_RATES))


def _flag(value: object) -> str | None:
    return None if isinstance(value, bool) else "true or false"


def _text(value: object) -> str | None:
    return None if isinstance(value, str) and value.isprintable() and len(value) <= 256 else "printable text (<= 256)"


def _cell_ids(value: object) -> str | None:
    ok = isinstance(value, str) and _CELL_IDS.fullmatch(value) and all(int(x) <= 255 for x in value.split(","))
    return None if ok or (type(value) is int and 0 <= value <= 255) else "cell ids 0..255, comma-separated"


OPTIONS = {
    "baudrate": _baudrate, "check_range": _flag, "safe_retry_s": _seconds, "min_interval_s": _seconds,
    "session_wait_s": _seconds, "banner_timeout_s": _seconds, "legacy_unit_db": _positive_db,
    "cell_ids": _cell_ids, "user": _text, "password": _text, "library": _text, "visa_backend": _text,
}


def option_problem(key: str, value: object) -> tuple[str, list[str]] | None:
    """(what is wrong, what is allowed) for one option, or None when it is fine."""
    check = _text if _BANK_MODEL.fullmatch(key) else OPTIONS.get(key)
    if check is None:
        return f"unknown option {key!r}", [*OPTIONS, "bankN_x_model", "bankN_y_model"]
    wanted = check(value)
    return None if wanted is None else (f"{value!r} ({type(value).__name__}) is refused", [wanted])
