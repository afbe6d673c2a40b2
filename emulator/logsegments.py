"""The cell's capped logs joined back into one file (emulator/logcap.c): a log capped at N bytes is PATH (the
current segment) and PATH.1 (the one before), each at most N/2 bytes (with its own header, but cell.log's lines).
A run's collect joins them so that its window is whole when it fits in the bound: the TTI log's records name
their TTI, a clock segment's header its first record (`first_tti`), cell.log rotates between whole lines.

Current first, then the older: a rotation in between shows as the same file twice (one inode), and the newer
copy is kept alone; two segments that do not follow each other are never joined either."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


def older(path: Path) -> Path:
    return path.with_name(path.name + ".1")


def _read_pair(path: Path) -> tuple[bytes, bytes | None]:
    """(current, older or None) read as files, not names: a rotation between the two reads is seen."""
    with path.open("rb") as cur:
        current_ino = os.fstat(cur.fileno()).st_ino
        current = cur.read()
    try:
        with older(path).open("rb") as old:
            if os.fstat(old.fileno()).st_ino == current_ino:
                return current, None  # rotated between the reads: the same segment twice
            return current, old.read()
    except FileNotFoundError:
        return current, None


def _records(raw: bytes) -> np.ndarray:
    import numpy as np  # only when a log is joined (not for `cellab validate`, which imports this module)

    from .ttilog import HEADER_DTYPE, RECORD_DTYPE

    body = raw[HEADER_DTYPE.itemsize:]
    n = len(body) // RECORD_DTYPE.itemsize
    return np.frombuffer(body[: n * RECORD_DTYPE.itemsize], RECORD_DTYPE)


def join_tti_log(path: Path, dst: Path) -> None:
    """The TTI log's two segments as one log at dst: the older's records, then the current's."""
    from .ttilog import HEADER_DTYPE

    current, before = _read_pair(path)
    header = current[:HEADER_DTYPE.itemsize]
    if before is not None and len(before) >= HEADER_DTYPE.itemsize and len(current) >= HEADER_DTYPE.itemsize:
        old, new = _records(before), _records(current)
        if old.size and (not new.size or int(old["tti"][-1]) < int(new["tti"][0])):
            dst.write_bytes(header + old.tobytes() + new.tobytes())
            return
    shutil.copyfile(path, dst)


def _clock_parts(raw: bytes) -> tuple[dict, bytes] | None:
    line, sep, body = raw.partition(b"\n")
    try:
        header = json.loads(line)
    except ValueError:
        return None
    if not sep or not isinstance(header, dict) or not isinstance(header.get("first_tti"), int):
        return None
    return header, body[: len(body) // 8 * 8]


def join_clock(path: Path, dst: Path) -> None:
    """The cell's own clock's two segments as one clock at dst, when the older ends where the current begins."""
    current, before = _read_pair(path)
    new = _clock_parts(current)
    old = _clock_parts(before) if before is not None else None
    if new is not None and old is not None and old[0]["first_tti"] + len(old[1]) // 8 == new[0]["first_tti"]:
        head = before.partition(b"\n")[0] + b"\n" if before is not None else b""
        dst.write_bytes(head + old[1] + new[1])
        return
    shutil.copyfile(path, dst)


def join_text_log(path: Path, dst: Path) -> None:
    """cell.log's two segments as one file at dst: the older's lines, then the current's (whole lines each)."""
    current, before = _read_pair(path)
    dst.write_bytes((before or b"") + current)
