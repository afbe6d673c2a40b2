"""Fixtures of the RAN room's tests: the srsRAN bundle (skipped, saying so, when absent) and its machine lock."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

BUNDLE = Path(__file__).resolve().parents[2].parent / "shared" / "tools" / "srsran"
LOCK_PATH = "/tmp/cellab-srsran.lock"  # one srsRAN stack per machine (fixed ZMQ ports 2000/2001)


@pytest.fixture(scope="session")
def srsenb_bin() -> Path:
    binary = Path(os.environ.get("CELLAB_SRSRAN_BIN", BUNDLE / "bin")) / "srsenb"
    if not binary.is_file():
        pytest.skip(f"srsRAN bundle absent: no {binary} (../shared/tools/srsran, or set CELLAB_SRSRAN_BIN)")
    return binary


@pytest.fixture
def srsran_lock() -> Iterator[None]:
    """Holds the machine-wide srsRAN lock for one test (helpers and other tests use the same file)."""
    with open(LOCK_PATH, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
