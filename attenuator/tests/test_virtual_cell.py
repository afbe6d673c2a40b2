"""End to end with the real emulated cell (cellab-cell): serial driver → bridge → cell control socket.

Checks the control protocol agreed with the emulator room and that the cell's RSRP follows the
attenuation the real Mini-Circuits driver applies (a calibration sweep fits slope 1).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cellab.attenuator.bridge import AttenuatorBridge, virtual_lab_attenuator
from cellab.attenuator.calibration import cell_rsrp_reader, fit, sweep
from cellab.attenuator.driver import create

from cellab.errors import CellabError
from cellab.paths import find_program


@pytest.fixture
def real_cell(require_root: None, netns_prefix: str, tmp_path: Path) -> Iterator[str]:
    try:
        program = find_program("cellab-cell")
    except CellabError as exc:
        pytest.fail(f"{exc} (the emulator room's program)")
    srv, ue = f"{netns_prefix}s", f"{netns_prefix}u"
    endpoint = f"ipc://{tmp_path}/cell.ctl"
    made: list[str] = []
    proc = None
    try:
        for ns in (srv, ue):
            subprocess.run(["ip", "netns", "add", ns], check=True, timeout=10)
            made.append(ns)
        log = tmp_path / "cell.log"
        with log.open("wb") as out:
            proc = subprocess.Popen([str(program), "--srv", f"{srv}:tun0", "--ue", f"{ue}:tun0:10.77.0.2",
                                     "--ctl", endpoint, "--duration-s", "60"], stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while b'"ready"' not in log.read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"cellab-cell did not start: {log.read_text(errors='replace')[:400]}")
            time.sleep(0.02)
        yield endpoint
    finally:
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for ns in made:
            subprocess.run(["ip", "netns", "del", ns], check=False, timeout=10)


def test_real_driver_moves_the_emulated_cells_rsrp(real_cell: str, tmp_path: Path) -> None:
    link = tmp_path / "att0"
    with AttenuatorBridge(real_cell, link, ues=1):
        drv = create(virtual_lab_attenuator(link, ues=1, max_db=90))
        try:
            assert drv.set(1, 20.3) == 20.25
            points = sweep(drv, 1, cell_rsrp_reader(real_cell, 0), 20, 60, 10, settle_s=0.3, samples=1)
        finally:
            drv.safe_state()
            drv.close()
    cal = fit(points, "vbox", "vue0", 3350)
    assert cal.b_db_per_db == pytest.approx(1.0, abs=0.01)  # the cell's RSRP drops 1 dB per dB applied
    assert cal.residual_rms_db < 0.1
