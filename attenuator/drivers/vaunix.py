"""Vaunix Lab Brick LDA attenuators through the vendor SDK (ctypes).

SDK function names (anchors.md §3.3, verified via several ctypes/C users and SDK headers):
fnLDA_SetTestMode, fnLDA_GetNumDevices, fnLDA_GetDevInfo, fnLDA_GetSerialNumber, fnLDA_InitDevice,
fnLDA_CloseDevice, fnLDA_SetChannel, fnLDA_SetAttenuation[HR], fnLDA_GetAttenuation[HR],
fnLDA_GetMaxAttenuation[HR], fnLDA_GetModelName[A], fnLDA_GetLibVersion (Linux libusb SDK) /
fnLDA_GetDLLVersion (Windows DLL).

Units: the *HR* calls count 0.05 dB. The legacy fnLDA_SetAttenuation counted 0.25 dB in older
SDKs, while the Linux libusb SDK source says it "now uses .05db units". We use the HR calls when the
library has them; otherwise the legacy calls with 0.05 dB if the library is the Linux SDK (exports
fnLDA_GetLibVersion) and 0.25 dB if not. That rule is an assumption from those two sources;
options.legacy_unit_db overrides it. Verified only against a fake library built in the tests.
Config: options.library = path of libLDAhid.so / VNX_atten64.dll; address = serial number ("" = first).
"""

from __future__ import annotations

import ctypes
import ctypes.util

from ..config import AttenuatorConfig
from ..driver import Attenuator, AttenuatorError, DeviceInfo, LinkClosed, register

HR_UNIT_DB = 0.05
MAXDEVICES = 64
STATUS_OK = 0
_STATUS_NAMES = {0x80010000: "BAD_PARAMETER", 0x80020000: "BAD_HID_IO", 0x80030000: "DEVICE_NOT_READY",
                 0x80040000: "FEATURE_NOT_SUPPORTED"}


def _status_text(code: int) -> str:
    code &= 0xFFFFFFFF
    return _STATUS_NAMES.get(code, f"0x{code:08X}")


@register(models=("vaunix-lda",), transports=("sdk",))
class VaunixLda(Attenuator):
    def __init__(self, config: AttenuatorConfig):
        super().__init__(config)
        self._lib: ctypes.CDLL | None = None
        self._dev: int | None = None
        self.unit_db = HR_UNIT_DB
        self.use_hr = True
        self.sdk_version = 0

    def _fn(self, name: str, restype: type = ctypes.c_int, argtypes: list | None = None):
        assert self._lib is not None
        fn = getattr(self._lib, name)
        fn.restype = restype
        fn.argtypes = argtypes or []
        return fn

    def _has(self, name: str) -> bool:
        return self._lib is not None and hasattr(self._lib, name)

    def _open(self) -> None:
        cfg = self.config
        path = str(cfg.option("library", "")) or ctypes.util.find_library("LDAhid") or "libLDAhid.so"
        try:
            self._lib = ctypes.CDLL(path)
        except OSError as exc:
            raise LinkClosed(f"{cfg.name}: cannot load the Vaunix SDK {path!r}: {exc}") from exc
        c_uint, c_int = ctypes.c_uint, ctypes.c_int
        self._fn("fnLDA_SetTestMode", None, [ctypes.c_bool])(False)
        if self._has("fnLDA_GetLibVersion"):
            self.sdk_version = self._fn("fnLDA_GetLibVersion")()
            linux_sdk = True
        else:
            self.sdk_version = self._fn("fnLDA_GetDLLVersion")() if self._has("fnLDA_GetDLLVersion") else 0
            linux_sdk = False
        self.use_hr = self._has("fnLDA_SetAttenuationHR") and self._has("fnLDA_GetAttenuationHR")
        if self.use_hr:
            self.unit_db = HR_UNIT_DB
        else:
            self.unit_db = float(cfg.option("legacy_unit_db", 0.05 if linux_sdk else 0.25))  # type: ignore[arg-type]
        n = self._fn("fnLDA_GetNumDevices")()
        if n <= 0:
            raise LinkClosed(f"{cfg.name}: the Vaunix SDK sees no Lab Brick attenuator")
        ids = (c_uint * MAXDEVICES)()
        count = self._fn("fnLDA_GetDevInfo", c_int, [ctypes.POINTER(c_uint)])(ids)
        get_sn = self._fn("fnLDA_GetSerialNumber", c_int, [c_uint])
        wanted = cfg.address.strip()
        chosen = None
        for dev in list(ids)[: max(0, min(count, MAXDEVICES))]:
            if not wanted or str(get_sn(dev)) == wanted:
                chosen = dev
                break
        if chosen is None:
            found = [str(get_sn(d)) for d in list(ids)[:count]]
            raise LinkClosed(f"{cfg.name}: no Lab Brick with serial {wanted!r} (found: {', '.join(found)})")
        status = self._fn("fnLDA_InitDevice", c_int, [c_uint])(chosen)
        if status != STATUS_OK:
            raise LinkClosed(f"{cfg.name}: fnLDA_InitDevice failed: {_status_text(status)}")
        self._dev = chosen

    def _close(self) -> None:
        if self._lib is not None and self._dev is not None:
            self._fn("fnLDA_CloseDevice", ctypes.c_int, [ctypes.c_uint])(self._dev)
        self._dev = None
        self._lib = None

    def _select(self, channel: int) -> None:
        if self.config.channels > 1:
            status = self._fn("fnLDA_SetChannel", ctypes.c_int, [ctypes.c_uint, ctypes.c_int])(self._dev, channel)
            if status != STATUS_OK:
                raise AttenuatorError(f"{self.config.name}: fnLDA_SetChannel({channel}) failed: {_status_text(status)}")

    def _write(self, channel: int, value_db: float) -> float | None:
        self._select(channel)
        counts = round(value_db / self.unit_db)
        if abs(counts * self.unit_db - value_db) > 1e-6:
            raise AttenuatorError(f"{self.config.name}: {value_db} dB is not a multiple of the SDK unit {self.unit_db} dB")
        name = "fnLDA_SetAttenuationHR" if self.use_hr else "fnLDA_SetAttenuation"
        status = self._fn(name, ctypes.c_int, [ctypes.c_uint, ctypes.c_int])(self._dev, counts)
        if status != STATUS_OK:
            raise AttenuatorError(f"{self.config.name}: {name}({counts}) failed: {_status_text(status)}")
        return None

    def _read(self, channel: int) -> float:
        self._select(channel)
        name = "fnLDA_GetAttenuationHR" if self.use_hr else "fnLDA_GetAttenuation"
        counts = self._fn(name, ctypes.c_int, [ctypes.c_uint])(self._dev)
        if counts < 0:
            raise AttenuatorError(f"{self.config.name}: {name} failed: {_status_text(counts)}")
        return round(counts * self.unit_db, 6)

    def _describe(self) -> DeviceInfo:
        name_fn = "fnLDA_GetModelNameA" if self._has("fnLDA_GetModelNameA") else "fnLDA_GetModelName"
        buf = ctypes.create_string_buffer(64)
        self._fn(name_fn, ctypes.c_int, [ctypes.c_uint, ctypes.c_char_p])(self._dev, buf)
        max_name = "fnLDA_GetMaxAttenuationHR" if self.use_hr else "fnLDA_GetMaxAttenuation"
        max_counts = self._fn(max_name, ctypes.c_int, [ctypes.c_uint])(self._dev)
        serial = self._fn("fnLDA_GetSerialNumber", ctypes.c_int, [ctypes.c_uint])(self._dev)
        return DeviceInfo(
            model=buf.value.decode("ascii", errors="replace"),
            serial=str(serial),
            firmware=f"sdk 0x{self.sdk_version:04x}, {'HR 0.05 dB' if self.use_hr else f'legacy {self.unit_db} dB'} units",
            channels=self.config.channels,
            min_db=0.0,
            max_db=round(max_counts * self.unit_db, 6),
            step_db=self.config.step_db,
        )
