"""Virtual phones behind the fake adb server: recorded getprop / dumpsys outputs per Android version,
a small device filesystem (/data/local/tmp, /sdcard) in a host folder, and radio state.

The fixtures in phones/<name>/ were written for cellab from the toString formats of AOSP's
SignalStrength, CellSignalStrengthLte and CellIdentityLte of each version (9: SignalStrength's
positional list, rssnr in 0.1 dB; 10+: `mLte=CellSignalStrengthLte: rssi= rsrp= rsrq= rssnr= ...`;
13+: `cqiTableIndex=`). Radio values are `${name}` placeholders: the recorded defaults below, or the
emulated cell's current signal when the phone is attached to a virtual cell.
"""

from __future__ import annotations

import string
import threading
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from cellab.errors import InputError

FIXTURES = Path(__file__).parent / "phones"
UNAVAILABLE = 2147483647  # CellInfo.UNAVAILABLE (Integer.MAX_VALUE)
DEVICE_ROOTS = ("/data/local/tmp", "/sdcard")


@dataclass(frozen=True)
class PhoneModel:
    fixture: str
    kernel: str
    rooted: bool
    iperf3: bool  # an iperf3 binary on the phone's PATH


CATALOG: dict[str, PhoneModel] = {
    "android9": PhoneModel("android9", "4.9.118-15454084", rooted=False, iperf3=False),
    "android11": PhoneModel("android11", "4.14.190-gd3e7d5ae3a6a-ab7022288", rooted=True, iperf3=True),
    "android13": PhoneModel("android13", "5.10.157-android13-4-00003-g776d5b1ea3d1-ab9713581", rooted=False,
                            iperf3=False),
    "android14": PhoneModel("android14", "6.1.75-android14-11-gd1b6c8c6c7a5-ab11838458", rooted=True, iperf3=True),
}

# What the recorded dumpsys shows when no cell is attached (a good indoor LTE signal).
RECORDED_RADIO = {"rsrp": -95, "rsrq": -10, "rssnr": 12, "cqi": 11, "rssi": -63, "earfcn": 3350, "pci": 1,
                  "ci": 26383105, "tac": 7}


@dataclass
class PhoneState:
    airplane: bool = False
    mobile_data: bool = False
    wifi: bool = True
    stay_awake: str = "0"
    screen_on: bool = False
    sysctl: dict[str, str] = field(default_factory=lambda: {"net.ipv4.tcp_congestion_control": "cubic"})


class VirtualPhone:
    """One phone: identity from its fixture, a host folder for its storage, and optionally a lab seat
    (UE namespace for what it runs, the cell's control endpoint and UE index for its radio)."""

    def __init__(self, serial: str, model: str, storage_dir: Path, *, rooted: bool | None = None,
                 netns: str | None = None, cell_ctl: str | None = None, cell_ue: int = 0,
                 shell_v2: bool = True):
        if model not in CATALOG:
            raise InputError("virtual phone", "model", f"unknown model {model!r}", sorted(CATALOG))
        self.serial, self.model = serial, CATALOG[model]
        self.rooted = self.model.rooted if rooted is None else rooted
        self.storage = Path(storage_dir)
        for root in DEVICE_ROOTS:
            (self.storage / root.lstrip("/")).mkdir(parents=True, exist_ok=True)
        self.netns, self.cell_ctl, self.cell_ue = netns, cell_ctl, cell_ue
        self.shell_v2 = shell_v2
        self.state = PhoneState()
        self.online = True
        self.transport_id = 0
        self.dumpsys_drop: set[str] = set()  # dumpsys keys to leave out (a test's broken modem)
        self.lock = threading.Lock()
        fixture = FIXTURES / self.model.fixture
        self._getprop = string.Template((fixture / "getprop.txt").read_text())
        self._registry = string.Template((fixture / "telephony.registry.txt").read_text())

    # --- identity -------------------------------------------------------------------------------
    def getprop_text(self) -> str:
        return self._getprop.substitute(serial=self.serial)

    def props(self) -> dict[str, str]:
        out = {}
        for line in self.getprop_text().splitlines():
            key, _, value = line.partition("]: [")
            out[key.lstrip("[")] = value.rstrip("]")
        return out

    def features(self) -> str:
        # What adbd advertises; no stat_v2/ls_v2/sendrecv_v2, so the client speaks sync v1 (SYNC.TXT).
        return ",".join((["shell_v2"] if self.shell_v2 else []) + ["cmd"])

    # --- radio ----------------------------------------------------------------------------------
    def set_airplane(self, on: bool) -> None:
        """Airplane mode: on a cell, the modem leaves it (the cell holds this UE's host: nothing passes), off: back."""
        self.state.airplane = on
        if self.cell_ctl is not None:
            from cellab.labs.cellctl import CellControl

            with CellControl(self.cell_ctl, timeout_ms=1500) as cell:
                cell.request("set_ue_host", ue=self.cell_ue, up=not on)

    def radio(self) -> dict[str, int]:
        values = dict(RECORDED_RADIO)
        if self.state.airplane:
            return {k: UNAVAILABLE for k in values}
        if self.cell_ctl is not None:
            values.update(self._cell_radio())
        return values

    def _cell_radio(self) -> dict[str, int]:
        from cellab.labs.cellctl import CellControl, CellControlError

        try:
            with CellControl(self.cell_ctl, timeout_ms=1500) as cell:  # type: ignore[arg-type]
                ue = cell.ue_stats(self.cell_ue)
        except CellControlError:
            return {"rsrp": UNAVAILABLE, "rsrq": UNAVAILABLE, "rssnr": UNAVAILABLE, "cqi": UNAVAILABLE}
        if ue.get("rrc_state", "connected") != "connected":  # no serving cell: the modem reports none
            return {"rsrp": UNAVAILABLE, "rsrq": UNAVAILABLE, "rssnr": UNAVAILABLE, "cqi": UNAVAILABLE}
        sinr = ue.get("sinr_db")
        cqi = ue.get("cqi")
        # The cell models no RSRQ: a modem that does not report a value says UNAVAILABLE.
        return {"rsrp": round(ue["rsrp_dbm"]), "rsrq": UNAVAILABLE,
                "rssnr": round(sinr) if isinstance(sinr, (int, float)) else UNAVAILABLE,
                "cqi": int(cqi) if isinstance(cqi, (int, float)) else UNAVAILABLE}

    def dumpsys_registry(self) -> str:
        r = self.radio()
        rsrp = r["rsrp"]
        level = 0 if rsrp == UNAVAILABLE else 4 if rsrp >= -85 else 3 if rsrp >= -95 else 2 if rsrp >= -105 else 1
        tenth = UNAVAILABLE if r["rssnr"] == UNAVAILABLE else r["rssnr"] * 10  # Android 9: 0.1 dB units
        lte_ss = 99 if rsrp == UNAVAILABLE else max(0, min(31, (rsrp + 140) // 2))
        text = self._registry.substitute(
            **{k: str(v) for k, v in r.items()}, rssnr_tenth=str(tenth), level=str(level), lte_ss=str(lte_ss),
            mobile_data=str(self.state.mobile_data).lower())
        if self.dumpsys_drop:
            text = "\n".join(line for line in text.splitlines()
                             if not any(line.strip().startswith(key + "=") for key in self.dumpsys_drop)) + "\n"
        return text

    # --- storage --------------------------------------------------------------------------------
    def host_path(self, device_path: str) -> Path | None:
        """The host file behind a device path, or None outside /data/local/tmp and /sdcard."""
        path = PurePosixPath(device_path)
        if not path.is_absolute() or ".." in path.parts:
            return None
        if not any(str(path) == root or str(path).startswith(root + "/") for root in DEVICE_ROOTS):
            return None
        return self.storage / str(path).lstrip("/")

    def describe(self) -> dict[str, Any]:
        props = self.props()
        return {"serial": self.serial, "model": props.get("ro.product.model"),
                "android": props.get("ro.build.version.release"), "rooted": self.rooted, "online": self.online}
