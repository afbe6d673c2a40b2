"""Host-wide exclusive locks (flock on a file) for what one machine has only one of: the srsRAN stack over
ZMQ (fixed ports and addresses), the registered BPF congestion controls. Campaigns, tests and benchmarks of
any checkout take the same lock; a waiter gives up after its bound with an error naming the lock."""

from __future__ import annotations

import fcntl
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from cellab.errors import CellabError

SRSRAN_LOCK = Path("/tmp/cellab-srsran.lock")  # one srsRAN stack over ZMQ per host
SERVER_MODULES_LOCK = Path("/run/lock/cellab-server-modules.lock")  # registered BPF congestion controls
POLL_S = 0.2


class HostLockTimeout(CellabError):
    pass


class HostLock:
    """An acquired lock: `waited_s` is how long it took; `release()` (or leaving the `with`) frees it."""

    def __init__(self, handle: IO[str], path: Path, waited_s: float):
        self.handle, self.path, self.waited_s = handle, path, waited_s

    def release(self) -> None:
        if not self.handle.closed:
            fcntl.flock(self.handle, fcntl.LOCK_UN)
            self.handle.close()


def acquire(path: Path, wait_s: float, who: str = "", tell: bool = False) -> HostLock:
    """Take the lock, waiting at most wait_s (HostLockTimeout then). `tell`: say on stderr that it waits."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a")
    started = time.monotonic()
    told = False
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return HostLock(handle, path, time.monotonic() - started)
        except BlockingIOError:
            if tell and not told:
                told = True
                print(f"{who or 'cellab'}: {path} is held by another run; waiting up to {wait_s:g} s",
                      file=sys.stderr, flush=True)
            if time.monotonic() - started >= wait_s:
                handle.close()
                raise HostLockTimeout(f"{who + ': ' if who else ''}{path} stayed held by another run for "
                                      f"{wait_s:g} s") from None
            time.sleep(POLL_S)


@contextmanager
def host_lock(path: Path, wait_s: float, who: str = "") -> Iterator[HostLock]:
    lock = acquire(path, wait_s, who)
    try:
        yield lock
    finally:
        lock.release()
