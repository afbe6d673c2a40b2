"""Mini-Circuits driver against its emulator over every transport."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from cellab.attenuator.config import AttenuatorConfig
from cellab.attenuator.driver import Attenuator, AttenuatorError, LimitError, create
from cellab.attenuator.emulators.minicircuits import MiniCircuitsDevice

from cellab.errors import InputError


def _config(transport: str, address: str, **kw: object) -> AttenuatorConfig:
    base: dict[str, object] = {"name": "mc", "model": "minicircuits-rcdat", "transport": transport, "address": address, "min_db": 0, "max_db": 110, "step_db": 0.25, "timeout_s": 1.0}
    base.update(kw)
    return AttenuatorConfig(**base)  # type: ignore[arg-type]


@pytest.fixture(params=["serial", "telnet", "http", "usb-hid"])
def driver_and_device(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Attenuator, MiniCircuitsDevice]]:
    dev = MiniCircuitsDevice(model="RCDAT-6000-110", serial_number="77")
    kind = request.param
    if kind == "serial":
        srv = dev.serve_pty(link=str(tmp_path / "tty"))
        drv = create(_config("serial", srv.port))
    elif kind == "telnet":
        srv = dev.serve_telnet()
        drv = create(_config("telnet", srv.address))
    elif kind == "http":
        srv = dev.serve_http()
        drv = create(_config("http", srv.url))
    else:
        srv = dev.serve_hid()
        drv = create(_config("usb-hid", ""), hid_fd=srv.client_fd)
    try:
        yield drv, dev
    finally:
        drv.close()
        srv.stop()


def test_round_trip_every_transport(driver_and_device: tuple[Attenuator, MiniCircuitsDevice]) -> None:
    drv, dev = driver_and_device
    assert drv.set(1, 37.5) == 37.5
    assert dev.att_db == [37.5]
    assert drv.get(1) == 37.5
    info = drv.info()
    assert (info.model, info.serial, info.max_db, info.channels) == ("RCDAT-6000-110", "77", 110.0, 1)


def test_quantization_to_device_step(driver_and_device: tuple[Attenuator, MiniCircuitsDevice]) -> None:
    drv, dev = driver_and_device
    assert drv.set(1, 12.3) == 12.25
    assert drv.set(1, 12.38) == 12.5
    assert dev.att_db == [12.5]
    # what went over the wire is the quantized value, not the request
    assert any("SETATT=12.50" in c for c in dev.commands)


def test_clipping_reply_is_a_clear_error(tmp_path: Path) -> None:
    dev = MiniCircuitsDevice(model="RUDAT-6000-90")
    srv = dev.serve_pty(link=str(tmp_path / "tty"))
    with pytest.raises(AttenuatorError, match=r"up to 100.0 dB but the device \(RUDAT-6000-90\) has 1 up to 90.0 dB"):
        create(_config("serial", srv.port, model="minicircuits-rudat", max_db=100)).open()
    # with the range check off, the device's own clipping reply still surfaces as an error
    drv = create(_config("serial", srv.port, model="minicircuits-rudat", max_db=100, options={"check_range": False}))
    try:
        with pytest.raises(AttenuatorError, match=r"clipped 95.0 dB to its maximum \(reply 2\)"):
            drv.set(1, 95)
        assert dev.att_db == [90.0]  # the device did clip: the error says so instead of hiding it
    finally:
        drv.close()
        srv.stop()


def test_failure_reply_is_a_clear_error(tmp_path: Path) -> None:
    dev = MiniCircuitsDevice(model="RCDAT-6000-110")  # one channel
    srv = dev.serve_telnet()
    drv = create(_config("telnet", srv.address, channels=2, options={"check_range": False}))  # claims 2 channels
    try:
        with pytest.raises(AttenuatorError, match=r"refused ':CHAN:2:SETATT:5.00' \(reply 0\)"):
            drv.set(2, 5)
    finally:
        drv.close()
        srv.stop()


def test_limits_and_channels_checked_before_the_device(mc_serial_config: AttenuatorConfig, mc_device: MiniCircuitsDevice) -> None:
    drv = create(mc_serial_config)
    try:
        with pytest.raises(LimitError, match=r"outside the lab limits \[10.0, 100.0\]"):
            drv.set(1, 5)
        with pytest.raises(LimitError):
            drv.set(1, 100.2)
        with pytest.raises(InputError, match="channel"):
            drv.set(2, 20)
        assert not any("SETATT" in c for c in mc_device.commands)
    finally:
        drv.close()


def test_reconnect_after_serial_emulator_restart(mc_device: MiniCircuitsDevice, tmp_path: Path) -> None:
    link = str(tmp_path / "ttyUSB-att")
    srv = mc_device.serve_pty(link=link)
    drv = create(_config("serial", link))
    try:
        assert drv.set(1, 20) == 20
        srv.stop()
        srv = mc_device.serve_pty(link=link)  # replugged: a new pty behind the same name
        assert drv.set(1, 30) == 30
        assert mc_device.att_db == [30.0]
    finally:
        drv.close()
        srv.stop()


@contextlib.contextmanager
def _lower_pts_numbers_held(freed: str, most: int = 512) -> Iterator[bool]:
    """Holds open every free pts number below `freed`, so that the next pty opened gets `freed`; yields whether
    it is still free (no other process took it)."""
    held: list[int] = []
    reachable = False
    try:
        for _ in range(most):
            master, follower = os.openpty()
            name = os.ttyname(follower)
            if name == freed:
                os.close(master)
                os.close(follower)
                reachable = True
                break
            held += [master, follower]
            if int(name.rsplit("/", 1)[1]) > int(freed.rsplit("/", 1)[1]):
                break  # taken by another process meanwhile
        yield reachable
    finally:
        for fd in held:
            os.close(fd)


def test_an_unplugged_ptys_link_cannot_lead_to_the_pty_that_reuses_its_number(mc_device: MiniCircuitsDevice, tmp_path: Path) -> None:
    link = tmp_path / "ttyUSB-att"
    stranger = MiniCircuitsDevice()
    # the host hands the lowest free pts number to the next pty opened (here another device, as another process's):
    # the holes below the freed number are filled first, and another test process may take it meanwhile, so the
    # unplug is staged until the stranger's pty gets the number
    for _ in range(5):
        other = None
        srv = mc_device.serve_pty(link=str(link))
        drv = create(_config("serial", str(link)))
        try:
            assert drv.set(1, 20) == 20
            unplugged_path = srv.path
            srv.stop()
            assert not link.exists() and not link.is_symlink()  # gone with the device, as udev removes a by-id link
            drv.close()  # the driver lets the dead pty go (as on its first read error), freeing its number
            with _lower_pts_numbers_held(unplugged_path) as reachable:
                other = stranger.serve_pty() if reachable else None
            if other is None or other.path != unplugged_path:
                continue  # another process took the number first: stage it again
            with pytest.raises(AttenuatorError):
                drv.set(1, 95)  # the driver reopens its link: nothing there, so a clear error
            assert not any("SETATT" in c for c in stranger.commands)
            return
        finally:
            drv.close()
            if other is not None:
                other.stop()
    pytest.fail("the kernel never reused a freed pts number in 5 tries: the race could not be staged")


def test_reconnect_after_telnet_emulator_restart(mc_device: MiniCircuitsDevice) -> None:
    srv = mc_device.serve_telnet()
    port = srv.port
    drv = create(_config("telnet", srv.address))
    try:
        assert drv.set(1, 20) == 20
        srv.stop()
        with pytest.raises(AttenuatorError):
            drv.set(1, 25)  # the emulator is down: a clear error, not a hang
        srv = mc_device.serve_telnet(port=port)
        assert drv.set(1, 30) == 30
    finally:
        drv.close()
        srv.stop()


def test_safe_state_goes_to_max_by_default(mc_serial_config: AttenuatorConfig, mc_device: MiniCircuitsDevice) -> None:
    drv = create(mc_serial_config)
    try:
        drv.set(1, 20)
        assert drv.safe_state() == {1: "ok"}
        assert mc_device.att_db == [100.0]
    finally:
        drv.close()


def test_multichannel_rc4dat_uses_channel_commands() -> None:
    dev = MiniCircuitsDevice(model="RC4DAT-6G-95")
    srv = dev.serve_http()
    drv = create(_config("http", srv.url, model="minicircuits-rc4dat", channels=4, max_db=95))
    try:
        drv.set(3, 44.75)
        assert dev.att_db == [0.0, 0.0, 44.75, 0.0]
        assert drv.get(3) == 44.75
        assert drv.info().channels == 4
    finally:
        srv.stop()
