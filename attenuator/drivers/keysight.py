"""Keysight/Agilent 11713C driving a pair of step attenuators per bank, through pyvisa.

Channel n is BANK n; its X and Y attenuators (default 8494 fine 0–11 dB/1 dB and 8496 coarse
0–110 dB/10 dB) add up to the channel value. A change applies the increasing section first, so the
total never dips below both the old and the new value while relays move (receivers stay protected).
Mechanical relays wear out and take milliseconds: schedules faster than options.min_interval_s
(default 1 s) are refused at validation. Address: a VISA resource, e.g. TCPIP::host::5025::SOCKET.
Needs pyvisa + pyvisa-py (pip). Verified only against our SCPI emulator.
"""

from __future__ import annotations

from ..config import AttenuatorConfig
from ..driver import Attenuator, AttenuatorError, DeviceInfo, LinkClosed, register, reply_number
from ..emulators.keysight import STEP_MODELS


def split_total(total_db: float, x_model: str, y_model: str) -> tuple[float, float]:
    """(x_db, y_db) with x + y == total, x on the fine grid and y on the coarse grid."""
    x_max, x_step = STEP_MODELS[x_model]
    y_max, y_step = STEP_MODELS[y_model]
    y = min(int(total_db // y_step) * y_step, y_max)
    x = total_db - y
    while x > x_max and y + y_step <= y_max:
        y += y_step
        x -= y_step
    if x < 0 or x > x_max or abs(x / x_step - round(x / x_step)) > 1e-6:
        raise AttenuatorError(f"{total_db} dB cannot be made from {x_model} + {y_model}")
    return round(x, 6), round(y, 6)


@register(models=("keysight-11713c",), transports=("visa",))
class Keysight11713C(Attenuator):
    def __init__(self, config: AttenuatorConfig):
        super().__init__(config)
        self.min_interval_s = config.min_interval_s
        self._inst = None
        self._models: dict[tuple[int, str], str] = {}

    def _open(self) -> None:
        try:
            import pyvisa
        except ImportError as exc:
            raise AttenuatorError("keysight-11713c needs pyvisa and pyvisa-py: pip install pyvisa pyvisa-py") from exc
        backend = str(self.config.option("visa_backend", "@py"))
        try:
            rm = pyvisa.ResourceManager(backend)
            inst = rm.open_resource(self.config.address, timeout=int(self.config.timeout_s * 1000))
            inst.read_termination = "\n"
            inst.write_termination = "\n"
        except Exception as exc:
            raise LinkClosed(f"{self.config.name}: cannot open {self.config.address}: {exc}") from exc
        self._inst = inst
        for bank in range(1, self.config.channels + 1):
            for side, default in (("X", "AG8494H"), ("Y", "AG8496H")):
                model = str(self.config.option(f"bank{bank}_{side.lower()}_model", "")).upper()
                if model:
                    self._scpi(f"CONF:BANK{bank}:{side} {model}")
                else:
                    model = self._query(f"CONF:BANK{bank}:{side}?").strip().upper() or default
                if model not in STEP_MODELS:
                    raise AttenuatorError(f"{self.config.name}: bank {bank} {side} is {model!r}", )
                self._models[(bank, side)] = model
            self._check_errors(f"configure bank {bank}")

    def _close(self) -> None:
        if self._inst is not None:
            try:
                self._inst.close()
            except Exception:  # noqa: BLE001
                pass
            self._inst = None

    def _scpi(self, text: str) -> None:
        try:
            self._inst.write(text)  # type: ignore[union-attr]
        except Exception as exc:
            raise LinkClosed(f"{self.config.name}: write {text!r} failed: {exc}") from exc

    def _query(self, text: str) -> str:
        try:
            return str(self._inst.query(text)).strip()  # type: ignore[union-attr]
        except Exception as exc:
            raise LinkClosed(f"{self.config.name}: query {text!r} failed: {exc}") from exc

    def _check_errors(self, what: str) -> None:
        first = self._query("SYST:ERR?")
        code = first.split(",", 1)[0].strip()
        try:
            ok = int(code) == 0
        except ValueError:
            raise AttenuatorError(f"{self.config.name}: unexpected SYST:ERR? reply {first[:60]!r}") from None
        if not ok:
            for _ in range(20):  # empty the queue so the next check starts clean
                if self._query("SYST:ERR?").startswith(("+0", "0")):
                    break
            raise AttenuatorError(f"{self.config.name}: {what}: instrument error {first}")

    def _write(self, channel: int, value_db: float) -> float | None:
        x_model, y_model = self._models[(channel, "X")], self._models[(channel, "Y")]
        x, y = split_total(value_db, x_model, y_model)
        old_x = reply_number(self._query(f"ATT:BANK{channel}:X?"), f"{self.config.name}: bank {channel} X")
        old_y = reply_number(self._query(f"ATT:BANK{channel}:Y?"), f"{self.config.name}: bank {channel} Y")
        steps = [("X", x, x - old_x), ("Y", y, y - old_y)]
        steps.sort(key=lambda s: -s[2])  # the section that increases moves first
        for side, v, _delta in steps:
            self._scpi(f"ATT:BANK{channel}:{side} {v:g}")
        self._check_errors(f"set bank {channel} to {value_db} dB")
        return None

    def _read(self, channel: int) -> float:
        return (reply_number(self._query(f"ATT:BANK{channel}:X?"), f"{self.config.name}: bank {channel} X")
                + reply_number(self._query(f"ATT:BANK{channel}:Y?"), f"{self.config.name}: bank {channel} Y"))

    def _describe(self) -> DeviceInfo:
        idn = self._query("*IDN?").split(",")
        if len(idn) < 4:
            raise AttenuatorError(f"{self.config.name}: unexpected *IDN? reply {','.join(idn)[:80]!r}")
        max_db = min(STEP_MODELS[self._models[(b, "X")]][0] + STEP_MODELS[self._models[(b, "Y")]][0]
                     for b in range(1, self.config.channels + 1))
        return DeviceInfo(
            model=idn[1].strip(), serial=idn[2].strip(), firmware=idn[3].strip(), channels=self.config.channels,
            min_db=0.0, max_db=max_db, step_db=STEP_MODELS[self._models[(1, "X")]][1], min_interval_s=self.min_interval_s,
        )
