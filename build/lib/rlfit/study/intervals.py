"""Confidence intervals for one variant's per-seed scores and for the difference between two variants, chosen by
one documented rule.

The rule (`method="auto"`): with fewer than BCA_MIN_SEEDS seeds an interval is t-based, at or above it a BCa
bootstrap (scipy.stats.bootstrap). t-based means Student's t for a mean, the Tukey-McLaughlin (Yuen) trimmed-mean t
for the IQM (the 25% trimmed mean), Welch's t for a difference of means and Yuen-Welch for a difference of IQMs
(scipy.stats.ttest_ind(..., trim=0.25)). Why: a bootstrap interval on few seeds is too narrow (it treats the
sample as the population and uses normal quantiles). In simulation (tests/study/test_intervals.py) BCa for a
normal mean covers 84% at n = 5, 90% at n = 10, 93% at n = 20 and 94% at n = 30, where the t interval covers
95% at every n. The t intervals assume roughly symmetric per-seed scores: on a skewed distribution (exponential)
the mean's t interval covers 88% at n = 5 and 90% at n = 10; no interval on so few seeds does much better.

Every function takes scores with seeds on the last axis, shape (..., n), and returns (low, high) of shape (...).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import scipy.stats

from rlfit.errors import UserError, did_you_mean

INTERVAL_METHODS = ("auto", "t", "bca")
"""auto: t below BCA_MIN_SEEDS seeds, BCa at or above; t: always t-based; bca: always the BCa bootstrap."""
BCA_MIN_SEEDS = 30
"""Below this many seeds (per variant) `auto` gives t-based intervals; see the module docstring for why."""
IQM_TRIM = 0.25
"""The IQM is the mean of the middle half: 25% of the seeds (rounded down) cut from each end, as scipy's
trim_mean and rliable count them."""


def check_method(method: str) -> str:
    """`method` in lower case ('BCa' is 'bca') if it is one of INTERVAL_METHODS, else a one-line UserError naming
    the choices."""
    method = str(method).lower()
    if method not in INTERVAL_METHODS:
        raise UserError(f"unknown interval method '{method}'{did_you_mean(str(method), list(INTERVAL_METHODS))}; "
                        f"choose from {', '.join(INTERVAL_METHODS)}")
    return method


def method_for(n: int, method: str = "auto") -> str:
    """'t' or 'bca': what `method` gives for n seeds per variant (the smaller group's n for a difference)."""
    method = check_method(method)
    if method == "auto":
        return "t" if n < BCA_MIN_SEEDS else "bca"
    return method


def describe(method: str) -> str:
    """One sentence for a report: how its intervals were computed."""
    if method == "t":
        return ("t-based: Student's t for means, the Tukey-McLaughlin (Yuen) trimmed-mean t for IQMs, Welch's t "
                "for differences of means and Yuen-Welch for differences of IQMs")
    if method == "bca":
        return "the bias-corrected and accelerated (BCa) bootstrap (scipy.stats.bootstrap)"
    return (f"t-based below {BCA_MIN_SEEDS} seeds per variant (Student's t for means, Tukey-McLaughlin (Yuen) "
            "trimmed-mean t for IQMs, Welch's t and Yuen-Welch for differences), the BCa bootstrap "
            f"(scipy.stats.bootstrap) from {BCA_MIN_SEEDS} seeds on")


def iqm(scores: np.ndarray) -> np.ndarray:
    """(..., n) -> (...): the interquartile mean (25% trimmed mean) over the last axis."""
    return scipy.stats.trim_mean(scores, IQM_TRIM, axis=-1)


def mean_t_interval(scores: np.ndarray, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Student's t interval of the mean: mean +- t(n - 1) s / sqrt(n); scores (..., n), n >= 2."""
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # constant scores: a zero standard error, handled below
        interval = scipy.stats.ttest_1samp(scores, 0.0, axis=-1).confidence_interval(confidence)
    return _constant_safe(scores, np.mean(scores, axis=-1), interval.low, interval.high)


def iqm_t_interval(scores: np.ndarray, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Tukey-McLaughlin (Yuen) interval of the 25% trimmed mean; scores (..., n), n >= 2.

    With g = floor(n / 4) seeds cut from each end and h = n - 2g kept: trimmed mean +- t(h - 1) * sqrt((n - 1)
    s_w^2 / (h (h - 1))), s_w^2 the variance (ddof 1) of the winsorized scores: the one-sample form of the
    standard error scipy.stats.ttest_ind(trim=0.25) uses for each group.
    """
    ordered = np.sort(scores, axis=-1)
    n = ordered.shape[-1]
    g = int(IQM_TRIM * n)
    h = n - 2 * g
    winsorized = np.clip(ordered, ordered[..., g:g + 1], ordered[..., n - g - 1:n - g])
    standard_error = np.sqrt((n - 1) * winsorized.var(axis=-1, ddof=1) / (h * (h - 1)))
    half = scipy.stats.t.ppf(0.5 + confidence / 2.0, h - 1) * standard_error
    centre = iqm(ordered)
    return centre - half, centre + half


def bca_interval(scores: np.ndarray, statistic: str, confidence: float = 0.95, reps: int = 2000,
                 seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """BCa bootstrap interval (scipy) of 'mean' or 'iqm' over the last axis of scores (..., n), n >= 2."""
    function = _STATISTICS[statistic]
    result = _bootstrap((scores,), function, confidence, reps, seed)
    return _constant_safe(scores, function(scores, axis=-1), result.low, result.high)


def difference_interval(scores_a: np.ndarray, scores_b: np.ndarray, statistic: str, method: str = "auto",
                        confidence: float = 0.95, reps: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Interval of statistic(a) - statistic(b) ('mean' or 'iqm') for independent samples (n_a,), (n_b,), each n >= 2.

    t-based: Welch's t (mean) or Yuen-Welch (IQM), scipy.stats.ttest_ind(equal_var=False, trim=0 or 0.25). BCa:
    each sample resampled on its own (scipy.stats.bootstrap with two samples).
    """
    if method_for(min(scores_a.size, scores_b.size), method) == "t":
        trim = IQM_TRIM if statistic == "iqm" else 0.0
        with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)  # constant samples: a zero standard error
            result = scipy.stats.ttest_ind(scores_a, scores_b, equal_var=False, trim=trim)
            interval = result.confidence_interval(confidence)
        low, high = float(interval.low), float(interval.high)
    else:
        function = _STATISTICS[statistic]

        def difference(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
            return function(a, axis=axis) - function(b, axis=axis)

        result = _bootstrap((scores_a, scores_b), difference, confidence, reps, seed)
        low, high = float(result.low), float(result.high)
    point = float(_STATISTICS[statistic](scores_a) - _STATISTICS[statistic](scores_b))
    if math.isnan(low) or math.isnan(high):  # both samples constant: no spread, the difference is exact
        low = high = point
    return low, high


def _bootstrap(samples: tuple[np.ndarray, ...], statistic, confidence: float, reps: int, seed: int):
    """scipy's BCa bootstrap over the last axis; its confidence_interval (low, high)."""
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore")  # degenerate resamples (constant scores): NaN, handled by the callers
        result = scipy.stats.bootstrap(samples, statistic, vectorized=True, axis=-1, method="BCa", n_resamples=reps,
                                       confidence_level=confidence, rng=seed)
    return result.confidence_interval


def _constant_safe(scores: np.ndarray, point: np.ndarray, low: np.ndarray,
                   high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where every seed scored the same the interval is that value (scipy gives NaN there)."""
    constant = np.ptp(scores, axis=-1) == 0
    return np.where(constant, point, low), np.where(constant, point, high)


def _trimmed(scores: np.ndarray, axis: int = -1) -> np.ndarray:
    return scipy.stats.trim_mean(scores, IQM_TRIM, axis=axis)


_STATISTICS = {"mean": np.mean, "iqm": _trimmed}
