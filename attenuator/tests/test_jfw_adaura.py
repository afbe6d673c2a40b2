"""JFW and Adaura drivers against their emulators."""

from __future__ import annotations

from pathlib import Path

import pytest
from cellab.attenuator.config import AttenuatorConfig
from cellab.attenuator.driver import AttenuatorError, create
from cellab.attenuator.emulators.adaura import AdauraDevice
from cellab.attenuator.emulators.servers import stable_port
from cellab.attenuator.emulators.jfw import JfwDevice


def _jfw(transport: str, address: str, **kw: object) -> AttenuatorConfig:
    base: dict[str, object] = {"name": "jfw", "model": "jfw-50pa", "transport": transport, "address": address, "channels": 4, "min_db": 0, "max_db": 95, "step_db": 1.0, "timeout_s": 1.0}
    base.update(kw)
    return AttenuatorConfig(**base)  # type: ignore[arg-type]


def _adaura(transport: str, address: str) -> AttenuatorConfig:
    return AttenuatorConfig(name="ad", model="adaura", transport=transport, address=address, channels=4,
                            min_db=0, max_db=95, step_db=0.25, timeout_s=1.0)


@pytest.mark.parametrize("transport", ["telnet", "serial"])
def test_jfw_round_trip_and_quantization(transport: str, tmp_path: Path) -> None:
    dev = JfwDevice()
    srv = dev.serve_telnet() if transport == "telnet" else dev.serve_pty(link=str(tmp_path / "tty"))
    address = srv.address if transport == "telnet" else srv.port  # type: ignore[union-attr]
    drv = create(_jfw(transport, address))
    try:
        assert drv.set(2, 30.4) == 30.0  # 1 dB steps
        assert dev.att_db == [0, 30, 0, 0]
        assert drv.get(2) == 30
        info = drv.info()
        assert info.channels == 4
        if transport == "telnet":
            assert info.model == "50PA-220-16"  # from the banner
    finally:
        drv.close()
        srv.stop()


def test_jfw_error_lines_surface(tmp_path: Path) -> None:
    dev = JfwDevice(channels=2)
    srv = dev.serve_telnet()
    try:
        drv = create(_jfw("telnet", srv.address, channels=3))  # inventory says 3, the bench has 2
        with pytest.raises(AttenuatorError, match="inventory says 3 channel.* has 2"):
            drv.set(1, 10)  # refused at open, before any set reaches the bench
        drv = create(_jfw("telnet", srv.address, channels=3, options={"check_range": False}))
        with pytest.raises(AttenuatorError, match="'Atten 3 does not exist'"):
            drv.set(3, 10)
        drv.close()
        # a value off the device grid: the device says Syntax Error and the driver says so
        drv = create(_jfw("telnet", srv.address, channels=2, step_db=0.5))
        with pytest.raises(AttenuatorError, match="'Syntax Error'"):
            drv.set(1, 10.5)
        drv.close()
    finally:
        srv.stop()


def test_jfw_second_session_refused_cleanly() -> None:
    dev = JfwDevice()
    srv = dev.serve_telnet()
    first = create(_jfw("telnet", srv.address))
    second = create(_jfw("telnet", srv.address))
    try:
        first.set(1, 10)
        with pytest.raises(AttenuatorError, match="one telnet session at a time"):  # after session_wait_s
            second.set(1, 20)
        assert dev.att_db[0] == 10
        first.close()
        assert second.set(1, 20) == 20  # once the first session is gone, the second gets in
    finally:
        first.close()
        second.close()
        srv.stop()


def test_jfw_reconnect_after_restart() -> None:
    dev = JfwDevice()
    srv = dev.serve_telnet()
    port = srv.port
    drv = create(_jfw("telnet", srv.address))
    try:
        drv.set(1, 10)
        srv.stop()
        srv = dev.serve_telnet(port=port)
        assert drv.set(1, 11) == 11
    finally:
        drv.close()
        srv.stop()


@pytest.mark.parametrize("transport", ["serial", "telnet", "http"])
def test_adaura_round_trip_every_transport(transport: str, tmp_path: Path) -> None:
    dev = AdauraDevice()
    if transport == "serial":
        srv = dev.serve_pty(link=str(tmp_path / "ttyACM0"))
        address = srv.port
    elif transport == "telnet":
        srv = dev.serve_telnet()
        address = srv.address
    else:
        srv = dev.serve_http()
        address = srv.url
    drv = create(_adaura(transport, address))
    try:
        assert drv.set(3, 17.6) == 17.5
        assert dev.att_db == [0, 0, 17.5, 0]
        assert drv.get(3) == 17.5
        info = drv.info()
        assert (info.model, info.serial, info.firmware, info.channels) == ("AD-USB4AR36G95", "2104000123", "1.21", 4)
    finally:
        drv.close()
        srv.stop()


def test_adaura_error_reply_and_bad_login() -> None:
    dev = AdauraDevice(channels=2)
    srv = dev.serve_http()
    try:
        drv = create(_adaura("http", srv.url))
        with pytest.raises(AttenuatorError, match="'Invalid channel'"):
            drv.set(4, 10)
    finally:
        srv.stop()
    tsrv = dev.serve_telnet()
    try:
        cfg = _adaura("telnet", tsrv.address).model_copy(update={"options": {"password": "wrong"}})
        with pytest.raises(AttenuatorError, match="login refused"):
            create(cfg).set(1, 10)
    finally:
        tsrv.stop()


def test_adaura_telnet_reconnects_and_logs_in_again() -> None:
    dev = AdauraDevice()
    srv = dev.serve_telnet(port=stable_port())  # restarted on the same port below
    port = srv.port
    drv = create(_adaura("telnet", srv.address))
    try:
        assert drv.set(1, 10) == 10
        srv.stop()
        srv = dev.serve_telnet(port=port)
        assert drv.set(1, 11) == 11
        assert dev.att_db[0] == 11
    finally:
        drv.close()
        srv.stop()
