"""Fixtures for the attenuator room: emulators the tests start and always stop."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq
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


class FakeCell:
    """A REP server speaking the emulated cell's control protocol."""

    def __init__(self, ues: int = 2, max_db: float = 120.0):
        self.att = [0.0] * ues
        self.max_db = max_db
        self.path_loss_dbm = -47.0
        self.requests: list[dict] = []
        self._ctx = zmq.Context()
        self._sock = self._ctx.socket(zmq.REP)
        self.endpoint = f"tcp://127.0.0.1:{self._sock.bind_to_random_port('tcp://127.0.0.1')}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            if not self._sock.poll(50):
                continue
            req = json.loads(self._sock.recv())
            self.requests.append(req)
            ue = req.get("ue", 0 if req.get("op") == "stats" else None)
            if not isinstance(ue, int) or not 0 <= ue < len(self.att):
                reply = {"ok": False, "error": f"no UE {ue}"}
            elif req["op"] == "set_attenuation":
                v = float(req["attenuation_db"])
                if not 0 <= v <= self.max_db:
                    reply = {"ok": False, "error": f"attenuation_db {v} outside [0, {self.max_db}]"}
                else:
                    self.att[ue] = v
                    reply = {"ok": True, "attenuation_db": v}
            elif req["op"] == "stats":  # like cellab-cell: rsrp_dbm per UE follows the attenuation
                reply = {"ok": True, "ues": [{"ue": k, "attenuation_db": a, "rsrp_dbm": self.path_loss_dbm - a}
                                             for k, a in enumerate(self.att)]}
            elif req["op"] == "get_attenuation":
                reply = {"ok": True, "attenuation_db": self.att[ue]}
            else:
                reply = {"ok": False, "error": "unknown op"}
            self._sock.send(json.dumps(reply).encode())

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self._sock.close(linger=0)
        self._ctx.term()


@pytest.fixture
def cell() -> Iterator[FakeCell]:
    c = FakeCell()
    yield c
    c.close()
