"""The report's statistics, with scipy.stats: comparisons of a factor's levels against a baseline level (ratio of
medians with a bootstrap confidence interval, Mann–Whitney U p-value: cellab.results.ratios, re-exported here),
SR-estimate accuracy with a Wilson interval and the SR confusion matrix, two-sample Kolmogorov–Smirnov for
distributions.

The unit of a comparison is the run: each run gives one throughput and one p95 RTT, so the samples are
independent repeats, not the autocorrelated packets of one run. Bootstrap resampling uses a fixed seed:
a rebuilt report shows the same intervals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from cellab.results.ratios import CONFIDENCE, Ratio

NO_ESTIMATE = "none"


# --- two samples ----------------------------------------------------------------------------------
def ks_2samp(a: Any, b: Any) -> tuple[float, float]:
    """Two-sample Kolmogorov–Smirnov: D = max |F_a - F_b| and its p-value (scipy: exact for small samples)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.size == 0 or b.size == 0:
        raise ValueError("KS needs two non-empty samples")
    from scipy import stats  # a second of import, only where a report tests: not for `cellab run`'s headline

    result = stats.ks_2samp(a, b)
    return float(result.statistic), float(result.pvalue)


@dataclass
class Accuracy:
    correct: int
    total: int
    low: float | None = None
    high: float | None = None

    @property
    def share(self) -> float | None:
        return self.correct / self.total if self.total else None


def wilson(correct: int, total: int) -> Accuracy:
    """Share correct with its Wilson score interval (scipy.stats.binomtest)."""
    if total <= 0:
        return Accuracy(correct, total)
    from scipy import stats

    ci = stats.binomtest(correct, total).proportion_ci(confidence_level=CONFIDENCE, method="wilson")
    return Accuracy(correct, total, float(ci.low), float(ci.high))


# --- SR estimation ------------------------------------------------------------------------------
def sr_label(value: Any) -> str:
    """20, 20.0 and "20" are the same SR period."""
    if value is None:
        return NO_ESTIMATE
    if isinstance(value, bool):
        return str(value)
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return str(value)
    if not math.isfinite(number):
        return str(value)
    return str(int(number)) if number.is_integer() else f"{number:g}"


def numeric_first(label: str) -> tuple[int, float, str]:
    try:
        number = float(label)
    except ValueError:
        return (1, 0.0, label)
    return (0, number, label) if math.isfinite(number) else (1, 0.0, label)


@dataclass
class Confusion:
    true_labels: list[str]
    estimate_labels: list[str]
    counts: np.ndarray  # [true, estimate]
    correct: int
    total: int
    without_truth: int  # runs with an SR result but no known true period: not in the matrix

    def row_accuracy(self, true_label: str) -> Accuracy:
        i = self.true_labels.index(true_label)
        hit = self.estimate_labels.index(true_label) if true_label in self.estimate_labels else None
        return wilson(int(self.counts[i, hit]) if hit is not None else 0, int(self.counts[i].sum()))


def confusion_from_pairs(pairs: list[tuple[str, str]], without_truth: int = 0) -> Confusion | None:
    """Rows: the true SR period; columns: the estimate or "none" (no estimate)."""
    if not pairs:
        return None
    true_labels = sorted({t for t, _ in pairs}, key=numeric_first)
    estimates = {e for _, e in pairs} - {NO_ESTIMATE}
    estimate_labels = sorted(estimates | set(true_labels), key=numeric_first)
    if NO_ESTIMATE in {e for _, e in pairs}:
        estimate_labels.append(NO_ESTIMATE)
    counts = np.zeros((len(true_labels), len(estimate_labels)), int)
    for t, e in pairs:
        counts[true_labels.index(t), estimate_labels.index(e)] += 1
    correct = sum(1 for t, e in pairs if t == e)
    return Confusion(true_labels, estimate_labels, counts, correct, len(pairs), without_truth)


# --- formatting -----------------------------------------------------------------------------------
def fmt_number(value: float | None, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if math.isinf(value):
        return "∞" if value > 0 else "-∞"
    return f"{value:.{digits}f}"


def fmt_p(p: float | None) -> str:
    if p is None:
        return ""
    return f"{p:.3g}" if p >= 1e-4 else "< 1e-4"


def fmt_ratio(r: Ratio) -> str:
    """×0.82 [0.75, 0.90], or the note when there is no interval."""
    if r.ratio is None:
        return r.note
    text = f"×{fmt_number(r.ratio)}"
    if r.low is None:
        return f"{text} ({r.note})" if r.note else text
    return f"{text} [{fmt_number(r.low)}, {fmt_number(r.high)}]"


def fmt_accuracy(a: Accuracy) -> str:
    if not a.total:
        return "no runs"
    return f"{a.correct} of {a.total} ({100 * a.share:.0f} %) [{100 * a.low:.0f} %, {100 * a.high:.0f} %]"


__all__ = ["Accuracy", "Confusion", "confusion_from_pairs", "fmt_accuracy", "fmt_number", "fmt_p", "fmt_ratio",
           "ks_2samp", "numeric_first", "sr_label", "wilson"]
