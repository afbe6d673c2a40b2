"""JFW Industries 50PA / 50BA attenuator benches over telnet (port 3001) and RS-232.

Commands (anchors.md §3.2, verified via two open drivers): `SMA <port> <dB>` to set, `RA <port>` to
read (`Atten #<n> = <v>dB`), banner with the model on connect, one telnet session at a time.
The driver does not rely on set commands answering: it follows every set with `RA <port>` and reads
lines until that port's line, raising on any error line on the way (`Syntax Error`,
`Atten <n> does not exist`). Serial 9600 8N1, CR terminator: assumption [M] (options.baudrate).
"""

from __future__ import annotations

import re
import time

from ..config import AttenuatorConfig
from ..driver import Attenuator, AttenuatorError, DeviceInfo, LinkClosed, register, reply_number
from ..transport import LineLink, SerialLink, TcpLink, split_host_port

_ATTEN = re.compile(r"^Atten\s*#\s*(\d+)\s*=\s*([-+0-9.]+)\s*dB$", re.IGNORECASE)
_ERRORS = ("syntax error", "does not exist")


@register(models=("jfw-50pa", "jfw-50ba"), transports=("telnet", "serial"))
class Jfw(Attenuator):
    def __init__(self, config: AttenuatorConfig):
        super().__init__(config)
        self._link: LineLink | None = None
        self.banner = ""

    def _open(self) -> None:
        cfg = self.config
        if cfg.transport == "serial":
            self._link = SerialLink(cfg.address, int(cfg.option("baudrate", 9600)), cfg.timeout_s, eol_out="\r")  # type: ignore[arg-type]
            return
        host, port = split_host_port(cfg.address, 3001, f"{cfg.name}.address")
        # A session just closed by us may still look open to the bench for a moment: retry briefly.
        deadline = time.monotonic() + float(cfg.option("session_wait_s", 0.5))  # type: ignore[arg-type]
        while True:
            link = TcpLink(host, port, cfg.timeout_s, eol_out="\r\n")
            try:
                self.banner = link.readline(float(cfg.option("banner_timeout_s", 1.0)))  # type: ignore[arg-type]
                break
            except LinkClosed:
                link.close()
                if time.monotonic() < deadline:
                    time.sleep(0.05)
                    continue
                raise AttenuatorError(
                    f"{cfg.name}: {host}:{port} closed the session at once: JFW allows one telnet session at a "
                    "time and another one is open (close it, or stop the other controller)"
                ) from None
            except AttenuatorError:
                self.banner = ""  # no banner is not fatal: some firmware sends none
                break
        self._link = link

    def _close(self) -> None:
        if self._link is not None:
            self._link.close()
            self._link = None

    def _lines_until_port(self, port: int) -> float:
        """The `Atten #port = x dB` line among what the box prints (echoes, prompts, other ports), within the
        timeout: a box that keeps talking without ever naming the port must not hold us forever."""
        assert self._link is not None
        deadline = time.monotonic() + self.config.timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AttenuatorError(f"{self.config.name}: no reading for port {port} within {self.config.timeout_s} s")
            line = self._link.readline(left)
            m = _ATTEN.match(line)
            if m and int(m.group(1)) == port:
                return reply_number(m.group(2), f"{self.config.name}: port {port}")
            if any(e in line.lower() for e in _ERRORS):
                raise AttenuatorError(f"{self.config.name}: device replied {line!r}")

    def _write(self, channel: int, value_db: float) -> float | None:
        assert self._link is not None
        value = f"{value_db:g}" if value_db == int(value_db) else f"{value_db:.2f}"
        self._link.drain()
        self._link.send(f"SMA {channel} {value}")
        self._link.send(f"RA {channel}")
        return self._lines_until_port(channel)

    def _read(self, channel: int) -> float:
        assert self._link is not None
        self._link.drain()
        self._link.send(f"RA {channel}")
        return self._lines_until_port(channel)

    def _describe(self) -> DeviceInfo:
        assert self._link is not None
        self._link.drain()
        self._link.send("RAA")
        ports, other = 0, ""
        # RAA prints one line per attenuator; stop once a short quiet period follows the last one
        while True:
            try:
                line = self._link.readline(min(0.1, self.config.timeout_s) if ports else self.config.timeout_s)
            except LinkClosed:
                raise
            except AttenuatorError:
                break
            if _ATTEN.match(line):
                ports += 1
            elif any(e in line.lower() for e in _ERRORS):
                raise AttenuatorError(f"{self.config.name}: device replied {line!r}")
            elif line.strip() and not other:
                other = line.strip()
        if not ports:  # another vendor's box answers RAA with an error of its own, or not at all
            raise AttenuatorError(f"{self.config.name}: no 'Atten #N = X dB' line in the answer to RAA: not a JFW "
                                  f"50PA/50BA bench" + (f" (it said {other[:60]!r})" if other else " (no answer)"))
        m = re.search(r"\b(50[PB]A-[0-9A-Z-]+)", self.banner)
        return DeviceInfo(
            model=m.group(1) if m else self.config.model,
            serial="",
            firmware=self.banner,
            channels=ports,
            min_db=0.0,
            max_db=self.config.max_db,
            step_db=self.config.step_db,
        )
