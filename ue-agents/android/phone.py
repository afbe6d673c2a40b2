"""One phone over adb: discovery (identity, root, tools), preparation, radio state, files.

Every method builds its adb argv from fixed words and validated values; nothing from the wire is a
shell string. Errors name the phone (serial and model).
"""

from __future__ import annotations

import time
from pathlib import Path

from pydantic import BaseModel

from cellab.contracts.ue import SignalReading

from .adbclient import Adb, PhoneError, ShellResult
from .telephony import RadioState, parse_registry

DEVICE_DIR = "/data/local/tmp/cellab"
PROBE_DEVICE_PATH = "/data/local/tmp/cellab-probe"


class PhoneInfo(BaseModel):
    serial: str
    model: str
    manufacturer: str
    android: str
    sdk: int
    kernel: str
    abi: str
    rooted: bool
    iperf3: bool
    transport_id: int | None = None


class Phone:
    def __init__(self, adb: Adb, serial: str, source: str = "--serial"):
        self.adb = adb
        self.entry = adb.check_serial(serial, source)  # InputError listing the connected phones
        self.serial = serial
        self.info = self.discover()

    @property
    def label(self) -> str:
        return f"phone {self.serial} ({self.info.model}, Android {self.info.android})" if hasattr(self, "info") \
            else f"phone {self.serial}"

    def sh(self, *words: str, timeout_s: float = 30, root: bool = False) -> ShellResult:
        argv = (["su", "0"] if root else []) + list(words)
        return self.adb.shell(self.serial, argv, timeout_s)

    def sh_ok(self, *words: str, timeout_s: float = 30, root: bool = False) -> str:
        result = self.sh(*words, timeout_s=timeout_s, root=root)
        if result.code != 0:
            raise PhoneError(f"{self.label}: `{' '.join(words)}` exited with {result.code}: "
                             f"{(result.stderr or result.stdout).strip()[-200:]}")
        return result.stdout

    # --- discovery ------------------------------------------------------------------------------
    def discover(self) -> PhoneInfo:
        props: dict[str, str] = {}
        for line in self.sh_ok("getprop").splitlines():
            key, sep, value = line.partition("]: [")
            if sep:
                props[key.lstrip("[")] = value.rstrip("]")
        missing = [k for k in ("ro.product.model", "ro.build.version.release", "ro.build.version.sdk") if k not in props]
        if missing:
            raise PhoneError(f"phone {self.serial}: getprop lacks {', '.join(missing)}")
        su = self.sh("su", "0", "id", "-u")
        return PhoneInfo(
            serial=self.serial, model=props["ro.product.model"],
            manufacturer=props.get("ro.product.manufacturer", ""), android=props["ro.build.version.release"],
            sdk=int(props["ro.build.version.sdk"]), kernel=self.sh_ok("uname", "-r").strip(),
            abi=props.get("ro.product.cpu.abi", ""), rooted=su.code == 0 and su.stdout.strip() == "0",
            iperf3=self.sh("which", "iperf3").code == 0, transport_id=self.entry.transport_id)

    # --- preparation ----------------------------------------------------------------------------
    def set_airplane(self, on: bool) -> None:
        if self.info.sdk >= 30:  # Android 11+: `cmd connectivity airplane-mode`
            self.sh_ok("cmd", "connectivity", "airplane-mode", "enable" if on else "disable")
        else:
            self.sh_ok("settings", "put", "global", "airplane_mode_on", "1" if on else "0")
            self.sh_ok("am", "broadcast", "-a", "android.intent.action.AIRPLANE_MODE", root=self.info.rooted)

    def prepare(self, *, airplane_toggle: bool, mobile_data: bool, wifi_off: bool, stay_awake: bool,
                screen_on: bool, airplane_hold_s: float) -> list[str]:
        steps = []
        if screen_on:
            self.sh_ok("input", "keyevent", "KEYCODE_WAKEUP")
            steps.append("screen on")
        if stay_awake:
            self.sh_ok("svc", "power", "stayon", "true")
            steps.append("stay awake")
        if wifi_off:
            self.sh_ok("svc", "wifi", "disable")
            steps.append("wifi off")
        if mobile_data:
            self.sh_ok("svc", "data", "enable")
            steps.append("mobile data on")
        if airplane_toggle:  # forces a fresh attach to the cell
            self.set_airplane(True)
            time.sleep(airplane_hold_s)
            self.set_airplane(False)
            steps.append("airplane toggled")
        return steps

    # --- radio ----------------------------------------------------------------------------------
    def radio(self) -> RadioState:
        dump = self.sh_ok("dumpsys", "telephony.registry")
        return parse_registry(dump, self.serial, int(self.info.android.split(".")[0] or 0))

    def signal(self) -> SignalReading:
        return self.radio().reading(self.serial)

    # --- files ----------------------------------------------------------------------------------
    def push(self, local: Path, remote: str, mode: str = "755") -> None:
        self.adb.push(self.serial, local, remote)
        self.sh_ok("chmod", mode, remote)

    def pull(self, remote: str, local: Path) -> None:
        self.adb.pull(self.serial, remote, local)
