"""The report's statistics (cellab/report/stats.py): ratio of medians with a bootstrap interval and a Mann–Whitney
p-value, the Wilson interval of an accuracy, "too few runs" instead of an interval."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cellab.report import stats as rs
from cellab.results.ratios import ratio_of_medians


def test_ratio_of_medians_with_interval_and_p_value():
    rng = np.random.default_rng(11)
    base = rng.normal(10.0, 0.5, 12)
    level = rng.normal(5.0, 0.25, 12)
    r = ratio_of_medians(base, level)
    assert (r.n_base, r.n_level) == (12, 12)
    assert r.ratio == pytest.approx(np.median(level) / np.median(base))
    assert r.low < r.ratio < r.high and r.low < 0.5 < r.high and r.high < 1.0
    assert r.p_value < 1e-4 and not r.note
    assert rs.fmt_ratio(r).startswith("×0.5") and "[" in rs.fmt_ratio(r)


def test_the_interval_is_reproducible():
    base, level = [10.0, 11.0, 9.0, 10.5], [8.0, 9.5, 7.0, 8.5]
    assert ratio_of_medians(base, level) == ratio_of_medians(base, level)  # fixed seed


def test_same_distribution_is_not_significant():
    rng = np.random.default_rng(5)
    r = ratio_of_medians(rng.normal(10, 1, 20), rng.normal(10, 1, 20))
    assert r.low < 1.0 < r.high and r.p_value > 0.05


def test_identical_values_give_a_zero_width_interval_and_p_one():
    r = ratio_of_medians([4.0, 4.0, 4.0], [4.0, 4.0])
    assert (r.ratio, r.low, r.high, r.p_value) == (1.0, 1.0, 1.0, 1.0)


@pytest.mark.parametrize(("base", "level"), [([10.0], [8.0, 9.0]), ([10.0, 11.0], [8.0]), ([], [1.0, 2.0])])
def test_fewer_than_two_runs_a_side_is_too_few(base, level):
    r = ratio_of_medians(base, level)
    assert r.low is None and r.high is None and r.p_value is None
    assert "too few runs" in r.note and "too few runs" in rs.fmt_ratio(r)


def test_a_zero_baseline_has_no_ratio():
    r = ratio_of_medians([0.0, 0.0, 0.0], [1.0, 2.0])
    assert r.ratio is None and "baseline median is 0" in rs.fmt_ratio(r)
    assert r.as_dict()["ratio"] is None


def wilson_by_hand(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    p = k / n
    center = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return center - half, center + half


@pytest.mark.parametrize(("k", "n"), [(4, 7), (0, 3), (10, 10), (45, 60)])
def test_wilson_interval_matches_the_formula(k, n):
    acc = rs.wilson(k, n)
    low, high = wilson_by_hand(k, n)
    assert acc.low == pytest.approx(low, abs=1e-9) and acc.high == pytest.approx(high, abs=1e-9)
    assert acc.share == k / n


def test_no_runs_no_interval():
    acc = rs.wilson(0, 0)
    assert acc.low is None and rs.fmt_accuracy(acc) == "no runs"
    assert rs.fmt_accuracy(rs.wilson(4, 7)) == "4 of 7 (57 %) [25 %, 84 %]"


def test_sr_labels_and_numeric_order():
    assert [rs.sr_label(v) for v in (20, 20.0, "20", None, 2.5, float("inf"), True)] == \
        ["20", "20", "20", "none", "2.5", "inf", "True"]
    assert sorted(["80", "5", "none", "10"], key=rs.numeric_first) == ["5", "10", "80", "none"]


def test_ks_uses_scipy():
    d, p = rs.ks_2samp([1, 2, 3, 4], [3, 4, 5, 6])
    assert d == pytest.approx(0.5) and 0 < p <= 1
