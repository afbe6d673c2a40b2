"""The real srsenb (../shared/tools/srsran) accepts what we render: it reaches `==== eNodeB started ===`
with no configuration error for n_prb 6, 15, 25, 50 and every SR period (each pair started once: every
n_prb and every period is covered in six starts), and a config it refuses is reported with its own line."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cellab.ran.profile import EnbProfile, load_profile
from cellab.ran.render import render
from cellab.ran.srsenb_proc import SrsenbError, SrsenbProcess, sctp_shim_for

ROOM = Path(__file__).resolve().parents[1]
READY_TIMEOUT_S = 30.0
FREQUENCY_LINE_TIMEOUT_S = 20.0


def _console_once_it_shows(console_path: Path, line_start: str, timeout_s: float) -> str:
    """The console's text once it holds a line starting so, or as it is when timeout_s has passed."""
    deadline = time.monotonic() + timeout_s
    while True:
        console = console_path.read_text()
        if any(line.startswith(line_start) for line in console.splitlines()) or time.monotonic() > deadline:
            return console
        time.sleep(0.1)


def _profile(n_prb: int, sr_period_ms: int, sr_offset: int | None = None, cqi_offset: int | None = None) -> EnbProfile:
    prof = load_profile(ROOM / "examples/zmq-25prb.yaml").model_copy(deep=True)
    prof.enb.n_prb = n_prb
    prof.sr.period_ms = sr_period_ms
    prof.sr.subframe_offset = sr_offset
    prof.cqi.subframe_offset = cqi_offset
    prof.prach.freq_offset = 0 if n_prb == 6 else 4
    return EnbProfile.model_validate(prof.model_dump())  # re-validated like a loaded one


def _start(binary: Path, prof: EnbProfile, folder: Path) -> SrsenbProcess:
    render(prof, folder)
    proc = SrsenbProcess(binary, folder, folder / "console.txt", preload=sctp_shim_for(binary))
    proc.start()
    return proc


@pytest.mark.parametrize(("n_prb", "sr_period_ms", "sr_offset", "cqi_offset"), [
    (6, 5, None, None), pytest.param(15, 10, None, None, marks=pytest.mark.extended), (25, 20, None, None),
    pytest.param(50, 40, None, None, marks=pytest.mark.extended), (25, 80, None, None),
    (50, 10, 3, 2),  # fixed SR and CQI subframes (rr.conf `subframe = [..]`)
])  # make test keeps 6, 25 and 50 PRB and SR 5, 10 (fixed subframes), 20 and 80 ms
def test_srsenb_starts_on_rendered_configs(srsenb_bin, srsran_lock, tmp_path, n_prb, sr_period_ms, sr_offset,
                                           cqi_offset):
    proc = _start(srsenb_bin, _profile(n_prb, sr_period_ms, sr_offset, cqi_offset), tmp_path)
    started = time.monotonic()
    try:
        proc.wait_ready(READY_TIMEOUT_S)
        ready_s = time.monotonic() - started
        # srsenb prints its "Setting frequency: ... nof_prb=N" line after "eNodeB started", later on a busy host
        console = _console_once_it_shows(tmp_path / "console.txt", "Setting frequency", FREQUENCY_LINE_TIMEOUT_S)
    finally:
        proc.kill()
    assert f"nof_prb={n_prb}" in console
    assert "DL=2680.0 Mhz" in console
    for bad in ("Invalid", "Error", "Parser Error"):
        assert bad not in console, console
    print(f"n_prb {n_prb}, SR {sr_period_ms} ms: ready after {ready_s:.2f} s")


def test_config_error_is_reported_with_srsenbs_own_line(srsenb_bin, srsran_lock, tmp_path):
    render(_profile(25, 20), tmp_path)
    rb = tmp_path / "rb.conf"
    rb.write_text(rb.read_text().replace("five_qi_config = ();", ""))
    proc = SrsenbProcess(srsenb_bin, tmp_path, tmp_path / "console.txt", preload=sctp_shim_for(srsenb_bin))
    proc.start()
    try:
        with pytest.raises(SrsenbError) as info:
            proc.wait_ready(READY_TIMEOUT_S)
    finally:
        proc.kill()
    assert "Error section five_qi_config not found" in str(info.value)
    assert "exit code" in str(info.value)
