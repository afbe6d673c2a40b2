"""virtual (ZeroMQ cell control), srsENB cell_gain, Keysight 11713C (pyvisa) and Vaunix (ctypes)."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq
from cellab.attenuator.config import AttenuatorConfig
from cellab.attenuator.driver import AttenuatorError, create
from cellab.attenuator.drivers.keysight import split_total
from cellab.attenuator.emulators.keysight import Keysight11713C
from cellab.attenuator.emulators.servers import stable_port
from cellab.attenuator.player import Player
from cellab.attenuator.schedule import parse_csv

from cellab.errors import InputError

DATA = Path(__file__).parent / "data"


def _virtual(endpoint: str, **kw: object) -> AttenuatorConfig:
    base: dict[str, object] = {"name": "vcell", "model": "virtual", "transport": "zmq", "address": endpoint, "channels": 2, "min_db": 0, "max_db": 130, "step_db": 0.5, "timeout_s": 0.5}
    base.update(kw)
    return AttenuatorConfig(**base)  # type: ignore[arg-type]


def test_virtual_round_trip_and_quantization(cell: Any) -> None:
    drv = create(_virtual(cell.endpoint))
    try:
        assert drv.set(2, 33.3) == 33.5
        assert cell.att == [0.0, 33.5]
        assert cell.requests[0] == {"op": "set_attenuation", "ue": 1, "attenuation_db": 33.5}
        assert drv.get(2) == 33.5
        assert drv.info().model == "virtual"
    finally:
        drv.close()


def test_virtual_error_reply_is_surfaced(cell: Any) -> None:
    drv = create(_virtual(cell.endpoint))
    try:
        with pytest.raises(AttenuatorError, match=r"set_attenuation failed: attenuation_db 125.0 outside \[0, 120.0\]"):
            drv.set(1, 125)
    finally:
        drv.close()


def test_virtual_no_reply_is_a_clear_error() -> None:
    ctx = zmq.Context()
    sink = ctx.socket(zmq.ROUTER)  # accepts and never answers
    port = sink.bind_to_random_port("tcp://127.0.0.1")
    drv = create(_virtual(f"tcp://127.0.0.1:{port}", timeout_s=0.2))
    try:
        with pytest.raises(AttenuatorError, match="no reply within 200 ms"):
            drv.set(1, 10)
    finally:
        drv.close()
        sink.close(linger=0)
        ctx.term()


def test_srsenb_cell_gain_sends_negative_gain() -> None:
    sent: list[tuple[str, dict]] = []

    def send(op: str, params: dict) -> dict:
        sent.append((op, params))
        return {"ok": True}

    cfg = AttenuatorConfig(name="enb", model="srsenb-cell-gain", transport="enb-agent", address="enb1",
                           channels=2, min_db=0, max_db=40, step_db=0.1, options={"cell_ids": "1,2"})
    drv = create(cfg, send=send)
    assert drv.set(2, 12.34) == pytest.approx(12.3)
    assert sent == [("cell_gain", {"cell_id": 2, "gain_db": -12.3})]
    with pytest.raises(AttenuatorError, match="cannot report"):
        drv.get(1)
    refusing = create(cfg, send=lambda op, p: {"ok": False, "error": "no such cell"})
    with pytest.raises(AttenuatorError, match="no such cell"):
        refusing.set(1, 3)


def test_keysight_split_keeps_sections_on_their_grids() -> None:
    assert split_total(0, "AG8494H", "AG8496H") == (0, 0)
    assert split_total(25, "AG8494H", "AG8496H") == (5, 20)
    assert split_total(121, "AG8494H", "AG8496H") == (11, 110)
    with pytest.raises(AttenuatorError):
        split_total(122, "AG8494H", "AG8496H")


@pytest.fixture
def keysight_server() -> Iterator[list]:
    pytest.importorskip("pyvisa_py", reason="pyvisa-py is a dev dependency of this room")
    dev = Keysight11713C()
    servers = [dev, dev.serve(port=stable_port())]  # restarted on the same port by a test
    yield servers
    servers[1].stop()


@pytest.fixture
def keysight(keysight_server: list) -> tuple[Keysight11713C, str]:
    dev, srv = keysight_server
    return dev, f"TCPIP::127.0.0.1::{srv.port}::SOCKET"


def _keysight_cfg(resource: str) -> AttenuatorConfig:
    return AttenuatorConfig(name="ks", model="keysight-11713c", transport="visa", address=resource, channels=2,
                            min_db=0, max_db=121, step_db=1.0, timeout_s=1.0)


def test_keysight_round_trip_over_pyvisa(keysight: tuple[Keysight11713C, str]) -> None:
    dev, resource = keysight
    drv = create(_keysight_cfg(resource))
    try:
        assert drv.set(1, 37.4) == 37
        assert (dev.att_db[(1, "X")], dev.att_db[(1, "Y")]) == (7, 30)
        assert drv.get(1) == 37
        info = drv.info()
        assert (info.model, info.serial, info.max_db) == ("11713C", "MY53120001", 121)
    finally:
        drv.close()


def test_keysight_never_dips_below_old_and_new_value(keysight: tuple[Keysight11713C, str]) -> None:
    dev, resource = keysight
    drv = create(_keysight_cfg(resource))
    seen: list[float] = []
    real = dev.handle

    def spy(cmd: str) -> str | None:
        reply = real(cmd)
        if cmd.upper().startswith("ATT:BANK1:") and "?" not in cmd:
            seen.append(dev.total_db(1))
        return reply

    dev.handle = spy  # type: ignore[method-assign]
    try:
        drv.set(1, 19)  # X 9 + Y 10
        seen.clear()
        drv.set(1, 20)  # X 0 + Y 20: Y must move first (29 on the way, never 10)
        assert seen == [29, 20]
        seen.clear()
        drv.set(1, 19)  # X 9 first (29), then Y down
        assert seen == [29, 19]
    finally:
        drv.close()


def test_keysight_instrument_error_surfaces(keysight: tuple[Keysight11713C, str]) -> None:
    dev, resource = keysight
    drv = create(_keysight_cfg(resource))
    try:
        drv.set(1, 10)
        dev.models[(1, "Y")] = "AG8495H"  # someone swapped the coarse section for a 0–70 dB one
        with pytest.raises(AttenuatorError, match=r'instrument error -222,"Data out of range"'):
            drv.set(1, 100)
        assert dev.handle("SYST:ERR?") == '+0,"No error"'  # the queue was emptied for the next check
        assert drv.set(1, 60) == 60
    finally:
        drv.close()


def test_keysight_refuses_fast_schedules(keysight: tuple[Keysight11713C, str]) -> None:
    _dev, resource = keysight
    drv = create(_keysight_cfg(resource))
    try:
        with pytest.raises(InputError, match="mechanical relays"):
            Player(drv, parse_csv("t_s,channel,db\n0,1,10\n0.1,1,11\n", "fast.csv"))
    finally:
        drv.close()


def _build_fake_lda(tmp_path: Path, *defines: str) -> Path:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.fail("gcc is missing: `make setup` installs it")
    out = tmp_path / ("libfake_lda" + "".join(d.lower() for d in defines) + ".so")
    subprocess.run([gcc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-o", str(out),
                    str(DATA / "fake_lda.c"), *[f"-D{d}" for d in defines]], check=True, timeout=60)
    return out


@pytest.mark.parametrize(
    "defines, unit_db",
    [(("WITH_HR",), 0.05), (("LINUX_SDK",), 0.05), ((), 0.25)],
    ids=["hr-calls", "linux-sdk-legacy", "old-dll-legacy"],
)
def test_vaunix_units_follow_the_sdk(tmp_path: Path, defines: tuple[str, ...], unit_db: float) -> None:
    lib = _build_fake_lda(tmp_path, *defines)
    cfg = AttenuatorConfig(name="lda", model="vaunix-lda", transport="sdk", address="24680", channels=4,
                           min_db=0, max_db=95, step_db=0.25, options={"library": str(lib)})
    drv = create(cfg)
    try:
        assert drv.set(3, 31.75) == 31.75
        raw = ctypes.CDLL(str(lib))  # the same loaded library: read the simulated device
        assert raw.fake_att_hr(3) == 635  # 31.75 dB in 0.05 dB counts: the units were right
        assert drv.unit_db == unit_db  # type: ignore[attr-defined]
        info = drv.info()
        assert info.model == "LDA-5018V" and info.serial == "24680" and info.max_db == 95
    finally:
        drv.close()


def test_vaunix_unknown_serial_is_a_clear_error(tmp_path: Path) -> None:
    lib = _build_fake_lda(tmp_path, "WITH_HR")
    cfg = AttenuatorConfig(name="lda", model="vaunix-lda", transport="sdk", address="999", max_db=95,
                           options={"library": str(lib)})
    with pytest.raises(AttenuatorError, match=r"no Lab Brick with serial '999' \(found: 24680\)"):
        create(cfg).set(1, 10)


def test_keysight_reconnects_after_restart(keysight_server: list) -> None:
    dev, srv = keysight_server
    port = srv.port
    drv = create(_keysight_cfg(f"TCPIP::127.0.0.1::{port}::SOCKET"))
    try:
        assert drv.set(1, 12) == 12
        srv.stop()  # instrument power-cycled: a new server on the same port
        keysight_server[1] = dev.serve(port=port)
        assert drv.set(1, 13) == 13
    finally:
        drv.close()
