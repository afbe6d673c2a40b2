"""Mini-Circuits RUDAT / RCDAT / RC4DAT over serial, telnet, HTTP and USB HID.

Same ASCII commands on every transport (anchors.md §3.1, verified via ACTS and osmo-gsm-tester):
`:SETATT=<dB>` / `:ATT?` on single-channel models, `:CHAN:<n>:SETATT:<dB>` / `:CHAN:<n>:ATT?` on
multi-channel ones; set replies 1 = ok, 0 = failed, 2 = clipped to the device maximum.
Serial settings 9600 8N1 with a CR terminator are an assumption [M] (override: options.baudrate).
USB HID (VID 0x20CE, PID 0x0023, `*`-prefixed command, reply from byte 1) is verified only against
our emulator: there is no device here.
"""

from __future__ import annotations

import re

from ..config import AttenuatorConfig
from ..driver import Attenuator, AttenuatorError, DeviceInfo, register
from ..transport import HidLink, HttpLink, LineLink, SerialLink, TcpLink, split_host_port

MINICIRCUITS_VID = 0x20CE
MINICIRCUITS_PID = 0x0023


def model_channels(model: str) -> int:
    """Channels a Mini-Circuits model has: RC<n>DAT-… has n (RC2DAT, RC4DAT; the virtual lab's bridge names
    larger boxes the same way), RUDAT/RCDAT one."""
    m = re.match(r"^RC(\d+)DAT", model.upper())
    return int(m.group(1)) if m else 1


def _fmt(value_db: float) -> str:
    return f"{value_db:.2f}"


@register(
    models=("minicircuits-rudat", "minicircuits-rcdat", "minicircuits-rc4dat"),
    transports=("serial", "telnet", "http", "usb-hid"),
)
class MiniCircuits(Attenuator):
    def __init__(self, config: AttenuatorConfig, hid_fd: int | None = None):
        super().__init__(config)
        self._hid_fd = hid_fd  # the emulator's report pipe stands in for /dev/hidrawN
        self._line: LineLink | None = None
        self._http: HttpLink | None = None
        self._hid: HidLink | None = None

    def _open(self) -> None:
        cfg = self.config
        if cfg.transport == "serial":
            baud = int(cfg.option("baudrate", 9600))  # type: ignore[arg-type]
            self._line = SerialLink(cfg.address, baud, cfg.timeout_s, eol_out="\r")
        elif cfg.transport == "telnet":
            host, port = split_host_port(cfg.address, 23, f"{cfg.name}.address")
            self._line = TcpLink(host, port, cfg.timeout_s, eol_out="\r\n")
        elif cfg.transport == "http":
            self._http = HttpLink(cfg.address, cfg.timeout_s)
        else:
            if self._hid_fd is not None:
                self._hid = HidLink(self._hid_fd, cfg.timeout_s, "hid-emulator")
            else:
                path = cfg.address or HidLink.find(MINICIRCUITS_VID, MINICIRCUITS_PID)
                self._hid = HidLink.open_path(path, cfg.timeout_s)

    def _close(self) -> None:
        for link in (self._line, self._http):
            if link is not None:
                link.close()
        if self._hid is not None and self._hid_fd is None:
            self._hid.close()
        self._line = self._http = self._hid = None

    def command(self, text: str) -> str:
        """Send one command, return the reply text."""
        if self._line is not None:
            return self._line.query(text)
        if self._http is not None:
            return self._http.get("/" + text)
        if self._hid is not None:
            data = self._hid.exchange(b"*" + text.encode("ascii"))
            body = data[1:]
            for i, b in enumerate(body):
                if b in (0, 255):
                    body = body[:i]
                    break
            return body.decode("ascii", errors="replace").strip()
        raise AttenuatorError(f"{self.config.name}: not open")

    def _single(self) -> bool:
        return self.config.channels == 1

    def _write(self, channel: int, value_db: float) -> float | None:
        cmd = f":SETATT={_fmt(value_db)}" if self._single() else f":CHAN:{channel}:SETATT:{_fmt(value_db)}"
        reply = self.command(cmd)
        if reply == "1":
            return None
        if reply == "2":
            raise AttenuatorError(
                f"{self.config.name}: device clipped {value_db} dB to its maximum (reply 2): "
                "the lab max_db exceeds the device range"
            )
        if reply == "0":
            raise AttenuatorError(f"{self.config.name}: device refused {cmd!r} (reply 0)")
        raise AttenuatorError(f"{self.config.name}: unexpected reply {reply[:60]!r} to {cmd!r}")

    def _read(self, channel: int) -> float:
        cmd = ":ATT?" if self._single() else f":CHAN:{channel}:ATT?"
        reply = self.command(cmd)
        try:
            return float(reply.split()[0])
        except (ValueError, IndexError):
            raise AttenuatorError(f"{self.config.name}: unexpected reply {reply[:60]!r} to {cmd!r}") from None

    def _not_this_box(self, what: str) -> AttenuatorError:
        """The error for a box that does not answer as a Mini-Circuits: it names what the box is when it
        answers SCPI's `*IDN?` (a Keysight 11713C on the address keeps silent on `:MN?`)."""
        try:
            idn = self.command("*IDN?")
        except AttenuatorError:
            idn = ""
        found = f"; it answers *IDN? with {idn[:80]!r}" if idn and not idn.upper().startswith("MN=") else ""
        return AttenuatorError(f"{self.config.name}: not a Mini-Circuits attenuator at {self.config.address}: "
                               f"{what}{found}: check the entry's model ({self.config.model}) and address")

    def _describe(self) -> DeviceInfo:
        def field(cmd: str, key: str) -> str:
            reply = self.command(cmd)
            if not reply.upper().startswith(key + "="):
                raise AttenuatorError(f"{self.config.name}: unexpected reply {reply[:60]!r} to {cmd!r}")
            return reply.split("=", 1)[1].strip()

        try:
            model = field(":MN?", "MN")
        except AttenuatorError as exc:  # the first question to the box: the wrong box fails here
            raise self._not_this_box(f"{exc} (to ':MN?')".removeprefix(f"{self.config.name}: ")) from None
        try:
            max_db = float(model.rsplit("-", 1)[1])  # model-maxfreq-maxatten, e.g. RCDAT-6000-110
        except (IndexError, ValueError):
            max_db = self.config.max_db
        channels = model_channels(model)
        return DeviceInfo(
            model=model,
            serial=field(":SN?", "SN"),
            firmware=field(":FIRMWARE?", "FIRMWARE"),
            channels=channels,
            min_db=0.0,
            max_db=max_db,
            step_db=0.25,
        )
