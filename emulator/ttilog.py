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

    @property
    def n_ttis(self) -> int:
        """TTIs with a record for every UE (the cell writes all UEs of a TTI together, in UE order)."""
        return len(self.records) // self.n_ues if self.n_ues else 0

    def per_tti(self, field: str) -> np.ndarray:
        """One field as a (TTIs × UEs) array: row t holds every UE's value in the log's t-th TTI."""
        n = self.n_ttis
        return self.records[field][: n * self.n_ues].reshape(n, self.n_ues)

    def backlogged(self, min_queue_bytes: int = 20_000) -> np.ndarray:
        """TTIs (boolean, one per row of `per_tti`) in which every UE's downlink queue held more than
        min_queue_bytes: more than the TBs in flight, so each had data the scheduler could send."""
        return (self.per_tti("dl_queue_bytes") > min_queue_bytes).all(axis=1)

    def ue_totals(self, ttis: np.ndarray | None = None) -> list[dict[str, int]]:
        """Per UE, summed over the log (or the TTIs a boolean row mask selects): downlink PRBs, TB bits,
        delivered and dropped bytes, HARQ retransmissions, uplink delivered bytes; and the TTIs counted."""
        fields = ("dl_prb", "dl_tbs_bits", "dl_delivered_bytes", "dl_drop_bytes", "harq_retx", "ul_delivered_bytes")
        rows = slice(None) if ttis is None else ttis
        sums = {f: self.per_tti(f)[rows].astype(np.int64).sum(axis=0) for f in fields}
        count = self.n_ttis if ttis is None else int(np.count_nonzero(ttis))
        return [{"ue": i, "ttis": count, **{f: int(sums[f][i]) for f in fields}} for i in range(self.n_ues)]


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
