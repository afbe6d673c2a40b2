"""Parts of a file given back to the file system while its writer keeps writing at its own offset (issue 42:
logs whose writer has no split and no reopen: srsRAN's JSON report and console, srsEPC's log, a daemon's
stdout). Shared by the rooms that bound such files (ran-config/logbound.py, core-config/logbound.py)."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

_FALLOC_PUNCH_HOLE_KEEP_SIZE = 0x02 | 0x01  # linux/falloc.h: FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
PAGE_BYTES = 4096


def free_read_part(path: Path, upto_bytes: int, from_bytes: int = 0) -> bool:
    """`path` from `from_bytes` to `upto_bytes` (rounded down to a page) zeroed and its whole blocks given back
    to the file system, its size and the writer's offset kept: for a file its writer gives no split (srsenb's
    JSON report, srsue's metrics CSV) once read that far (a sparse file); False when the file system cannot do
    it."""
    start = from_bytes
    length = upto_bytes // PAGE_BYTES * PAGE_BYTES - start
    if length <= 0:
        return True
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        return libc.fallocate(fd, _FALLOC_PUNCH_HOLE_KEEP_SIZE, start, length) == 0
    finally:
        os.close(fd)


def disk_bytes(path: Path) -> int:
    """What `path` holds on disk (its blocks, not its size: a freed part holds none); 0 when it is gone."""
    try:
        return path.stat().st_blocks * 512
    except OSError:
        return 0
