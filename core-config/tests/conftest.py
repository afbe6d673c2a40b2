"""Fixtures of the core room's tests: a FerretDB of our own, on a free port, always stopped."""

from __future__ import annotations

from pathlib import Path

import pytest

from cellab.epc import ferret
from cellab.errors import CellabError
from cellab.hostlock import SRSRAN_LOCK, host_lock
from cellab.testkit.helpers import free_port

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


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


SRSRAN_LOCK_WAIT_S = 900.0


def srsran_lock(wait_s: float = SRSRAN_LOCK_WAIT_S):
    """The machine's one srsRAN stack (fixed ZMQ ports and addresses): held exclusively, waited for at most
    wait_s (another test's or session's campaign may hold it for minutes)."""
    return host_lock(SRSRAN_LOCK, wait_s, "core room test")
