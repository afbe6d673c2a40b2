"""Reader for cellab-cell's TTI ground-truth log (format in emulator/README.md)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cellab.errors import InputError

MAGIC = b"CLCELLTT"
VERSION = 2  # 1 had a reserved field where 2 has dl_capacity_bytes

HEADER_DTYPE = np.dtype([
    ("magic", "S8"), ("version", "<u2"), ("rec_size", "<u2"), ("n_ues", "<u2"), ("n_prb", "<u2"),
    ("reserved", "<u4"), ("start_unix_s", "<i8"),
])

RECORD_DTYPE = np.dtype([
    ("tti", "<u4"), ("ue", "<u2"), ("cqi", "u1"), ("mcs", "u1"),
    ("dl_queue_bytes", "<u4"), ("dl_tbs_bits", "<u4"), ("dl_delivered_bytes", "<u4"),
    ("ul_buffer_bytes", "<u4"), ("ul_grant_bytes", "<u4"), ("ul_delivered_bytes", "<u4"),
    ("dl_drop_bytes", "<u4"), ("dl_prb", "<u2"), ("harq_retx", "u1"), ("flags", "u1"),
    ("sinr_db_x100", "<i2"), ("dl_capacity_bytes", "<u2"),
])

# flags (ttilog.h, enum ttilog_flags)
SR_OCCASION = 1 << 0
SR_SENT = 1 << 1
UL_GRANT = 1 << 2
PUSCH = 1 << 3
HARQ_LOST = 1 << 4
PAUSED = 1 << 5


@dataclass(frozen=True)
class TtiLog:
    n_ues: int
    n_prb: int
    start_unix_s: int
    records: np.ndarray  # RECORD_DTYPE, in TTI order, one per UE per TTI

    def ue(self, i: int) -> np.ndarray:
        return self.records[self.records["ue"] == i]


def read_ttilog(path: str | Path) -> TtiLog:
    """Read a whole log; a record cut short at the end (cell still writing) is left out."""
    path = Path(path)
    raw = path.read_bytes()
    if len(raw) < HEADER_DTYPE.itemsize:
        raise InputError(path, "header", "file too short for a cellab-cell TTI log")
    header = np.frombuffer(raw[:HEADER_DTYPE.itemsize], HEADER_DTYPE)[0]
    if bytes(header["magic"]) != MAGIC:
        raise InputError(path, "magic", f"{bytes(header['magic'])!r} is not a TTI log", [MAGIC.decode()])
    if int(header["version"]) != VERSION or int(header["rec_size"]) != RECORD_DTYPE.itemsize:
        raise InputError(path, "version", f"version {int(header['version'])} / record size "
                         f"{int(header['rec_size'])} not supported", [f"{VERSION} / {RECORD_DTYPE.itemsize}"])
    body = raw[HEADER_DTYPE.itemsize:]
    n = len(body) // RECORD_DTYPE.itemsize
    records = np.frombuffer(body[: n * RECORD_DTYPE.itemsize], RECORD_DTYPE)
    return TtiLog(int(header["n_ues"]), int(header["n_prb"]), int(header["start_unix_s"]), records)
