"""The live `cellab run` that holds a campaign folder: a flock on `<folder>/holder.lock` (the kernel frees it when
the holder dies), with the holder's pid, host and start time in the file, so a second run or resume of the same
folder is refused naming the holder instead of writing beside it (or waiting without a word)."""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import IO

from cellab.errors import CellabError
from cellab.labs.instances import open_lock

HOLDER_FILE = "holder.lock"


class FolderHeld(CellabError):
    pass


class FolderHold:
    def __init__(self, handle: IO[str]):
        self.handle = handle

    def release(self) -> None:
        if not self.handle.closed:
            fcntl.flock(self.handle, fcntl.LOCK_UN)
            self.handle.close()


def hold(root: Path) -> FolderHold:
    """Hold the campaign folder for this process; FolderHeld naming the live holder when another one has it."""
    path = Path(root) / HOLDER_FILE
    try:
        handle = open_lock(path)  # kept open while held
    except OSError as exc:  # a link planted at its name is not followed
        raise CellabError(f"{path}: cannot hold the campaign folder ({exc.strerror or exc}); remove what is "
                          "there (it is the folder's own lock file)") from None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        text = handle.read(4096)
        handle.close()
        try:
            who = json.loads(text)
            since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(who["started_at"])))
            said = f"pid {int(who['pid'])} on host {who['host']}, since {since}"
        except (ValueError, KeyError, TypeError):
            said = "a process that has not said who it is yet"
        raise FolderHeld(f"{root} is held by a live `cellab run` ({said}): wait for it to finish (its report "
                         "included), or stop that process, then resume") from None
    handle.seek(0)
    handle.truncate()
    handle.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started_at": time.time()}))
    handle.flush()
    return FolderHold(handle)


def holder_of(root: Path) -> dict | None:
    """The live `cellab run` holding the folder ({pid, host, started_at}; {} when it has not said yet), None when
    no process holds it. Only reads: the file is opened read-only without following a link, never created."""
    try:
        fd = os.open(Path(root) / HOLDER_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None  # no lock file: no run ever held it (or a link planted there, which no holder opens)
    with os.fdopen(fd) as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                who = json.loads(handle.read(4096))
            except ValueError:
                return {}
            return who if isinstance(who, dict) else {}
        fcntl.flock(handle, fcntl.LOCK_UN)
        return None
