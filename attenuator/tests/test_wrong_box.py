"""Issue 27, drivers: a driver pointed at another vendor's box is an error naming the box, never a device
of zero channels. Before, the JFW driver on a Mini-Circuits or Adaura serial box counted no `Atten #` lines,
reported 0 channels, and with `channels: 1` in the entry was accepted (the range check took 0 as 1)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cellab.attenuator.config import AttenuatorConfig
from cellab.attenuator.driver import AttenuatorError, Attenuator, DeviceInfo, create
from cellab.attenuator.emulators.adaura import AdauraDevice
from cellab.attenuator.emulators.minicircuits import MiniCircuitsDevice


@pytest.mark.parametrize("device, said", [(MiniCircuitsDevice, "Invalid Command"), (AdauraDevice, "Unknown command")])
@pytest.mark.parametrize("channels", [1, 4])
def test_jfw_driver_on_another_vendors_serial_box(tmp_path: Path, device, said, channels) -> None:
    srv = device().serve_pty(link=str(tmp_path / "tty"))
    try:
        drv = create(AttenuatorConfig(name="jfw", model="jfw-50pa", transport="serial", address=srv.port,
                                      channels=channels, max_db=60, step_db=1.0, timeout_s=1.0))
        with pytest.raises(AttenuatorError, match=f"not a JFW 50PA/50BA bench .*{said}"):
            drv.info()
    finally:
        srv.stop()


def test_no_driver_reports_a_box_without_channels() -> None:
    """The base class refuses any backend's description that counts no channel."""

    class Mute(Attenuator):
        def _open(self) -> None: ...
        def _close(self) -> None: ...
        def _write(self, channel: int, value_db: float) -> float | None: return value_db
        def _read(self, channel: int) -> float: return 0.0
        def _describe(self) -> DeviceInfo:
            return DeviceInfo(model="?", serial="", firmware="", channels=0, min_db=0, max_db=60, step_db=1)

    drv = Mute(AttenuatorConfig(name="box", model="jfw-50pa", transport="serial", address="/dev/null", max_db=60,
                                options={"check_range": False}))
    with pytest.raises(AttenuatorError, match="reports no channels: it does not answer as a jfw-50pa"):
        drv.info()


def test_minicircuits_driver_on_a_keysight_box_names_the_box() -> None:
    """A Keysight 11713C keeps silent on Mini-Circuits' `:MN?` (an undefined SCPI header): before, the driver said
    only "no reply within 1.0 s"; now it says it is not a Mini-Circuits box and what answers there."""
    from cellab.attenuator.emulators.keysight import Keysight11713C

    srv = Keysight11713C().serve()
    try:
        drv = create(AttenuatorConfig(name="mc", model="minicircuits-rc4dat", transport="telnet",
                                      address=f"127.0.0.1:{srv.port}", channels=4, max_db=60, step_db=0.25,
                                      timeout_s=0.5))
        for attempt in (drv.info, lambda: drv.set(1, 10.0)):
            with pytest.raises(AttenuatorError, match=r"mc: not a Mini-Circuits attenuator at 127\.0\.0\.1:\d+: .*"
                                                      r"':MN\?'.*answers \*IDN\? with '.*11713C.*model "
                                                      r"\(minicircuits-rc4dat\)"):
                attempt()
    finally:
        srv.stop()
