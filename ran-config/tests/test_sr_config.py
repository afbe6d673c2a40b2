import pytest

from cellab.sr_config import SR_PERIODS_MS, sr_config_index, sr_from_index, sr_occasion


@pytest.mark.parametrize(("index", "period", "offset"), [
    (0, 5, 0), (4, 5, 4), (5, 10, 0), (14, 10, 9), (15, 20, 0), (34, 20, 19), (35, 40, 0), (74, 40, 39),
    (75, 80, 0), (154, 80, 79), (155, 2, 0), (156, 2, 1), (157, 1, 0)])
def test_table_rows_both_ways(index, period, offset):
    assert sr_from_index(index) == (index, period, offset)
    assert sr_config_index(period, offset) == index


def test_every_index_round_trips_and_periods_cover_the_table():
    seen = set()
    for index in range(158):
        cfg = sr_from_index(index)
        seen.add(cfg.sr_period_ms)
        assert sr_config_index(cfg.sr_period_ms, cfg.sr_offset_ms) == index
    assert seen == set(SR_PERIODS_MS) == {1, 2, 5, 10, 20, 40, 80}


@pytest.mark.parametrize("index", [-1, 158, 1023])
def test_reserved_index_is_refused(index):
    with pytest.raises(ValueError, match="0-157"):
        sr_from_index(index)


def test_bad_period_or_offset_is_refused():
    with pytest.raises(ValueError, match="allowed"):
        sr_config_index(7, 0)
    with pytest.raises(ValueError, match="0-19"):
        sr_config_index(20, 20)


def test_occasions_repeat_at_the_period():
    hits = [10 * f + s for f in range(8) for s in range(10) if sr_occasion(20, 3, f, s)]
    assert hits == [3, 23, 43, 63]
