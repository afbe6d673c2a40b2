"""The constant-window frontier's arithmetic (the measurement itself runs in `make bench BENCH=modules`)."""

from __future__ import annotations

import math

import pytest
from cellab.server.frontier import Frontier, Point, throughput_at_delay

CURVE = [Point("window 16", 2.0, 60.0), Point("window 32", 3.0, 80.0), Point("window 64", 4.0, 120.0),
         Point("window 24", 1.5, 70.0)]  # a point below the envelope (less throughput at more delay)


def test_throughput_at_delay_interpolates_the_upper_envelope():
    assert throughput_at_delay(CURVE, 60.0) == pytest.approx(2.0)
    assert throughput_at_delay(CURVE, 70.0) == pytest.approx(2.5)  # between 16 and 32, the 24 point ignored
    assert throughput_at_delay(CURVE, 100.0) == pytest.approx(3.5)
    assert throughput_at_delay(CURVE, 500.0) == pytest.approx(4.0)  # flat beyond the largest delay
    assert math.isnan(throughput_at_delay(CURVE, 50.0))  # below the smallest delay: not judged
    assert math.isnan(throughput_at_delay([], 80.0))


def test_frontier_places_c2tcp_and_the_issue_bar():
    f = Frontier(cubic=Point("cubic", 4.0, 160.0), c2tcp=Point("c2tcp", 2.7, 80.0), constant_windows=CURVE)
    assert f.c2tcp_vs_frontier == pytest.approx(0.9)
    assert f.frontier_at_issue_delay == pytest.approx(0.75)  # 3.0 Mbit/s at 80 ms against Cubic's 4.0
