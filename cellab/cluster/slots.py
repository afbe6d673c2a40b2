"""How many lab instances one host may offer (`--slots`): checked before the cluster's heavy modules load, so a bad
count is refused at once."""

from __future__ import annotations

from cellab.errors import InputError

MAX_SLOTS = 64


def check_slots(slots: int | None, command: str = "cellab run") -> int | None:
    if slots is not None and (isinstance(slots, bool) or not 1 <= slots <= MAX_SLOTS):
        raise InputError(command, "--slots", f"{slots!r} lab instances", [f"1..{MAX_SLOTS}"])
    return slots
