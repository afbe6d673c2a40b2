"""Fixtures of the emulator room: a virtual lab per test, always torn down."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # netlab helpers

from cellab.emulator.vlab import VirtualLab

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"


@pytest.fixture
def vlab(require_root, netns_prefix):
    """A factory: vlab(ues=N, **cell_params) brings a lab up; every lab made is taken down after the test."""
    labs: list[VirtualLab] = []

    def make(**params) -> VirtualLab:
        lab = VirtualLab(netns_prefix, **params)  # ues=N or cell parameters
        labs.append(lab)
        lab.up()
        return lab

    yield make
    for lab in labs:
        lab.down()
