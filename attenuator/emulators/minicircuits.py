"""Mini-Circuits RUDAT/RCDAT/RC4DAT emulator: the ASCII command set shared by every transport.

Facts used (anchors.md §3.1): `:SETATT=<dB>`, `:ATT?`, `:MN?` → `MN=<model>`, `:SN?` → `SN=<sn>`,
`:FIRMWARE?`, `:CHAN:<n>:SETATT:<dB>`, `:CHAN:<n>:ATT?`, `:CHAN:1:2:SETATT:<dB>` (several channels),
`:STARTUPATT:VALUE:<dB>` / `?`; set replies `1` ok, `0` failed, `2` clipped to the maximum [verified
via ACTS and osmo-gsm-tester drivers]. HID: command prefixed by `*`, reply from byte 1 of a 64-byte
report until a 0 or 255 byte [verified via two open drivers]. Assumptions (not in a source we read):
the text `Invalid Command` for unknown commands, `0` for a non-numeric or negative value or an unknown
channel, rounding to the nearest 0.25 dB step, `:ATT?` on a multi-channel model listing all channels
separated by spaces, replies ending in CRLF on serial/telnet.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable

from .servers import HidReportServer, HttpServer, PtyServer, TcpLineServer

_CHAN_SET = re.compile(r"^CHAN:((?:\d+:)+)SETATT[:=](.+)$")
_CHAN_GET = re.compile(r"^CHAN:(\d+):ATT\?$")


def format_db(value_db: float) -> str:
    return f"{value_db:.2f}".rstrip("0").rstrip(".")


class MiniCircuitsDevice:
    """State and grammar of one device; shared by every server that exposes it."""

    def __init__(
        self,
        model: str = "RCDAT-6000-110",
        serial_number: str = "11901010001",
        firmware: str = "C9",
        channels: int | None = None,
        step_db: float = 0.25,
        on_set: Callable[[int, float], None] | None = None,
    ):
        self.model, self.serial_number, self.firmware = model, serial_number, firmware
        self.max_db = float(model.rsplit("-", 1)[1])
        match = re.match(r"^RC(\d+)DAT", model.upper())
        self.channels = channels if channels is not None else (int(match.group(1)) if match else 1)
        self.step_db = step_db
        self.att_db = [0.0] * self.channels
        self.startup_db = 0.0
        self.on_set = on_set
        self.commands: list[str] = []
        self._lock = threading.Lock()

    def _apply(self, channels: list[int], text: str) -> str:
        try:
            value = float(text)
        except ValueError:
            return "0"
        if not math.isfinite(value) or value < 0 or any(c < 1 or c > self.channels for c in channels):
            return "0"
        reply = "1"
        if value > self.max_db:
            value, reply = self.max_db, "2"
        value = round(math.floor(value / self.step_db + 0.5) * self.step_db, 4)
        if self.on_set is not None:
            try:
                for ch in channels:
                    self.on_set(ch, value)
            except Exception:  # noqa: BLE001 - the bridged cell refused: the set failed
                return "0"
        for ch in channels:
            self.att_db[ch - 1] = value
        return reply

    def handle(self, command: str) -> str | None:
        with self._lock:
            self.commands.append(command)
            cmd = command.strip().lstrip("*").rstrip(";").strip().upper().lstrip(":")
            if cmd == "MN?":
                return f"MN={self.model}"
            if cmd == "SN?":
                return f"SN={self.serial_number}"
            if cmd == "FIRMWARE?":
                return f"FIRMWARE={self.firmware}"
            if cmd.startswith("SETATT="):
                return self._apply(list(range(1, self.channels + 1)), cmd[len("SETATT="):])
            if cmd == "ATT?":
                return " ".join(format_db(v) for v in self.att_db)
            m = _CHAN_SET.match(cmd)
            if m:
                chans = [int(c) for c in m.group(1).strip(":").split(":")]
                return self._apply(chans, m.group(2))
            m = _CHAN_GET.match(cmd)
            if m:
                ch = int(m.group(1))
                return format_db(self.att_db[ch - 1]) if 1 <= ch <= self.channels else "0"
            if cmd.startswith("STARTUPATT:VALUE:"):
                try:
                    self.startup_db = min(float(cmd.split(":")[-1]), self.max_db)
                except ValueError:
                    return "0"
                return "1"
            if cmd == "STARTUPATT:VALUE?":
                return format_db(self.startup_db)
            return "Invalid Command"

    # ----- transports -----
    def http_route(self, target: str) -> tuple[int, str]:
        return 200, self.handle(target.lstrip("/")) or ""

    def hid_report(self, payload: bytes) -> bytes:
        text = payload.split(b"\x00", 1)[0].decode("ascii", errors="replace")
        reply = self.handle(text) or ""
        code = payload[:1] or b"*"
        return (code + reply.encode("ascii", errors="replace")[:62]).ljust(64, b"\x00")

    def serve_pty(self, link: str | None = None) -> PtyServer:
        return PtyServer(self, eol="\r\n", link=link).start()

    def serve_telnet(self, port: int = 0) -> TcpLineServer:
        return TcpLineServer(self, port=port, eol="\r\n").start()

    def serve_http(self, port: int = 0) -> HttpServer:
        return HttpServer(self.http_route, port=port).start()

    def serve_hid(self) -> HidReportServer:
        return HidReportServer(self.hid_report).start()
