"""One attenuator interface, a registry of backends and the factory (osmo-gsm-tester / labgrid style).

Every backend implements four primitives (_open, _write, _read, _describe, _close); this class adds
what every backend shares: channel and safety-limit checks, quantization to the device step, the
readback check and the safe state.
"""

from __future__ import annotations

import importlib
import math
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import ClassVar, TypeVar


from cellab.errors import CellabError, InputError

from cellab.contracts.attenuator import DeviceInfo

from .config import AttenuatorConfig

T = TypeVar("T")


class AttenuatorError(CellabError):
    """The device refused, answered something unexpected, or could not be reached."""


class LinkClosed(AttenuatorError):
    """The device (or its emulator) went away: the link is closed or could not be opened."""


class LimitError(AttenuatorError):
    """A requested value lies outside the lab's safety limits."""


def reply_number(text: str, what: str) -> float:
    """A number a device printed ("31.5", "-0"); a garbled or non-finite one is the device's error, not ours."""
    try:
        value = float(text)
    except ValueError:
        raise AttenuatorError(f"{what}: the device replied {text[:40]!r}, not a number") from None
    if not math.isfinite(value):
        raise AttenuatorError(f"{what}: the device replied {text[:40]!r}, not a finite number")
    return value


def quantize_db(value_db: float, step_db: float) -> float:
    """Nearest multiple of the device step (half-way values round up, as a user expects)."""
    steps = math.floor(value_db / step_db + 0.5 + 1e-9)
    return round(steps * step_db, 6)


class Attenuator(ABC):
    """Base of every backend. Thread-safe: one lock serialises device I/O."""

    # Filled by @register: model names and transports this backend serves.
    models: ClassVar[tuple[str, ...]] = ()
    transports: ClassVar[tuple[str, ...]] = ()
    min_interval_s: float = 0.0  # shortest update spacing the device tolerates

    def __init__(self, config: AttenuatorConfig):
        self.config = config
        self._lock = threading.RLock()
        self._opened = False
        self.last_set_db: dict[int, float] = {}
        self.last_applied_s = 0.0  # monotonic time the last set command was acknowledged

    # ----- primitives each backend writes -----
    @abstractmethod
    def _open(self) -> None: ...

    @abstractmethod
    def _write(self, channel: int, value_db: float) -> float | None:
        """Send one set command; return the value the device says it applied, if it says one."""

    @abstractmethod
    def _read(self, channel: int) -> float: ...

    @abstractmethod
    def _describe(self) -> DeviceInfo: ...

    @abstractmethod
    def _close(self) -> None: ...

    # ----- the interface -----
    def open(self) -> Attenuator:
        with self._lock:
            if not self._opened:
                self._open()
                self._opened = True
                if self.config.option("check_range", True):
                    try:
                        self._check_range()
                    except Exception:
                        self.close()
                        raise
        return self

    def _check_range(self) -> None:
        """Refuse a lab range the device cannot give (it would clip or refuse mid-schedule)."""
        info = self._described()
        if self.config.max_db > info.max_db + 1e-9 or self.config.channels > info.channels:
            raise AttenuatorError(
                f"{self.config.name}: the inventory says {self.config.channels} channel(s) up to {self.config.max_db} dB "
                f"but the device ({info.model}) has {info.channels} up to {info.max_db} dB"
            )

    def __enter__(self) -> Attenuator:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def channel_list(self) -> list[int]:
        return list(range(1, self.config.channels + 1))

    def check_channel(self, channel: int) -> None:
        if channel not in self.channel_list:
            raise InputError(self.config.name, "channel", f"no channel {channel}", self.channel_list)

    def check_limits(self, value_db: float) -> float:
        """The quantized value, or LimitError if it lies outside [min_db, max_db]."""
        cfg = self.config
        if not math.isfinite(value_db):
            raise LimitError(f"{cfg.name}: attenuation {value_db!r} dB is not a number")
        q = quantize_db(value_db, cfg.step_db)
        if q < cfg.min_db - 1e-9 or q > cfg.max_db + 1e-9:
            raise LimitError(
                f"{cfg.name}: {value_db} dB (quantized {q}) is outside the lab limits [{cfg.min_db}, {cfg.max_db}] dB"
            )
        return q

    def set(self, channel: int, db: float) -> float:
        """Set one channel; returns the value read back (or the commanded one without readback)."""
        self.check_channel(channel)
        q = self.check_limits(db)
        with self._lock:
            reported = self._io(lambda: self._write(channel, q))
            self.last_applied_s = time.monotonic()
            self.last_set_db[channel] = q
            if reported is not None and abs(reported - q) > self.config.step_db / 2:
                raise AttenuatorError(f"{self.config.name}: channel {channel} set to {q} dB but device reports {reported} dB")
            if not self.config.verify_readback:
                return q
            readback = self._io(lambda: self._read(channel))
        if abs(readback - q) > self.config.step_db / 2 + 1e-9:
            raise AttenuatorError(f"{self.config.name}: channel {channel} readback {readback} dB != set {q} dB")
        return readback

    def get(self, channel: int) -> float:
        self.check_channel(channel)
        with self._lock:
            return self._io(lambda: self._read(channel))

    def info(self) -> DeviceInfo:
        with self._lock:
            return self._io(self._described)

    def _described(self) -> DeviceInfo:
        """The backend's description, refused when it has no channel: a box of another vendor (or no box) at
        the address answers a driver's query with nothing it can count, which was reported as 0 channels."""
        info = self._describe()
        if info.channels < 1:
            raise AttenuatorError(f"{self.config.name}: the device at {self.config.address!r} reports no channels: "
                                  f"it does not answer as a {self.config.model} (another vendor's box, or none?)")
        return info

    def _io(self, action: Callable[[], T]) -> T:
        """Run one exchange; if the link was lost, reopen once and retry (device restarted)."""
        self.open()
        try:
            return action()
        except LinkClosed:
            self.reconnect()
            return action()

    def close(self) -> None:
        with self._lock:
            if self._opened:
                self._opened = False
                self._close()

    def reconnect(self) -> None:
        """Drop the link and open it again (after the device or emulator restarted)."""
        with self._lock:
            try:
                self.close()
            except Exception:  # noqa: BLE001 - the old link is already broken
                pass
            self.open()

    def safe_state(self, retry_s: float | None = None) -> dict[int, str]:
        """Every channel to its safe value; never raises.

        A failed channel is retried with a fresh link for up to `retry_s` (options.safe_retry_s,
        default 2 s): a USB-serial glitch or a restarting device should still end up safe.
        """
        budget = float(self.config.option("safe_retry_s", 2.0)) if retry_s is None else retry_s  # type: ignore[arg-type]
        deadline = time.monotonic() + budget
        outcome: dict[int, str] = {}
        for ch in self.channel_list:
            attempt = 0
            while True:
                try:
                    if attempt:
                        self.reconnect()
                    self.set(ch, self.config.safe_value_db)
                    outcome[ch] = "ok"
                    break
                except Exception as exc:  # noqa: BLE001 - report, keep trying the other channels
                    outcome[ch] = f"failed: {exc}"
                attempt += 1
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.1)
        return outcome


_REGISTRY: dict[tuple[str, str], type[Attenuator]] = {}


def register(models: tuple[str, ...], transports: tuple[str, ...]) -> Callable[[type[Attenuator]], type[Attenuator]]:
    """Class decorator: this backend serves these (model, transport) pairs."""

    def deco(cls: type[Attenuator]) -> type[Attenuator]:
        cls.models, cls.transports = models, transports
        for m in models:
            for t in transports:
                _REGISTRY[(m, t)] = cls
        return cls

    return deco


BACKEND_MODULES = ("minicircuits", "jfw", "adaura", "virtual", "srsenb", "keysight", "vaunix")


def _load_backends() -> None:
    # Importing the modules runs their @register decorators.
    for name in BACKEND_MODULES:
        importlib.import_module(f"{__package__}.drivers.{name}")


def backend_for(model: str, transport: str) -> type[Attenuator]:
    _load_backends()
    try:
        return _REGISTRY[(model, transport)]
    except KeyError:
        pairs = sorted(f"{m}/{t}" for m, t in _REGISTRY)
        raise InputError("attenuator config", "model/transport", f"no backend for {model}/{transport}", pairs) from None


def create(config: AttenuatorConfig, **kwargs: object) -> Attenuator:
    """A backend instance for an inventory entry (not yet opened)."""
    return backend_for(config.model, config.transport)(config, **kwargs)  # type: ignore[call-arg]
