"""Fixtures for the attenuator room: emulators the tests start and always stop."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from cellab.attenuator.config import AttenuatorConfig
from cellab.attenuator.emulators.minicircuits import MiniCircuitsDevice
from cellab.attenuator.emulators.servers import PtyServer


@pytest.fixture
def mc_device() -> MiniCircuitsDevice:
    return MiniCircuitsDevice(model="RCDAT-6000-110", serial_number="12345678")


@pytest.fixture
def mc_pty(mc_device: MiniCircuitsDevice, tmp_path: Path) -> Iterator[PtyServer]:
    server = mc_device.serve_pty(link=str(tmp_path / "ttyATT0"))
    yield server
    server.stop()


@pytest.fixture
def mc_serial_config(mc_pty: PtyServer) -> AttenuatorConfig:
    return AttenuatorConfig(
        name="box1", model="minicircuits-rcdat", transport="serial", address=mc_pty.port,
        min_db=10, max_db=100, step_db=0.25, timeout_s=1.0,
    )
