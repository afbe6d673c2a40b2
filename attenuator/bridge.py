"""The virtual lab's attenuator: a Mini-Circuits serial emulator bridged to the emulated LTE cell.

The real Mini-Circuits serial driver talks to a pseudo-terminal; every value the emulated device
applies is forwarded to the cell's control socket (`set_attenuation` for UE channel−1), so every
demo exercises the real driver. If the cell refuses, the device answers `0` and keeps its value.

    python -m cellab.attenuator.bridge --cell-ctl ipc:///tmp/cell.ctl --pty-link /tmp/cellab-att0 [--ues 2]

Prints one JSON line {"event": "ready", ...} when the pty is up; stops on SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from pathlib import Path

from .config import AttenuatorConfig
from cellab.labs.cellctl import CellControl, CellControlError
from .emulators.minicircuits import MiniCircuitsDevice
from .emulators.servers import PtyServer


def virtual_lab_attenuator(pty_link: str | Path, ues: int = 1, name: str = "vlab-atten",
                           min_db: float = 0.0, max_db: float = 95.0) -> AttenuatorConfig:
    """The inventory entry the virtual lab's agent uses to drive the bridge (the real serial driver)."""
    return AttenuatorConfig(
        name=name,
        model="minicircuits-rcdat" if ues == 1 else "minicircuits-rc4dat",
        transport="serial",
        address=str(pty_link),
        channels=ues,
        min_db=min_db,
        max_db=max_db,
        step_db=0.25,
    )


def sync_from_cell(values_db: list[float], forwarder: CellForwarder) -> None:
    """An emulated box's channel values set to the cell's, so its first readback is the truth."""
    for index in range(len(values_db)):
        value = forwarder.current_db(index + 1)
        if value is not None:
            values_db[index] = value


class CellForwarder:
    """What an emulated box applies, sent to the emulated cell: channel N is the cell's UE N-1 (the device's
    `on_set`). One REQ socket, so one request at a time. Shared by the bridge and `cellab atten emulate
    --cell-ctl` (a box of any family in front of the virtual cell)."""

    def __init__(self, cell_ctl: str, timeout_s: float = 2.0):
        self.cell = CellControl(cell_ctl, int(timeout_s * 1000))
        self.forwarded = 0
        self._lock = threading.Lock()

    def __call__(self, channel: int, value_db: float) -> None:
        with self._lock:
            self.cell.set_attenuation(channel - 1, value_db)
            self.forwarded += 1

    def current_db(self, channel: int) -> float | None:
        """The cell's value on this channel now, or None while the cell does not answer."""
        try:
            with self._lock:
                reply = self.cell.get_attenuation(channel - 1)
        except CellControlError:
            return None  # the cell may not be up yet; the first set will reach it
        value = reply.get("attenuation_db")
        return float(value) if isinstance(value, (int, float)) else None

    def close(self) -> None:
        self.cell.close()


class AttenuatorBridge:
    def __init__(self, cell_ctl: str, pty_link: str | Path, ues: int = 1, model: str | None = None, timeout_s: float = 2.0):
        self.forwarder = CellForwarder(cell_ctl, timeout_s)
        self.pty_link = Path(pty_link)
        # more than 4 UEs: a box Mini-Circuits does not sell, named like its RC4DAT so the driver counts channels
        chosen = model or ("RCDAT-6000-110" if ues == 1 else "RC4DAT-6G-95" if ues <= 4 else f"RC{ues}DAT-6G-95")
        self.device = MiniCircuitsDevice(model=chosen, serial_number="VLAB0001", channels=ues, on_set=self.forwarder)
        self.server: PtyServer | None = None

    @property
    def forwarded(self) -> int:
        return self.forwarder.forwarded

    def sync_from_cell(self) -> None:
        """Start from the cell's current values so the first readback is the truth."""
        sync_from_cell(self.device.att_db, self.forwarder)

    def start(self) -> AttenuatorBridge:
        self.sync_from_cell()
        self.server = PtyServer(self.device, eol="\r\n", link=self.pty_link).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None
        try:
            if self.pty_link.is_symlink():
                self.pty_link.unlink()
        except OSError:
            pass
        self.forwarder.close()

    def __enter__(self) -> AttenuatorBridge:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cellab.attenuator.bridge", description=__doc__.split("\n\n")[0])
    ap.add_argument("--cell-ctl", required=True, help="the cell's ZeroMQ control endpoint")
    ap.add_argument("--pty-link", required=True, help="symlink to create for the pseudo-terminal")
    ap.add_argument("--ues", type=int, default=1, help="channels = UEs of the cell (default 1)")
    ap.add_argument("--model", default=None, help="Mini-Circuits model to emulate (default RCDAT-6000-110 / RC4DAT-6G-95)")
    args = ap.parse_args(argv)
    if not 1 <= args.ues <= 64:
        print(f"--ues {args.ues}: must be 1..64", file=sys.stderr)
        return 2
    bridge = AttenuatorBridge(args.cell_ctl, args.pty_link, ues=args.ues, model=args.model)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    bridge.start()
    assert bridge.server is not None
    print(json.dumps({"event": "ready", "pty": bridge.server.path, "link": str(bridge.pty_link),
                      "model": bridge.device.model, "channels": bridge.device.channels}), flush=True)
    try:
        done.wait()
    finally:
        bridge.stop()
    print(json.dumps({"event": "stopped", "forwarded": bridge.forwarded}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
