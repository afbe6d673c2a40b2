"""The virtual lab's attenuator: the real serial driver → Mini-Circuits emulator → emulated cell."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cellab.attenuator.bridge import AttenuatorBridge, virtual_lab_attenuator
from cellab.attenuator.config import AttenuatorConfig
from cellab.attenuator.driver import AttenuatorError, create
from cellab.attenuator.player import Player
from cellab.attenuator.schedule import parse_csv


def _serial(link: Path, channels: int = 2) -> AttenuatorConfig:
    return virtual_lab_attenuator(link, ues=channels)


def test_bridge_forwards_every_applied_value(cell: Any, tmp_path: Path) -> None:
    cell.att = [12.0, 0.0]
    link = tmp_path / "att0"
    with AttenuatorBridge(cell.endpoint, link, ues=2) as bridge:
        drv = create(_serial(link))
        try:
            assert drv.get(1) == 12.0  # synced from the cell at start
            assert drv.set(2, 40.3) == 40.25
            assert cell.att == [12.0, 40.25]
            res = Player(drv, parse_csv("t_s,channel,db\n0,1,20\n0.02,1,21\n0.04,2,22\n", "s.csv")).run()
            assert res.status == "completed"
            assert cell.att == [21.0, 22.0]
            assert bridge.forwarded == 4
        finally:
            drv.close()
    assert not link.exists()


def test_cell_refusal_becomes_a_device_failure(cell: Any, tmp_path: Path) -> None:
    cell.max_db = 50.0
    link = tmp_path / "att0"
    with AttenuatorBridge(cell.endpoint, link, ues=2):
        drv = create(_serial(link))
        try:
            with pytest.raises(AttenuatorError, match=r"reply 0"):
                drv.set(1, 60)
            assert drv.get(1) == 0.0  # the device kept its old value, as the cell did
        finally:
            drv.close()


def test_bridge_command_line(cell: Any, tmp_path: Path) -> None:
    link = tmp_path / "att-cli"
    proc = subprocess.Popen(
        [sys.executable, "-m", "cellab.attenuator.bridge", "--cell-ctl", cell.endpoint, "--pty-link", str(link), "--ues", "2"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline())
        assert ready["event"] == "ready" and ready["link"] == str(link) and ready["channels"] == 2
        drv = create(_serial(link))
        try:
            drv.set(2, 33)
        finally:
            drv.close()
        assert cell.att[1] == 33.0
        os.kill(proc.pid, signal.SIGTERM)
        out, _ = proc.communicate(timeout=10)
        assert json.loads(out.strip().splitlines()[-1]) == {"event": "stopped", "forwarded": 1}
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
