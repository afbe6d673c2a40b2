"""Fixtures the UE room's tests share."""

from __future__ import annotations

import socket
import time

import pytest

from cellab.testkit.helpers import free_port
from cellab.paths import BUILD_BIN
from cellab.labs.proc import ManagedProcess


@pytest.fixture
def sender(tmp_path):
    """cellab-send serving on a free loopback port (the probe's and the phone agent's flows); its port."""
    port = free_port()
    proc = ManagedProcess([str(BUILD_BIN / "cellab-send"), "serve", "--bind", "127.0.0.1", "--port", str(port),
                           "--sample-ms", "0", "--log-dir", str(tmp_path / "send")], tmp_path / "send.log")
    for _ in range(250):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.02)
    yield port
    proc.stop()
