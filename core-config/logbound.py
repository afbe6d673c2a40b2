"""The core's daemon logs kept within the lab's bound (issue 42: a lab left up for a day fills nothing).

Each daemon writes two files in its run's logs/ folder: NAME.log, its own log (Open5GS and NextEPC: the
`logger` file of its configuration; srsEPC: epc.log) and NAME.out, its stdout and stderr (the agent's file).
Open5GS (v2.7.7) and NextEPC (0.3.10: checked on the Debian package) open their log in append mode, have no size
option and reopen it on SIGHUP: once NAME.log passes KEEP (3N/8) it is renamed NAME.log.1 (replacing the older
half) and the daemon gets a SIGHUP. srsEPC's log (srslog: no size option, and a SIGHUP ends srsEPC) and every
NAME.out are written at the writer's own offset: once one holds more than 2 KEEP of disk, all of it but its
first HEAD_BYTES and its latest KEEP is given back to the file system (cellab.sparse: the file keeps its size,
the writer its offset). Either way a file holds at most N while a daemon writes less than N/8 a period.

Every line is read once, in order, before its part is renamed away or freed (`LogTail` follows the file it
reads through the rename, into NAME.log.1, to the NAME.log the daemon reopens); the agent's findings (attach,
refusals) come from those lines, so a run's findings hold every line of its logs.
The bound is every lab's: cellab.envvars.lab_log_max_bytes ($CELLAB_LAB_LOG_MAX_BYTES, 256 MiB).
"""

from __future__ import annotations

import logging
import os
import re
import signal
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path

from cellab.contracts.core import LogFinding
from cellab.periodic import Periodic
from cellab.sparse import PAGE_BYTES, disk_bytes, free_read_part

from .daemons import LOG_SCAN_BYTES, classify, clean

log = logging.getLogger("cellab.core.logbound")
PERIOD_S = 2.0
HEAD_BYTES = 2 * PAGE_BYTES  # a freed file keeps its head: the daemon's version and start lines
MAX_FINDINGS = 50
MAX_SEEN = 10_000  # distinct finding lines remembered for de-duplication
SIGHUP_BIT = 1 << (signal.SIGHUP - 1)
# an Open5GS line continuing the one before it: more indentation after its level
_CONTINUATION = re.compile(r"\]\s+(?:INFO|WARNING|ERROR|FATAL|DEBUG|TRACE):\s{2,}(?P<rest>\S.*)$")
_STAMP = re.compile(r"^\d\d/\d\d \d\d:\d\d:\d\d\.\d+: ")


def keep_bytes(max_bytes: int) -> int:
    """The latest bytes of a log always kept under the bound N: 3N/8 (the other N/4 is for what a daemon writes
    between two periods and before it reopens its log)."""
    return max_bytes * 3 // 8


def older(path: Path) -> Path:
    return path.with_name(path.name + ".1")


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except OSError:
        return None


class LogTail:
    """The whole lines a log gained since the last call, each once: the file it reads is known by its inode, so
    after a rename to NAME.1 its rest is read there first, then the NAME the daemon reopened. More than
    `max_bytes` new at once (a daemon in an error loop) skips to the latest max_bytes (`skipped_bytes`)."""

    def __init__(self, path: Path, max_bytes: int = LOG_SCAN_BYTES):
        self.path, self.max_bytes = path, max_bytes
        self.offset, self.skipped_bytes = 0, 0
        self._inode: int | None = None
        self._rest = b""  # a line not ended yet

    def on_current(self) -> bool:
        """Reading NAME itself (not a renamed NAME.1 the daemon has not left yet)."""
        return self._inode is not None and self._inode == _inode(self.path)

    def read_new(self) -> list[str]:
        current = _inode(self.path)
        data = b""
        if self._inode is not None and current != self._inode:
            if _inode(older(self.path)) == self._inode:
                data = self._read(older(self.path))
            if current is None:  # renamed, not reopened yet: the daemon still writes the renamed one
                return self._lines(data)
            self._inode, self.offset = None, 0
        if self._inode is None and current is not None:
            self._inode = current
        if self._inode is not None:
            data += self._read(self.path)
        return self._lines(data)

    def _read(self, path: Path) -> bytes:
        try:
            with open(path, "rb") as f:
                size = f.seek(0, os.SEEK_END)
                if size < self.offset:  # written afresh (a restarted daemon's stdout)
                    self.offset, self._rest = 0, b""
                if size - self.offset > self.max_bytes:
                    self.skipped_bytes += size - self.max_bytes - self.offset
                    self.offset, self._rest = size - self.max_bytes, b""
                f.seek(self.offset)
                data = f.read(size - self.offset)
        except OSError:
            return b""
        self.offset += len(data)
        return data

    def _lines(self, data: bytes) -> list[str]:
        *whole, self._rest = (self._rest + data).split(b"\n")
        return [line.decode(errors="replace") for line in whole]


def _sighup_masks(status: str) -> dict[str, bool]:
    """Whether a thread's /proc status says it blocks (SigBlk) and the process catches (SigCgt) SIGHUP."""
    fields = dict(line.split(":\t", 1) for line in status.splitlines() if line.startswith(("SigBlk", "SigCgt")))
    return {name: bool(int(fields.get(name, "0"), 16) & SIGHUP_BIT) for name in ("SigBlk", "SigCgt")}


def takes_sighup(pid: int) -> bool:
    """A SIGHUP cannot end the process: it catches SIGHUP, or a thread waits for signals (sigwait: Open5GS's and
    NextEPC's signal thread, its SIGHUP shown unblocked while it waits) and every other thread blocks it. A
    daemon just started has neither yet, and srsEPC or a program with no handler has neither."""
    waiting, others_block = False, True
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            masks = _sighup_masks((task / "status").read_text())
            if masks["SigCgt"]:
                return True
            if "sigtimedwait" in (task / "wchan").read_text():
                waiting = True
            else:
                others_block = others_block and masks["SigBlk"]
    except OSError:
        return False
    return waiting and others_block


class BoundedLog:
    """One file of a daemon's, read and kept within max_bytes (0: read only)."""

    def __init__(self, path: Path, max_bytes: int, reopens: bool, pid: Callable[[], int | None]):
        """reopens: the daemon reopens this file on SIGHUP (renamed, else freed); pid: the daemon's while it runs
        (the agent's child, not reaped: the pid is its own), else None."""
        self.path, self.max_bytes, self.reopens, self._pid = path, max_bytes, reopens, pid
        self.tail = LogTail(path)

    def step(self) -> list[str]:
        lines = self.tail.read_new()
        if self.max_bytes:
            keep = keep_bytes(self.max_bytes)
            if self.reopens and self.tail.offset > keep and self.tail.on_current() and (pid := self._pid()) \
                    and takes_sighup(pid):
                self._rotate(pid)
            elif disk_bytes(self.path) > 2 * keep:
                self._free(keep)
        return lines

    def _rotate(self, pid: int) -> None:
        """NAME past KEEP, read to its end and reopened by the daemon since the last rename: renamed, SIGHUP sent."""
        try:  # what the daemon writes until it reopens goes to NAME.1: the tail reads it there
            self.path.replace(older(self.path))
        except OSError:
            return
        os.kill(pid, signal.SIGHUP)

    def _free(self, keep: int) -> None:
        try:
            size = self.path.stat().st_size
        except OSError:
            return
        if self.tail.on_current():
            free_read_part(self.path, min(self.tail.offset, size - keep), HEAD_BYTES)


class CoreLogs:
    """A run's daemon logs, read and bounded every PERIOD_S (`start`) and when the findings are asked for."""

    def __init__(self, logs_dir: Path, max_bytes: int, period_s: float = PERIOD_S):
        self.logs_dir, self.max_bytes, self.period_s = logs_dir, max_bytes, period_s
        self._files: dict[str, list[BoundedLog]] = {}
        self._findings: deque[LogFinding] = deque(maxlen=MAX_FINDINGS)
        self._seen: dict[str, set[str]] = {}
        self._last: dict[str, LogFinding | None] = {}  # each file's last line's finding: the next may continue it
        self._lock = threading.Lock()
        self._thread = Periodic(self.step, period_s, "core-log-bound", "bounding the core's daemon logs", log)

    def watch(self, daemon: str, pid: Callable[[], int | None], reopens: bool) -> None:
        """A daemon's NAME.log (`reopens`: renamed and reopened on SIGHUP) and NAME.out, once per run."""
        with self._lock:
            if daemon not in self._files:
                self._files[daemon] = [BoundedLog(self.logs_dir / f"{daemon}.log", self.max_bytes, reopens, pid),
                                       BoundedLog(self.logs_dir / f"{daemon}.out", self.max_bytes, False, pid)]

    def findings(self) -> list[LogFinding]:
        self.step()
        with self._lock:
            return list(self._findings)

    def step(self) -> None:
        with self._lock:
            for daemon, files in self._files.items():
                for bounded in files:
                    self._scan(daemon, str(bounded.path), bounded.step())

    def _scan(self, daemon: str, key: str, lines: list[str]) -> None:
        seen = self._seen.setdefault(daemon, set())
        for raw in lines:
            line = clean(raw)
            last = self._last.pop(key, None)
            more = _CONTINUATION.search(line) if last is not None else None
            if last is not None and more:  # Open5GS says whose it is on the next line ("IMSI[0010...]")
                last.line = f"{last.line} | {more.group('rest')}"[:400]
            kind = classify(line)
            stamped = _STAMP.sub("", line)  # Open5GS writes each line to its log and stdout, ms apart
            if kind and kind != "error" and stamped not in seen:
                if len(seen) >= MAX_SEEN:
                    seen.clear()
                seen.add(stamped)
                finding = LogFinding(daemon=daemon, kind=kind, line=line[:400])
                self._findings.append(finding)
                self._last[key] = finding

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """The thread ended; the files stay readable (`findings`)."""
        self._thread.stop()
