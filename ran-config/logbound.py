"""srsenb's and srsue's logs kept within the lab's bound (issue 42: a lab left up fills nothing).

srsRAN's `[log] file_max_size` (KiB) does not bound a log: its file sink (srsRAN 4G, lib/src/srslog/sinks/
file_sink.h, file_utils.h) only splits it. Past the size the next line opens a new file, NAME.1.EXT, NAME.2.EXT,
... (NAME.EXT itself is the first), and no file is ever removed. So each log is split at a third of the bound N
and a reader removes all but the newest two segments as it reads them (`SegmentTail`: every line is read before
its segment goes): right after a read a log holds at most 2N/3, so it stays within N as long as it is read
before srsRAN writes another N/3, and its latest N/3 bytes at least are kept. The eNB agent's PHY log tail reads
srsenb's; the srsran-zmq lab reads each srsue's RRC events every PRUNE_PERIOD_S (`pruner`, ue_events.RrcEventTail)
and when asked, so no event is lost to the bound. Files srsRAN writes whole at its own offset (srsenb's JSON
report, srsue's console and metrics CSV) and the broker's log have their read middle freed on disk instead
(`free_read_part`, `free_middle`); the eNB agent's own files keep their older half (`append_bounded`). The bound
is every lab's: cellab.envvars.lab_log_max_bytes ($CELLAB_LAB_LOG_MAX_BYTES, 256 MiB).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from pathlib import Path

from cellab.periodic import Periodic
from cellab.sparse import free_read_part

log = logging.getLogger("cellab.ran.logbound")
SRSLOG_MIN_KIB = 4  # srslog's floor for a split size
KEEP_SEGMENTS = 2
PRUNE_PERIOD_S = 5.0


def file_max_size_kib(max_bytes: int) -> int:
    """srsRAN's `[log] file_max_size` for a bound: a third of it in KiB (-1, one file, for no bound)."""
    return -1 if max_bytes == 0 else max(SRSLOG_MIN_KIB, max_bytes // 3 // 1024)


def _split(path: Path) -> tuple[str, str]:
    """NAME and .EXT of a log's file name, as srslog splits them (the last dot, not first or last)."""
    name = path.name
    dot = name.rfind(".")
    return (name, "") if dot <= 0 or dot == len(name) - 1 else (name[:dot], name[dot:])


def segments(path: Path) -> list[tuple[int, Path]]:
    """The log's segments on disk, oldest first: (index, path); index 0 is `path` itself."""
    stem, ext = _split(path)
    pattern = re.compile(re.escape(stem) + r"\.(\d{1,9})" + re.escape(ext))
    found = [(0, path)] if path.exists() else []
    try:
        found += [(int(m.group(1)), p) for p in path.parent.iterdir() if (m := pattern.fullmatch(p.name))]
    except OSError:
        return found
    return sorted(found)


def read_all(path: Path, max_bytes: int) -> bytes:
    """The log's segments on disk joined, oldest first, at most max_bytes from each."""
    return b"".join(_read_at(seg, 0, max_bytes) for _, seg in segments(path))


def _read_at(path: Path | None, offset: int, max_bytes: int) -> bytes:
    """Up to max_bytes of `path` from `offset` (nothing when it is None or gone: removed since it was listed)."""
    if path is None:
        return b""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read(max_bytes)
    except OSError:
        return b""


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def remove_all(path: Path) -> None:
    """Every segment of the log (before a new process writes it afresh: an older process's NAME.N.EXT would
    otherwise pass for the new one's)."""
    for _, seg in segments(path):
        seg.unlink(missing_ok=True)


def free_middle(path: Path, max_bytes: int) -> None:
    """A file of whole lines whose first line is its header (srsue's metrics CSV) kept within max_bytes of disk:
    once it holds more, all but its header and its last max_bytes/2 are freed (`free_read_part`)."""
    try:
        st = path.stat()
        with open(path, "rb") as f:
            header_bytes = len(f.readline())
    except OSError:
        return
    if max_bytes and st.st_blocks * 512 > max_bytes:
        free_read_part(path, st.st_size - max_bytes // 2, header_bytes)


def head_and_tail(path: Path, tail_bytes: int) -> bytes:
    """The first line of such a file and the whole lines of its last `tail_bytes` (0: all of it), leaving out
    any line with a freed (zero) byte, the line the tail cuts and a last line not ended yet."""
    with open(path, "rb") as f:
        head = f.readline()
        size = f.seek(0, 2)
        start = max(len(head), size - tail_bytes) if tail_bytes else len(head)
        f.seek(start)
        body = f.read()
    lines = body.split(b"\n")[1 if start > len(head) else 0:-1]  # not the line cut at the start, nor one unended
    return head + b"".join(line + b"\n" for line in lines if b"\0" not in line)


def older(path: Path) -> Path:
    return path.with_name(path.name + ".1")


def append_bounded(path: Path, text: str, max_bytes: int) -> None:
    """`text` appended to one of our own logs (the eNB agent's JSON lines): when it would pass half of max_bytes
    the file first becomes NAME.1 (replacing the older), so the two stay within max_bytes (0: no bound) and the
    latest half at least is kept. Readers join NAME.1 and NAME (`join_older`)."""
    if max_bytes and _size(path) + len(text.encode()) > max_bytes // 2:
        try:
            path.replace(older(path))
        except FileNotFoundError:
            pass
    with open(path, "a") as out:
        out.write(text)


def join_older(older_bytes: bytes | None, current: bytes) -> bytes:
    """NAME.1's lines, then NAME's: one log again (NAME.1 ends with a whole line: rotation is between appends)."""
    return (older_bytes or b"") + current


class SegmentTail:
    """What a split log gained since the last call, across its segments in order; each segment it has read
    past (srslog closed it when it opened the next) is removed once it is not among the newest `keep`, so a
    reader that keeps up holds the log within the bound and has seen every line."""

    def __init__(self, path: Path, keep: int = KEEP_SEGMENTS):
        self.path, self.keep = path, keep
        self._index, self._offset = 0, 0

    def read_new(self, max_bytes: int = 64 << 20) -> bytes:
        out = []
        while True:
            found = segments(self.path)
            data = _read_at(dict(found).get(self._index), self._offset, max_bytes)
            self._offset += len(data)
            out.append(data)
            later = [i for i, _ in found if i > self._index]
            if not later or len(data) >= max_bytes:
                break
            self._index, self._offset = later[0], 0  # the one read is complete: srslog closed it first
        for i, seg in found[:-self.keep]:
            if i < self._index:
                seg.unlink(missing_ok=True)
        return b"".join(out)


def pruner(step: Callable[[], None], period_s: float = PRUNE_PERIOD_S) -> Periodic:
    """A started thread that calls `step` (the lab's: each srsue's log read and pruned, its metrics CSV's middle
    freed) every PRUNE_PERIOD_S while a lab is up: a lab left up idle still writes (a UE out of the cell's reach
    logs its cell search, 5.7 MB in 11 minutes seen here; srsue's metrics CSV a line a second)."""
    thread = Periodic(step, period_s, "srsran-log-pruner", "bounding the lab's logs", log)
    thread.start()
    return thread
