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


@pytest.fixture
def cell_and_box(require_root, netns_prefix, tmp_path):
    """A two-UE virtual cell and its Mini-Circuits serial attenuator (cellab.attenuator.bridge) at tmp_path/atten.pty,
    for an inventory whose agents the test starts (and stops before this takes both down): (topology, pty)."""
    from cellab.testkit.helpers import start_cell_attenuator

    lab = VirtualLab(netns_prefix, ues=2)
    bridge = None
    try:
        topo = lab.up()
        bridge = start_cell_attenuator(topo.extra["ctl"], tmp_path / "atten.pty", 2)
        yield topo, tmp_path / "atten.pty"
    finally:
        if bridge is not None:
            bridge.terminate()
            bridge.wait(5)
        lab.down()
