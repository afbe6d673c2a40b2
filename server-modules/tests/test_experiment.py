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
