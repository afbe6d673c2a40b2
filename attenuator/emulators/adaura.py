"""Adaura AD-USB4AR36G95 emulator (4 channels, 0–95 dB, 0.25 dB) on USB serial, telnet and HTTP.

Facts used (anchors.md §3.4, verified via the AdauraAttenuator library, FW 1.21): commands in
either case, `set <ch> <dB>` → `Channel <ch> successfully set to <v>`, `saa <dB>` → `All channels set
to <v>.`, `status` → `Channel N: <v>` lines, `info` (Model, SN, FW Ver, ..., IP Address, DHCP),
115200 baud, telnet login admin/adaura, HTTP `GET /execute.php?<command>`. Assumptions: the error
texts (`Invalid channel`, `Invalid attenuation`, `Unknown command`), the number format (two
decimals), the login prompts, the exact info field layout.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from .servers import HttpServer, PtyServer, TcpLineServer


class AdauraDevice:
    def __init__(
        self,
        model: str = "AD-USB4AR36G95",
        serial_number: str = "2104000123",
        firmware: str = "1.21",
        channels: int = 4,
        max_db: float = 95.0,
        step_db: float = 0.25,
        on_set: Callable[[int, float], None] | None = None,
    ):
        self.model, self.serial_number, self.firmware = model, serial_number, firmware
        self.channels, self.max_db, self.step_db = channels, max_db, step_db
        self.att_db = [0.0] * channels
        self.on_set = on_set
        self.commands: list[str] = []
        self._lock = threading.Lock()

    def _value(self, text: str) -> float | None:
        try:
            v = float(text)
        except ValueError:
            return None
        if not 0 <= v <= self.max_db:
            return None
        return round(round(v / self.step_db) * self.step_db, 4)

    def _apply(self, ch: int, v: float) -> None:
        self.att_db[ch - 1] = v
        if self.on_set is not None:
            self.on_set(ch, v)

    def handle(self, command: str) -> str | None:
        with self._lock:
            self.commands.append(command)
            words = command.strip().split()
            if not words:
                return None
            op, args = words[0].lower(), words[1:]
            if op == "set" and len(args) == 2:
                if not args[0].isdigit() or not 1 <= int(args[0]) <= self.channels:
                    return "Invalid channel"
                v = self._value(args[1])
                if v is None:
                    return "Invalid attenuation"
                self._apply(int(args[0]), v)
                return f"Channel {int(args[0])} successfully set to {v:.2f}"
            if op == "saa" and len(args) == 1:
                v = self._value(args[0])
                if v is None:
                    return "Invalid attenuation"
                for ch in range(1, self.channels + 1):
                    self._apply(ch, v)
                return f"All channels set to {v:.2f}."
            if op == "status" and not args:
                return "\r\n".join(f"Channel {i + 1}: {v:.2f}" for i, v in enumerate(self.att_db))
            if op == "info" and not args:
                return "\r\n".join(
                    [
                        f"Model: {self.model}",
                        f"SN: {self.serial_number}",
                        f"FW Ver: {self.firmware}",
                        "IP Address: 192.168.1.100",
                        "DHCP: Disabled",
                    ]
                )
            return "Unknown command"

    def http_route(self, target: str) -> tuple[int, str]:
        path, _, query = target.partition("?")
        if path != "/execute.php":
            return 404, "Not Found"
        return 200, self.handle(query.replace("+", " ")) or ""

    def serve_pty(self, link: str | None = None) -> PtyServer:
        return PtyServer(self, eol="\r\n", link=link).start()

    def serve_telnet(self, port: int = 0) -> TcpLineServer:
        return TcpLineServer(self, port=port, eol="\r\n", login=("admin", "adaura")).start()

    def serve_http(self, port: int = 0) -> HttpServer:
        return HttpServer(self.http_route, port=port).start()
