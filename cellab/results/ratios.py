"""Two samples of runs compared: the ratio of their medians with a percentile bootstrap interval, and a two-sided
Mann–Whitney U p-value (scipy.stats). The unit is the run: each run gives one throughput, one p95 RTT, so the
samples are independent repeats, not the autocorrelated packets of one run. Bootstrap resampling uses a fixed
seed: the same runs give the same interval, in the store, in the report and in `cellab compare`.

Here, below the report, because the store keeps comparisons (cellab.results.comparisons) and a stopping rule
decides on them (cellab.results.stopping); cellab.report.stats re-exports every name.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

CONFIDENCE = 0.95
BOOTSTRAP_RESAMPLES = 4000
BOOTSTRAP_SEED = 20240531
MIN_RUNS = 2  # per side: fewer gives "too few runs", not an interval
INTERVAL_METHOD = "95 % bootstrap, percentile, fixed seed"
TEST_METHOD = "two-sided Mann-Whitney U"


@dataclass
class Ratio:
    """median(level) / median(baseline) over runs, its bootstrap interval and the Mann–Whitney U p-value."""

    n_base: int
    n_level: int
    median_base: float | None = None
    median_level: float | None = None
    ratio: float | None = None
    low: float | None = None
    high: float | None = None
    p_value: float | None = None
    note: str = ""  # why there is no ratio or no interval ("too few runs", "baseline median is 0")

    def as_dict(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in self.__dict__.items()}

    def includes(self, value: float) -> bool | None:
        """Whether the interval holds `value` (None without an interval)."""
        if self.low is None or self.high is None:
            return None
        return self.low <= value <= self.high

    def relative_half_widths(self) -> tuple[float, float] | None:
        """How far the interval reaches below and above the ratio, as shares of the ratio (None without one)."""
        if self.ratio is None or self.low is None or self.high is None or self.ratio <= 0:
            return None
        return (self.ratio - self.low) / self.ratio, (self.high - self.ratio) / self.ratio


def median_ratio(base: np.ndarray, level: np.ndarray, axis: int = -1) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.median(level, axis=axis) / np.median(base, axis=axis)


def median_difference(base: np.ndarray, level: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.median(level, axis=axis) - np.median(base, axis=axis)


def bootstrap_interval(base: Any, level: Any, statistic: Any, seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:
    """The percentile bootstrap interval of statistic(base, level), the runs of each side resampled apart."""
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore")  # a degenerate resample (all equal) is an interval of width 0
        from scipy import stats  # a second of import: only where a ratio is taken, not for every `cellab run`

        ci = stats.bootstrap((np.asarray(base, float), np.asarray(level, float)), statistic,
                             n_resamples=BOOTSTRAP_RESAMPLES, vectorized=True, paired=False,
                             confidence_level=CONFIDENCE, method="percentile",
                             rng=np.random.default_rng(seed)).confidence_interval
    return float(ci.low), float(ci.high)


def ratio_of_medians(base: Any, level: Any, seed: int = BOOTSTRAP_SEED) -> Ratio:
    base = np.asarray(base, float)
    level = np.asarray(level, float)
    out = Ratio(int(base.size), int(level.size))
    if base.size:
        out.median_base = float(np.median(base))
    if level.size:
        out.median_level = float(np.median(level))
    if base.size < MIN_RUNS or level.size < MIN_RUNS:
        out.note = f"too few runs ({level.size} vs {base.size}; {MIN_RUNS} per side needed)"
        if base.size and level.size and out.median_base:
            out.ratio = out.median_level / out.median_base
        return out
    if out.median_base == 0:
        out.note = "baseline median is 0: no ratio"
    else:
        out.ratio = out.median_level / out.median_base
        out.low, out.high = bootstrap_interval(base, level, median_ratio, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from scipy import stats

        p = float(stats.mannwhitneyu(level, base, alternative="two-sided").pvalue)
    out.p_value = p if math.isfinite(p) else 1.0  # every value tied: no evidence of a difference
    return out


def smallest_p_value(n_level: int, n_base: int) -> float:
    """The smallest two-sided Mann–Whitney U p-value n_level against n_base runs can ever give (exact test, the
    two samples entirely apart, no ties): 2 / C(n_level + n_base, n_base), at most 1. 3 against 3: 0.1."""
    if n_level < 1 or n_base < 1:
        return 1.0
    return min(1.0, 2.0 / math.comb(n_level + n_base, n_base))


def runs_for_p(alpha: float) -> int:
    """The fewest runs per side (equal sides) whose smallest possible p is below alpha."""
    n = 1
    while smallest_p_value(n, n) >= alpha:
        n += 1
    return n


__all__ = ["BOOTSTRAP_RESAMPLES", "BOOTSTRAP_SEED", "CONFIDENCE", "INTERVAL_METHOD", "MIN_RUNS", "Ratio",
           "TEST_METHOD", "bootstrap_interval", "median_difference", "median_ratio", "ratio_of_medians", "runs_for_p",
           "smallest_p_value"]
