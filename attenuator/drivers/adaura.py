"""Adaura USB4AR attenuators over USB serial (115200), telnet (login) and HTTP (execute.php).

Grammar verified via the AdauraAttenuator library (anchors.md §3.4): `set <ch> <dB>` →
`Channel <ch> successfully set to <v>`, `status` → `Channel N: <v>` lines, `info` → `Key: value`
lines ending with DHCP. Login prompts and error texts are assumptions (see the emulator).
"""

from __future__ import annotations

import re
import urllib.parse

from ..config import AttenuatorConfig
from ..driver import Attenuator, AttenuatorError, DeviceInfo, LinkClosed, register, reply_number
from ..transport import HttpLink, LineLink, SerialLink, TcpLink, split_host_port

_SET_OK = re.compile(r"^Channel (\d+) successfully set to ([-+0-9.]+)$", re.IGNORECASE)
_STATUS = re.compile(r"^Channel (\d+):\s*([-+0-9.]+)$", re.IGNORECASE)


@register(models=("adaura",), transports=("serial", "telnet", "http"))
class Adaura(Attenuator):
    def __init__(self, config: AttenuatorConfig):
        super().__init__(config)
        self._line: LineLink | None = None
        self._http: HttpLink | None = None

    def _open(self) -> None:
        cfg = self.config
        if cfg.transport == "serial":
            self._line = SerialLink(cfg.address, int(cfg.option("baudrate", 115200)), cfg.timeout_s, eol_out="\r\n")  # type: ignore[arg-type]
        elif cfg.transport == "http":
            self._http = HttpLink(cfg.address, cfg.timeout_s)
        else:
            host, port = split_host_port(cfg.address, 23, f"{cfg.name}.address")
            link = TcpLink(host, port, cfg.timeout_s, eol_out="\r\n")
            try:
                self._login(link)
            except AttenuatorError:
                link.close()
                raise
            self._line = link

    def _login(self, link: TcpLink) -> None:
        # Prompts end without a newline, so wait for the bytes rather than for a line.
        user = str(self.config.option("user", "admin"))
        password = str(self.config.option("password", "adaura"))  # factory default, not a secret
        for prompt, answer in (("login:", user), ("password:", password)):
            try:
                link.expect(prompt)
            except LinkClosed:
                raise
            except AttenuatorError:
                raise AttenuatorError(f"{self.config.name}: no {prompt!r} prompt from {link.where}") from None
            link.send(answer)
        reply = link.readline()
        if "incorrect" in reply.lower() or "fail" in reply.lower():
            raise AttenuatorError(f"{self.config.name}: telnet login refused: {reply!r}")

    def _close(self) -> None:
        for link in (self._line, self._http):
            if link is not None:
                link.close()
        self._line = self._http = None

    def _command(self, text: str, lines: int = 1, until: str | None = None) -> list[str]:
        if self._http is not None:
            body = self._http.get("/execute.php?" + urllib.parse.quote(text))
            return [ln.strip() for ln in body.splitlines() if ln.strip()]
        assert self._line is not None
        self._line.drain()
        self._line.send(text)
        out = [self._line.readline()]
        while len(out) < lines or (until is not None and not out[-1].lower().startswith(until)):
            try:
                out.append(self._line.readline(min(0.5, self.config.timeout_s)))
            except LinkClosed:
                raise
            except AttenuatorError:
                break
            if out[0].lower().startswith(("unknown", "invalid")):
                break
        return out

    def _write(self, channel: int, value_db: float) -> float | None:
        reply = self._command(f"set {channel} {value_db:.2f}")[0]
        m = _SET_OK.match(reply)
        if not m or int(m.group(1)) != channel:
            raise AttenuatorError(f"{self.config.name}: set {channel} {value_db:.2f} → {reply[:60]!r}")
        return reply_number(m.group(2), f"{self.config.name}: channel {channel}")

    def _read(self, channel: int) -> float:
        for line in self._command("status", lines=self.config.channels):
            m = _STATUS.match(line)
            if m and int(m.group(1)) == channel:
                return reply_number(m.group(2), f"{self.config.name}: channel {channel}")
        raise AttenuatorError(f"{self.config.name}: status did not list channel {channel}")

    def _describe(self) -> DeviceInfo:
        fields: dict[str, str] = {}
        for line in self._command("info", until="dhcp"):
            key, sep, value = line.partition(":")
            if sep:
                fields[key.strip().lower()] = value.strip()
        if "model" not in fields:
            raise AttenuatorError(f"{self.config.name}: info gave no Model line")
        model = fields["model"]
        m = re.search(r"USB(\d)", model)
        return DeviceInfo(
            model=model,
            serial=fields.get("sn", ""),
            firmware=fields.get("fw ver", ""),
            channels=int(m.group(1)) if m else self.config.channels,
            min_db=0.0,
            max_db=95.0 if model.endswith("95") else self.config.max_db,
            step_db=0.25,
        )
