"""Keysight/Agilent 11713C attenuator/switch driver emulator: SCPI over a raw TCP socket.

Facts used (anchors.md §3.5, verified via several pyvisa drivers): `*IDN?`, `*RST`, `*CLS`,
`CONFigure:BANK<n>:X|Y <model>`, `ATTenuator:BANK<n>:X|Y <dB>`; long/short SCPI mnemonics.
Step attenuator ranges (8494: 0–11 dB in 1 dB, 8495: 0–70 dB in 10 dB, 8496: 0–110 dB in 10 dB)
are the well-known catalogue values [M]. Assumptions: query forms `ATT:BANK1:X?`/`CONF:BANK1:X?`,
standard SCPI error queue texts (`-222,"Data out of range"`, `-113,"Undefined header"`) read with
`SYST:ERR?`, IDN fields, a relay settling delay of `switch_delay_s`.
"""

from __future__ import annotations

import re
import threading
import time

from .servers import TcpLineServer

STEP_MODELS: dict[str, tuple[float, float]] = {  # model: (max_db, step_db)
    "AG8494H": (11.0, 1.0),
    "AG8494G": (11.0, 1.0),
    "AG8495H": (70.0, 10.0),
    "AG8495G": (70.0, 10.0),
    "AG8496H": (110.0, 10.0),
    "AG8496G": (110.0, 10.0),
}


def _mnemonic(word: str, long: str, short: str) -> bool:
    w = word.upper()
    return w == short or (long.startswith(w) and len(w) >= len(short))


class Keysight11713C:
    def __init__(self, serial_number: str = "MY53120001", banks: int = 2, switch_delay_s: float = 0.0):
        self.serial_number, self.banks, self.switch_delay_s = serial_number, banks, switch_delay_s
        self.models = {(b, s): ("AG8494H" if s == "X" else "AG8496H") for b in range(1, banks + 1) for s in "XY"}
        self.att_db = {(b, s): 0.0 for b in range(1, banks + 1) for s in "XY"}
        self.errors: list[str] = []
        self.commands: list[str] = []
        self.switch_count = 0
        self._lock = threading.Lock()

    def _target(self, path: list[str], head: tuple[str, str]) -> tuple[int, str] | None:
        if len(path) != 3 or not _mnemonic(path[0], *head):
            return None
        m = re.fullmatch(r"BANK([0-9])", path[1].upper())
        side = path[2].upper()
        if not m or side not in ("X", "Y") or not 1 <= int(m.group(1)) <= self.banks:
            return None
        return int(m.group(1)), side

    def handle(self, command: str) -> str | None:
        with self._lock:
            self.commands.append(command)
            text = command.strip()
            head, _, arg = text.partition(" ")
            arg = arg.strip()
            up = head.upper()
            if up == "*IDN?":
                return f"Agilent Technologies,11713C,{self.serial_number},2.10"
            if up in ("*RST", "*CLS"):
                if up == "*RST":
                    self.att_db = {k: 0.0 for k in self.att_db}
                self.errors.clear()
                return None
            if up in ("SYST:ERR?", "SYSTEM:ERROR?", "SYST:ERR:NEXT?"):
                return self.errors.pop(0) if self.errors else '+0,"No error"'
            query = head.endswith("?")
            path = head.rstrip("?").lstrip(":").split(":")
            for mnemonic, kind in ((("ATTENUATOR", "ATT"), "att"), (("CONFIGURE", "CONF"), "conf")):
                target = self._target(path, mnemonic)
                if target is None:
                    continue
                if kind == "att":
                    if query:
                        return f"{self.att_db[target]:g}"
                    max_db, step_db = STEP_MODELS[self.models[target]]
                    try:
                        v = float(arg)
                    except ValueError:
                        self.errors.append('-104,"Data type error"')
                        return None
                    if not 0 <= v <= max_db or abs(v / step_db - round(v / step_db)) > 1e-6:
                        self.errors.append('-222,"Data out of range"')
                        return None
                    if v != self.att_db[target]:
                        self.switch_count += 1
                        if self.switch_delay_s:
                            time.sleep(self.switch_delay_s)  # relays take milliseconds to settle
                    self.att_db[target] = v
                    return None
                if query:
                    return self.models[target]
                if arg.upper() not in STEP_MODELS:
                    self.errors.append('-224,"Illegal parameter value"')
                    return None
                self.models[target] = arg.upper()
                return None
            self.errors.append('-113,"Undefined header"')
            return None

    def total_db(self, bank: int) -> float:
        return self.att_db[(bank, "X")] + self.att_db[(bank, "Y")]

    def serve(self, port: int = 0) -> TcpLineServer:
        return TcpLineServer(self, port=port, eol="\n").start()
