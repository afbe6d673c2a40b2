"""Fixtures of the core room's tests: a FerretDB of our own, on a free port, always stopped."""

from __future__ import annotations

import contextlib
import fcntl
import socket
import time
from pathlib import Path

import pytest

from cellab.epc import ferret
from cellab.errors import CellabError

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def ferretdb(tmp_path: Path):
    """(url, folder) of a running cellab-ferretdb; skipped when it cannot be built."""
    try:
        ferret.find_program("cellab-ferretdb")
    except CellabError as exc:
        pytest.skip(f"cellab-ferretdb not built ({exc}); `make build` builds it with Go")
    folder = tmp_path / "ferretdb"
    state = ferret.up(folder, free_port())
    try:
        yield state.url, folder
    finally:
        ferret.down(folder)


SRSRAN_LOCK = Path("/tmp/cellab-srsran.lock")
SRSRAN_LOCK_WAIT_S = 600.0


@contextlib.contextmanager
def srsran_lock(wait_s: float = SRSRAN_LOCK_WAIT_S):
    """The machine's one srsRAN stack (fixed ZMQ ports, netns ue1): held exclusively, waited for at most
    wait_s (another session's campaign may hold it for minutes)."""
    with open(SRSRAN_LOCK, "a") as lock:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.fail(f"{SRSRAN_LOCK} stayed held by another srsRAN stack for {wait_s:.0f} s")
                time.sleep(1)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
