"""Link traces for the virtual cell's trace mode, and the project's sample data.

- `trace_from_probe_log`: a saturating download recorded by cellab-probe (on a phone on a commercial
  network, or anywhere) → a Mahimahi trace: one line per 1500-byte delivery opportunity, the
  millisecond it happened. Played back by the cell (`trace:`), it reproduces that network's capacity.
- `sample_drive_log` / `sample_commercial_trace`: a synthetic drive (RSRP over time) and a synthetic
  "commercial" recording along the same drive, for the example campaigns. They are generated, seeded
  and labelled synthetic; replace them with your own recordings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import math
import re
from pathlib import Path


from cellab.campaign.probe_log import check_time_order
from cellab.errors import InputError
from cellab.inputs import DATA_MAX_BYTES, bounded_int, csv_dicts, finite_float, read_bytes, read_text
from cellab.records import write_atomic

if TYPE_CHECKING:
    import numpy as np

OPPORTUNITY_BYTES = 1500  # Mahimahi's delivery unit
MAX_TRACE_MS = 86_400_000  # a day
MAX_ROW_BYTES = 1e9  # bytes in one row of a probe log (a ms or a packet)


def trace_from_probe_log(path: Path) -> list[int]:
    """Delivery opportunities (ms from the first byte) from the probe's per-ms log (`ms,flow,bytes,...`) or
    per-packet log (`t_ns,flow,dir,seq,ack,len,...`, dir 0 = data in)."""
    import numpy as np  # numpy only to build traces: `validate` of a trace does without it

    path = Path(path)
    header, rows = csv_dicts(read_text(path, DATA_MAX_BYTES), path)  # the packet log's banner is a comment
    if not rows:
        raise InputError(path, "", "no rows: record a saturating download with cellab-probe fetch --ms-log or --log")
    if {"ms", "bytes"} <= set(header):
        t_ms = np.array([finite_float(r["ms"], path, f"row {line}.ms", 0) for line, r in rows])
        size = np.array([finite_float(r["bytes"], path, f"row {line}.bytes", 0, MAX_ROW_BYTES) for line, r in rows])
        check_time_order(path, rows, t_ms.tolist(), "ms")
    elif {"t_ns", "dir", "len"} <= set(header):
        data = [(line, r) for line, r in rows if r["dir"] == "0"]
        t_ms = np.array([bounded_int(r["t_ns"], path, f"row {line}.t_ns", 0) / 1e6 for line, r in data])
        size = np.array([finite_float(r["len"], path, f"row {line}.len", 0, MAX_ROW_BYTES) for line, r in data])
        check_time_order(path, data, (t_ms * 1e6).tolist(), "t_ns")
    else:
        raise InputError(path, "header", f"columns {sorted(header)} are neither probe log",
                         ["ms,flow,bytes,... (--ms-log)", "t_ns,flow,dir,seq,ack,len,... (--log)"])
    keep = size > 0
    if not keep.any():
        raise InputError(path, "bytes", "no data was received in this recording")
    t_ms, size = t_ms[keep], size[keep]
    order = np.argsort(t_ms, kind="stable")
    if t_ms[order][-1] - t_ms[order][0] > MAX_TRACE_MS:
        raise InputError(path, "ms", "the recording spans more than a day", [f"up to {MAX_TRACE_MS} ms"])
    return opportunities(t_ms[order] - t_ms[order][0], size[order])


def read_mahimahi(path: Path) -> list[int]:
    """A Mahimahi trace read by the cell's own grammar (emulator/trace.h): every line 1..12 ASCII digits and its
    newline ("\\r\\n" too; the last may lack it), nothing else — no blank line, blank, tab, sign, '_', byte-order
    mark or non-ASCII digit (Python's int() takes '1_000' and '١٢'; the cell does not); non-decreasing, at most a
    day, the last above 0. Read as bytes, as the cell reads them."""
    path = Path(path)
    data = read_bytes(path, DATA_MAX_BYTES)
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()  # the last line's newline
    out: list[int] = []
    for number, line in enumerate(lines, start=1):
        digits = line.removesuffix(b"\r")
        if not TRACE_LINE.fullmatch(digits):
            raise InputError(path, f"line {number}", f"{_shown(line)} is not a time in ms",
                             ["1 to 12 ASCII digits (0-9) alone on the line"])
        value = int(digits)
        if value > MAX_TRACE_MS:
            raise InputError(path, f"line {number}", f"{value} ms is beyond a day", [f"0 .. {MAX_TRACE_MS}"])
        if out and value < out[-1]:
            raise InputError(path, f"line {number}", f"{value} ms goes back (previous {out[-1]} ms): timestamps must "
                             "be monotonically nondecreasing")
        out.append(value)
    if not out or out[-1] <= 0:
        raise InputError(path, "", "a trace must last for a nonzero amount of time", ["one ms timestamp per line"])
    return out


TRACE_LINE = re.compile(rb"[0-9]{1,12}")


def _shown(line: bytes) -> str:
    return "an empty line" if not line else repr(line[:40].decode("utf-8", "backslashreplace"))


def opportunities(t_ms: np.ndarray, size_bytes: np.ndarray) -> list[int]:
    """Every completed 1500 bytes is one opportunity at the ms its last byte arrived (Mahimahi counts from 1)."""
    import numpy as np  # numpy only to build traces: `validate` of a trace does without it

    cumulative = np.cumsum(size_bytes)
    marks = np.arange(OPPORTUNITY_BYTES, cumulative[-1] + 1, OPPORTUNITY_BYTES)
    at = np.searchsorted(cumulative, marks)
    return [int(x) for x in np.floor(t_ms[at]).astype(np.int64) + 1]


def write_mahimahi(path: Path, opportunities_ms: list[int]) -> None:
    if not opportunities_ms or opportunities_ms[-1] <= 0:
        raise InputError(path, "", "a trace must last for a nonzero amount of time")
    try:
        write_atomic(Path(path), "".join(f"{t}\n" for t in opportunities_ms))
    except OSError as exc:
        raise InputError(path, "--out", f"cannot write: {exc.strerror}", ["a file in a writable folder"]) from None


def sample_drive_log(duration_s: float = 40.0, step_s: float = 0.5, seed: int = 7) -> list[tuple[float, float]]:
    """(t_s, rsrp_dbm): driving away from a site and back past a second one — log-distance path loss
    (exponent 3.5), 6 dB log-normal shadowing correlated over ~5 s, clipped to what a phone reports."""
    import numpy as np  # numpy only to build traces: `validate` of a trace does without it

    rng = np.random.default_rng(seed)
    t = np.arange(0.0, duration_s + 1e-9, step_s)
    distance_m = 150 + 900 * np.abs(np.sin(np.pi * t / duration_s * 1.5))  # away, back, away again
    path_loss_db = 10 * 3.5 * np.log10(distance_m / 100.0)
    shadow = np.zeros_like(t)
    rho = math.exp(-step_s / 5.0)
    for i in range(1, t.size):
        shadow[i] = rho * shadow[i - 1] + math.sqrt(1 - rho * rho) * rng.normal(0, 6.0)
    rsrp = np.clip(-72.0 - path_loss_db + shadow, -124.0, -70.0)
    return [(round(float(a), 3), round(float(b), 1)) for a, b in zip(t, rsrp, strict=True)]


def sample_commercial_trace(drive: list[tuple[float, float]], seed: int = 11) -> list[int]:
    """A commercial network along the same drive: 20 MHz capacity from RSRP (a Shannon fit with 75% LTE
    overhead efficiency), shared with other users whose load changes every second."""
    import numpy as np

    rng = np.random.default_rng(seed)
    t_s = np.array([p[0] for p in drive])
    rsrp = np.array([p[1] for p in drive])
    ms = np.arange(0, int(t_s[-1] * 1000))
    rsrp_ms = np.interp(ms / 1000.0, t_s, rsrp)
    sinr_db = np.clip(rsrp_ms + 121.0 - 3.0, -5.0, 30.0)  # noise floor of 20 MHz, 3 dB interference
    cell_bps = 0.75 * 18e6 * np.log2(1 + 10 ** (sinr_db / 10))
    share = np.repeat(rng.uniform(0.3, 0.9, size=ms.size // 1000 + 1), 1000)[: ms.size]
    return opportunities(ms.astype(np.float64), cell_bps * share / 8 / 1000)


def write_samples(folder: Path) -> dict[str, Path]:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    drive = sample_drive_log()
    drive_path = folder / "sample-drive.csv"
    write_atomic(drive_path, "t_s,rsrp_dbm\n" + "".join(f"{t},{r}\n" for t, r in drive))
    trace_path = folder / "sample-commercial.down"
    write_mahimahi(trace_path, sample_commercial_trace(drive))
    return {"drive_log": drive_path, "commercial_trace": trace_path}
