"""What every role's agent says about itself: the read-only `self_check` operation's result.

Each role contract has a `self_check` operation (its params are the role's: the ports a server must serve, the
channels an attenuator must read, ...) that changes nothing on its host or device and answers with one line per
thing its role needs: the binaries, the devices, the host clock. `cellab doctor --lab` turns the lines into its
go/no-go table (cellab/inventory/doctor.py). The helpers below are the checks every role shares.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
from pathlib import Path
from typing import Literal

from pydantic import Field

from cellab.contracts.base import Model

CheckStatus = Literal["ok", "warn", "fail"]

# adjtimex(2) returns TIME_ERROR when the kernel's clock is not synchronised (STA_UNSYNC: no NTP daemon has
# disciplined it lately); `timedatectl`'s "System clock synchronized" reads the same flag.
TIME_ERROR = 5
TIMEX_BYTES = 512  # larger than struct timex on every Linux ABI; modes 0 (its first field) only reads
TIMEX_MAXERROR_OFFSET = 3 * ctypes.sizeof(ctypes.c_long)  # modes (padded), offset, freq, then maxerror (us)


class CheckItem(Model):
    check: str = Field(max_length=80, description="what was checked, e.g. 'srsenb', 'wifi', 'channel 3'")
    status: CheckStatus
    detail: str = Field(max_length=2000, description="what was found, and what to do when it is not ok")


class SelfCheckResult(Model):
    items: list[CheckItem] = Field(max_length=200)


def ok(check: str, detail: str) -> CheckItem:
    return CheckItem(check=check, status="ok", detail=detail)


def warn(check: str, detail: str) -> CheckItem:
    return CheckItem(check=check, status="warn", detail=detail)


def fail(check: str, detail: str) -> CheckItem:
    return CheckItem(check=check, status="fail", detail=detail)


def clock_sync_check() -> CheckItem:
    """Whether this host's clock is synchronised (the kernel's flag, set by chrony/ntpd/timesyncd), read-only."""
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return warn("clock sync", "cannot read the kernel's clock state (no libc found)")
    buffer = ctypes.create_string_buffer(TIMEX_BYTES)  # zeroed: modes 0, nothing is adjusted
    try:
        state = ctypes.CDLL(libc_name, use_errno=True).adjtimex(buffer)
    except (OSError, AttributeError) as exc:
        return warn("clock sync", f"cannot read the kernel's clock state: {exc}")
    if state < 0:
        return warn("clock sync", f"adjtimex failed: {os.strerror(ctypes.get_errno())}")
    maxerror_us = ctypes.c_long.from_buffer(buffer, TIMEX_MAXERROR_OFFSET).value
    if state == TIME_ERROR:
        return warn("clock sync", "this host's clock is not synchronised: install chrony and follow the lab's "
                                  "time source (docs/real-lab.md, Clocks)")
    return ok("clock sync", f"synchronised (kernel's maximum error {maxerror_us / 1000:g} ms)")


def program_check(check: str, path: str | Path | None, why: str) -> CheckItem:
    """A program the role runs: an executable path (given or on PATH), or what to do."""
    found = str(path) if path and Path(path).is_file() and os.access(path, os.X_OK) else None
    if found is None and path is None:
        found = shutil.which(check)
    if found:
        return ok(check, found)
    where = f" ({path} is not an executable)" if path else " (not on PATH)"
    return fail(check, f"{why}: not found{where}")
