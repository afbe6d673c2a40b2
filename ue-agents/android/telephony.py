"""Radio state from `dumpsys telephony.registry`, across Android versions.

Formats (AOSP toString): Android 9 prints SignalStrength as a positional list
("SignalStrength: gsmSS gsmBer cdmaDbm cdmaEcio evdoDbm evdoEcio evdoSnr lteSS lteRsrp lteRsrq
lteRssnr lteCqi ..."), LTE rssnr in 0.1 dB; Android 10+ prints
"SignalStrength:{...,mLte=CellSignalStrengthLte: rssi= rsrp= rsrq= rssnr= [cqiTableIndex=] cqi= ta= ...}"
with rssnr in dB. The serving cell (EARFCN, PCI, CI) is the registered CellInfoLte's CellIdentityLte
in mCellInfo (all versions), or mCellIdentity (11+). 2147483647 means unavailable.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cellab.contracts.ue import SignalReading
from cellab.errors import CellabError

UNAVAILABLE = 2147483647
_LTE_POSITIONS = {"rsrp": 9, "rsrq": 10, "rssnr": 11, "cqi": 12}  # Android 9: token 0 is "SignalStrength:"


class RadioStateError(CellabError):
    """dumpsys lacks what we need; the message names the phone and the missing field."""


@dataclass(frozen=True)
class RadioState:
    rsrp_dbm: int | None
    rsrq_db: int | None
    rssnr_db: float | None
    cqi: int | None
    earfcn: int | None
    pci: int | None
    cell_id: int | None

    def reading(self, phone: str) -> SignalReading:
        if self.rsrp_dbm is None:
            raise RadioStateError(f"phone {phone}: RSRP is unavailable (2147483647): no LTE serving cell "
                                  "(airplane mode, no SIM, or out of coverage)")
        return SignalReading(rsrp_dbm=self.rsrp_dbm, sinr_db=self.rssnr_db, rsrq_db=self.rsrq_db, cqi=self.cqi,
                             earfcn=self.earfcn, pci=self.pci, source=f"android {phone} telephony.registry")


def _value(text: str) -> int | None:
    number = int(text)
    return None if number == UNAVAILABLE or number == -UNAVAILABLE else number


def _keyvals(segment: str) -> dict[str, str]:
    return dict(re.findall(r"(\w+)=(-?\d+)", segment))


def _phone_block(dump: str, phone_id: int) -> str:
    """The `Phone Id=N` section (single-SIM dumps of older versions have one)."""
    parts = re.split(r"^\s*Phone Id=(\d+)\s*$", dump, flags=re.M)
    for i in range(1, len(parts) - 1, 2):
        if int(parts[i]) == phone_id:
            return parts[i + 1].split("local logs:")[0]
    return dump.split("local logs:")[0]


def _line(block: str, key: str) -> str | None:
    match = re.search(rf"^\s*{key}=(.*)$", block, flags=re.M)
    return match.group(1) if match else None


def parse_registry(dump: str, phone: str, android: int, phone_id: int = 0) -> RadioState:
    """RadioState of one SIM slot; RadioStateError naming the phone and the field when a field is missing."""
    block = _phone_block(dump, phone_id)
    strength = _line(block, "mSignalStrength")
    if strength is None:
        raise RadioStateError(f"phone {phone}: dumpsys telephony.registry has no mSignalStrength "
                              f"(Android {android}, phone id {phone_id})")
    values: dict[str, int | None]
    if strength.startswith("SignalStrength:{") or "CellSignalStrengthLte:" in strength:
        match = re.search(r"CellSignalStrengthLte:([^,}]*)", strength)
        if match is None:
            raise RadioStateError(f"phone {phone}: mSignalStrength has no CellSignalStrengthLte (Android {android})")
        kv = _keyvals(match.group(1))
        missing = [k for k in ("rsrp", "rsrq", "rssnr", "cqi") if k not in kv]
        if missing:
            raise RadioStateError(f"phone {phone}: CellSignalStrengthLte lacks {', '.join(missing)} "
                                  f"(Android {android})")
        values = {k: _value(kv[k]) for k in ("rsrp", "rsrq", "rssnr", "cqi")}
        rssnr_scale = 1.0
    else:
        tokens = strength.split()
        if not tokens or tokens[0] != "SignalStrength:" or len(tokens) <= max(_LTE_POSITIONS.values()):
            raise RadioStateError(f"phone {phone}: mSignalStrength is not an Android 9 SignalStrength list "
                                  f"({strength[:60]!r})")
        try:
            values = {k: _value(tokens[i]) for k, i in _LTE_POSITIONS.items()}
        except ValueError:
            raise RadioStateError(f"phone {phone}: mSignalStrength has a non-numeric LTE field") from None
        rssnr_scale = 0.1  # Android 9 reports LTE RSSNR in 0.1 dB
    earfcn = pci = ci = None
    identity = _registered_identity(block)
    if identity:
        kv = _keyvals(identity)
        earfcn, pci, ci = (_value(kv[k]) if k in kv else None for k in ("mEarfcn", "mPci", "mCi"))
    rssnr = values["rssnr"]
    return RadioState(rsrp_dbm=values["rsrp"], rsrq_db=values["rsrq"],
                      rssnr_db=None if rssnr is None else round(rssnr * rssnr_scale, 1),
                      cqi=values["cqi"], earfcn=earfcn, pci=pci, cell_id=ci)


def _registered_identity(block: str) -> str | None:
    cell_info = _line(block, "mCellInfo") or ""
    for match in re.finditer(r"CellInfoLte:\{mRegistered=YES.*?CellIdentityLte:\{([^}]*)\}", cell_info):
        return match.group(1)
    identity = _line(block, "mCellIdentity") or ""
    match = re.search(r"CellIdentityLte:\{([^}]*)\}", identity)
    return match.group(1) if match else None
