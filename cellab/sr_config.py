"""TS 36.213 Table 10.1.5-1: the UE-specific SR configuration index I_SR <-> SR period and subframe offset.

  I_SR      period (ms)   offset N_OFFSET,SR
  0-4        5            I_SR
  5-14      10            I_SR - 5
  15-34     20            I_SR - 15
  35-74     40            I_SR - 35
  75-154    80            I_SR - 75
  155-156    2            I_SR - 155
  157        1            I_SR - 157
  158-1023  reserved

Used by the eNB room (ground truth from RRCConnectionSetup), the virtual lab and the runner.
"""

from __future__ import annotations

from typing import NamedTuple

# (first I_SR, last I_SR, period_ms); the offset is I_SR - first
_TABLE: tuple[tuple[int, int, int], ...] = (
    (0, 4, 5),
    (5, 14, 10),
    (15, 34, 20),
    (35, 74, 40),
    (75, 154, 80),
    (155, 156, 2),
    (157, 157, 1),
)
SR_PERIODS_MS = tuple(sorted(period for _, _, period in _TABLE))
MAX_SR_CONFIG_INDEX = 1023  # sr-ConfigIndex is INTEGER (0..157) in Rel-8; 158..1023 are reserved in the table


class SrConfig(NamedTuple):
    sr_config_index: int
    sr_period_ms: int
    sr_offset_ms: int


def sr_from_index(sr_config_index: int) -> SrConfig:
    """I_SR -> (period, offset); a reserved or negative index raises ValueError naming the valid range."""
    for first, last, period in _TABLE:
        if first <= sr_config_index <= last:
            return SrConfig(sr_config_index, period, sr_config_index - first)
    raise ValueError(f"sr-ConfigIndex {sr_config_index} is reserved or out of range (valid: 0-157)")


def sr_config_index(sr_period_ms: int, sr_offset_ms: int) -> int:
    """(period, offset) -> I_SR; the offset must be in 0..period-1."""
    for first, _last, period in _TABLE:
        if period == sr_period_ms:
            if not 0 <= sr_offset_ms < period:
                raise ValueError(f"SR subframe offset {sr_offset_ms} is outside 0-{period - 1} for period {period} ms")
            return first + sr_offset_ms
    raise ValueError(f"SR period {sr_period_ms} ms is not in TS 36.213 Table 10.1.5-1 (allowed: {SR_PERIODS_MS})")


def sr_occasion(sr_period_ms: int, sr_offset_ms: int, frame: int, subframe: int) -> bool:
    """TS 36.213 §10.1.5: an SR occasion is where (10*n_f + floor(n_s/2) - N_OFFSET,SR) mod SR_PERIODICITY == 0."""
    return (10 * frame + subframe - sr_offset_ms) % sr_period_ms == 0
