"""The benchmark's trace helpers (pure Python)."""

from __future__ import annotations

import pytest
from cellab.server import experiment


def test_constant_trace_has_the_rate(tmp_path):
    path = experiment.constant_trace(tmp_path / "c.trace", rate_mbit=24, duration_ms=1000)
    stamps = [int(x) for x in path.read_text().split()]
    assert len(stamps) == 2000  # 24 Mbit/s = 2000 packets of 1500 bytes per second
    assert stamps == sorted(stamps) and stamps[0] == 0 and stamps[-1] == 999


def test_rotated_trace_keeps_every_opportunity(tmp_path):
    src = tmp_path / "t.trace"
    src.write_text("0\n0\n3\n5\n9\n10\n")
    out = [int(x) for x in experiment.rotated_trace(src, 4, tmp_path / "r.trace").read_text().split()]
    assert out == [1, 5, 6, 6, 6, 9]  # 5,9,10 shifted by -4; 0,0,3 wrapped by +10-4
    assert out == sorted(out)
    with pytest.raises(ValueError, match="nonzero"):
        (tmp_path / "z.trace").write_text("0\n0\n")
        experiment.rotated_trace(tmp_path / "z.trace", 1, tmp_path / "zz.trace")


def test_idle_rtt_and_rate_of_a_trace(tmp_path):
    src = tmp_path / "t.trace"
    src.write_text("0\n0\n3\n9\n10\n")   # loops every 10 ms
    # waits from ms 0..9 to the next opportunity: 0,2,1,0,5,4,3,2,1,0 -> mean 1.8
    assert experiment.idle_trace_rtt_ms(src, 10, base_rtt_ms=20.0) == pytest.approx(21.8)
    assert experiment.trace_rate_mbit(src, 10) == pytest.approx(4 * 1500 * 8 / 10e3)


def test_queueing_delay_per_packet_from_the_tti_log(tmp_path):
    """Two packets enter in TTI 0 and leave in TTIs 2 and 5; one enters in TTI 6 and leaves at once."""
    np = pytest.importorskip("numpy")
    ttilog = pytest.importorskip("cellab.emulator.ttilog")
    header = np.zeros(1, ttilog.HEADER_DTYPE)
    header["magic"], header["version"] = ttilog.MAGIC, ttilog.VERSION
    header["rec_size"], header["n_ues"] = ttilog.RECORD_DTYPE.itemsize, 1
    rec = np.zeros(8, ttilog.RECORD_DTYPE)
    rec["tti"] = np.arange(8)
    rec["dl_delivered_bytes"] = [0, 0, 1500, 0, 0, 1500, 1500, 0]
    rec["dl_queue_bytes"] = [3000, 3000, 1500, 1500, 1500, 0, 0, 0]
    path = tmp_path / "tti.bin"
    path.write_bytes(header.tobytes() + rec.tobytes())
    assert experiment.queueing_delays_ms(path) == [2, 5, 0]
