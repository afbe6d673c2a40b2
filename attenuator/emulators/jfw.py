"""JFW Industries 50PA/50BA attenuator bench emulator (Ethernet/RS-232 "3.X.X firmware").

Facts used (anchors.md §3.2, verified via two open drivers): telnet on TCP port 3001, CRLF;
`RAA` → one `Atten #<n> = <v>dB` line per attenuator; `RA <p>...`; `SMA <p> <v> ...`; `SAA <v>`;
`SAR<p> <v>` (legacy set); `REBOOT`; errors `Atten <n> does not exist` and `Syntax Error`; a welcome
banner that contains the model; one telnet session at a time. Assumptions: set commands answer
nothing on success; a value outside the range or off the step grid is a `Syntax Error`; the second
session is closed right after connect (we send no text to it); banner wording around the model.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable

from .servers import PtyServer, TcpLineServer

JFW_TELNET_PORT = 3001


def _fmt(value_db: float) -> str:
    return f"{value_db:.2f}".rstrip("0").rstrip(".")


class JfwDevice:
    def __init__(
        self,
        model: str = "50PA-220-16",
        channels: int = 4,
        max_db: float = 95.0,
        step_db: float = 1.0,
        on_set: Callable[[int, float], None] | None = None,
    ):
        self.model, self.channels, self.max_db, self.step_db = model, channels, max_db, step_db
        self.att_db = [0.0] * channels
        self.on_set = on_set
        self.commands: list[str] = []
        self._lock = threading.Lock()

    @property
    def banner(self) -> str:
        return f"JFW Industries Inc. Model {self.model} Attenuator Assembly, firmware 3.1.2"

    def _line(self, port: int) -> str:
        return f"Atten #{port} = {_fmt(self.att_db[port - 1])}dB"

    def _valid_value(self, text: str) -> float | None:
        try:
            value = float(text)
        except ValueError:
            return None
        steps = value / self.step_db
        if not 0 <= value <= self.max_db or abs(steps - round(steps)) > 1e-6:
            return None
        return value

    def _set(self, pairs: list[tuple[str, str]]) -> str | None:
        errors = []
        parsed: list[tuple[int, float]] = []
        for p_text, v_text in pairs:
            if not p_text.isdigit():
                return "Syntax Error"
            port = int(p_text)
            if not 1 <= port <= self.channels:
                errors.append(f"Atten {port} does not exist")
                continue
            value = self._valid_value(v_text)
            if value is None:
                return "Syntax Error"
            parsed.append((port, value))
        if errors:
            return "\r\n".join(errors)
        for port, value in parsed:
            self.att_db[port - 1] = value
            if self.on_set is not None:
                self.on_set(port, value)
        return None

    def handle(self, command: str) -> str | None:
        with self._lock:
            self.commands.append(command)
            words = command.strip().split()
            if not words:
                return None
            op = words[0].upper()
            args = words[1:]
            if op == "RAA" and not args:
                return "\r\n".join(self._line(p) for p in range(1, self.channels + 1))
            if op == "RA" and args:
                out = []
                for a in args:
                    if not a.isdigit():
                        return "Syntax Error"
                    p = int(a)
                    out.append(self._line(p) if 1 <= p <= self.channels else f"Atten {p} does not exist")
                return "\r\n".join(out)
            if op == "SMA" and args and len(args) % 2 == 0:
                return self._set(list(zip(args[::2], args[1::2], strict=True)))
            if op == "SAA" and len(args) == 1:
                return self._set([(str(p), args[0]) for p in range(1, self.channels + 1)])
            m = re.fullmatch(r"SAR(\d+)", op)
            if m and len(args) == 1:
                return self._set([(m.group(1), args[0])])
            if op == "REBOOT" and not args:
                return None
            return "Syntax Error"

    def serve_telnet(self, port: int = 0) -> TcpLineServer:
        return TcpLineServer(self, port=port, eol="\r\n", banner=self.banner, single_session=True).start()

    def serve_pty(self, link: str | None = None) -> PtyServer:
        return PtyServer(self, eol="\r\n", link=link).start()
