"""Discovery, preparation and the radio state of each recorded Android version, read through the real
adb client; the dumpsys parser's edge cases (unavailable values, missing fields, dual SIM)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cellab.errors import InputError
from cellab.ue.android.adbclient import Adb
from cellab.ue.android.phone import Phone
from cellab.ue.android.phones import RECORDED_RADIO
from cellab.ue.android.telephony import RadioStateError, parse_registry
from cellab.ue.android.testing import phone_farm

pytestmark = pytest.mark.skipif(shutil.which("adb") is None, reason="needs Debian's adb client (make setup)")

EXPECTED = {  # serial -> (model, Android, sdk, rooted, iperf3)
    "R58M12ABCDE": ("SM-G960F", "9", 28, False, False),
    "0A1B2C3D4E": ("Pixel 4a", "11", 30, True, True),
    "1C2D3E4F": ("Pixel 6", "13", 33, False, False),
    "3A4B5C6D": ("Pixel 8", "14", 34, True, True),
}


@pytest.fixture(scope="module")
def farm(tmp_path_factory: pytest.TempPathFactory):
    with phone_farm(tmp_path_factory.mktemp("farm")) as server:
        yield server


@pytest.mark.parametrize("serial", sorted(EXPECTED))
def test_discovery(farm, serial: str) -> None:
    info = Phone(Adb(farm.port), serial).info
    model, android, sdk, rooted, iperf3 = EXPECTED[serial]
    assert (info.model, info.android, info.sdk, info.rooted, info.iperf3) == (model, android, sdk, rooted, iperf3)
    assert info.abi == "arm64-v8a"
    assert info.kernel == farm.phones[serial].model.kernel
    assert info.transport_id == farm.phones[serial].transport_id


@pytest.mark.parametrize("serial", sorted(EXPECTED))
def test_signal_per_android_version(farm, serial: str) -> None:
    reading = Phone(Adb(farm.port), serial).signal()
    r = RECORDED_RADIO
    assert reading.rsrp_dbm == r["rsrp"] and reading.rsrq_db == r["rsrq"]
    assert reading.sinr_db == pytest.approx(r["rssnr"])  # Android 9's 0.1 dB units are scaled
    assert (reading.cqi, reading.earfcn, reading.pci) == (r["cqi"], r["earfcn"], r["pci"])
    assert serial in reading.source


def test_preparation_sets_the_phone_state(farm) -> None:
    for serial in ("R58M12ABCDE", "3A4B5C6D"):  # settings+broadcast (9) and cmd connectivity (11+)
        phone = Phone(Adb(farm.port), serial)
        state = farm.phones[serial].state
        state.wifi, state.mobile_data, state.screen_on = True, False, False
        steps = phone.prepare(airplane_toggle=True, mobile_data=True, wifi_off=True, stay_awake=True,
                              screen_on=True, airplane_hold_s=0)
        assert steps == ["screen on", "stay awake", "wifi off", "mobile data on", "airplane toggled"]
        assert (state.wifi, state.mobile_data, state.screen_on, state.airplane) == (False, True, True, False)
        assert state.stay_awake == "true"


def test_airplane_mode_makes_rsrp_unavailable(farm) -> None:
    phone = Phone(Adb(farm.port), "1C2D3E4F")
    phone.set_airplane(True)
    try:
        radio = phone.radio()
        assert radio.rsrp_dbm is None and radio.cqi is None  # 2147483647 everywhere
        with pytest.raises(RadioStateError, match="phone 1C2D3E4F: RSRP is unavailable"):
            phone.signal()
    finally:
        phone.set_airplane(False)


def test_dumpsys_missing_fields_name_the_phone_and_field(farm) -> None:
    phone = Phone(Adb(farm.port), "0A1B2C3D4E")
    farm.phones["0A1B2C3D4E"].dumpsys_drop = {"mSignalStrength"}
    try:
        with pytest.raises(RadioStateError, match="phone 0A1B2C3D4E: .*no mSignalStrength.*Android 11"):
            phone.signal()
    finally:
        farm.phones["0A1B2C3D4E"].dumpsys_drop = set()


def test_unknown_serial_lists_the_connected_phones(farm) -> None:
    with pytest.raises(InputError) as err:
        Phone(Adb(farm.port), "ZZ999")
    text = str(err.value)
    assert "--serial: serial: no phone 'ZZ999'" in text and "R58M12ABCDE (device)" in text


def test_parser_second_sim_and_broken_lte_segment(farm) -> None:
    dump = farm.phones["3A4B5C6D"].dumpsys_registry()
    assert parse_registry(dump, "P8", 14, phone_id=0).rsrp_dbm == RECORDED_RADIO["rsrp"]
    empty = parse_registry(dump, "P8", 14, phone_id=1)  # no SIM in slot 1: all unavailable, not registered
    assert empty.rsrp_dbm is None and empty.earfcn is None
    broken = dump.replace(" rsrq=", " rsrqX=")
    with pytest.raises(RadioStateError, match="phone P8: CellSignalStrengthLte lacks rsrq"):
        parse_registry(broken, "P8", 14)
    android9 = farm.phones["R58M12ABCDE"].dumpsys_registry()
    short = "\n".join(line.split(" -1 -1 ")[0] if "mSignalStrength=" in line else line
                      for line in android9.splitlines())
    with pytest.raises(RadioStateError, match="not an Android 9 SignalStrength list"):
        parse_registry(short, "S9", 9)


def test_signal_follows_the_attached_cell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A phone attached to a cell reports the cell's RSRP/SINR/CQI; RSRQ the cell does not model is unavailable."""
    from cellab.ue.android import phones

    monkeypatch.setattr(phones.VirtualPhone, "_cell_radio",
                        lambda self: {"rsrp": -101, "rsrq": phones.UNAVAILABLE, "rssnr": 7, "cqi": 9})
    with phone_farm(tmp_path, {"CELL1": "android13"}, cell_ctl="ipc:///nonexistent") as farm:
        reading = Phone(Adb(farm.port), "CELL1").signal()
    assert (reading.rsrp_dbm, reading.sinr_db, reading.cqi, reading.rsrq_db) == (-101, 7, 9, None)
