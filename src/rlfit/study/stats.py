"""Statistics over trials: interval estimates, two-variant comparisons, correlations, ratios of means and
performance profiles.

Every function takes per-seed scores as plain 1-D numpy arrays and returns NamedTuples of Python numbers. Intervals
follow `rlfit.study.intervals`' rule (t-based below 30 seeds per variant, BCa from 30); the tests and
bootstraps are scipy's (rliable, archived since 2025, is no longer used: its IQM is scipy's trim_mean and its
bootstraps are percentile intervals, too narrow on few seeds). The same inputs and seed give the same numbers.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np
import scipy.stats

from rlfit.study.intervals import (bca_interval, check_method, difference_interval, iqm, iqm_t_interval,
                                   mean_t_interval, method_for)

ONE_SEED = "one seed: no interval (a spread needs 2 or more seeds)"


class Estimate(NamedTuple):
    """IQM and mean of one variant's per-seed scores, each with a confidence interval (NaN with `note` for one seed)."""

    iqm: float
    iqm_low: float
    iqm_high: float
    mean: float
    mean_low: float
    mean_high: float
    n: int
    sd: float = math.nan
    """Standard deviation across seeds (ddof 1); NaN for one seed."""
    method: str = ""
    """'t' or 'bca' (`rlfit.study.intervals`), '' for one seed."""
    note: str = ""


class Comparison(NamedTuple):
    """Variant `a` against variant `b` (a minus b): differences with intervals, P(a > b), the tests' raw p-values."""

    a: str
    b: str
    n_a: int
    n_b: int
    mean_diff: float
    mean_diff_low: float
    mean_diff_high: float
    iqm_diff: float
    iqm_diff_low: float
    iqm_diff_high: float
    prob_improvement: float
    prob_improvement_low: float
    prob_improvement_high: float
    effect_size: float
    welch_t: float
    welch_df: float
    welch_p: float
    mannwhitney_u: float
    mannwhitney_p: float
    method: str
    paired: bool = False
    """Seeds paired (`rlfit.study.paired`): the mean difference's interval and `p_value` come from the per-seed
    differences; Welch's t and Mann-Whitney U are still given, as the unpaired form."""
    paired_t: float = math.nan
    paired_df: float = math.nan
    paired_p: float = math.nan
    wilcoxon_w: float = math.nan
    wilcoxon_p: float = math.nan
    test: str = "Welch's t"
    """The test behind `p_value`: "paired t" (seeds as blocks) or "Welch's t"."""
    p_value: float = math.nan
    """The headline test's raw two-sided p (paired t where seeds are paired, else Welch's)."""


class Correlation(NamedTuple):
    """Pearson and Spearman correlation of paired trial values, with 95% intervals and a verdict."""

    n: int
    pearson_r: float
    pearson_low: float
    pearson_high: float
    pearson_p: float
    spearman_rho: float
    spearman_low: float
    spearman_high: float
    spearman_p: float
    verdict: str


def interval_estimates(scores: Mapping[str, np.ndarray], reps: int = 2000, confidence: float = 0.95, seed: int = 0,
                       method: str = "auto") -> dict[str, Estimate]:
    """IQM and mean per variant with confidence intervals by `method` (`rlfit.study.intervals`).

    `scores[name]` has shape (num_seeds,). A single seed has no interval: low and high are NaN and `note` says why.
    """
    arrays = _score_mapping(scores)
    _check_confidence(confidence)
    _check_reps(reps)
    method = check_method(method)
    estimates = {}
    for name, values in arrays.items():
        if values.size == 1:
            value = float(values[0])
            estimates[name] = Estimate(value, math.nan, math.nan, value, math.nan, math.nan, 1, note=ONE_SEED)
            continue
        chosen = method_for(values.size, method)
        if chosen == "t":
            (iqm_low, iqm_high), (mean_low, mean_high) = iqm_t_interval(values, confidence), mean_t_interval(values, confidence)
        else:
            iqm_low, iqm_high = bca_interval(values, "iqm", confidence, reps, seed)
            mean_low, mean_high = bca_interval(values, "mean", confidence, reps, seed)
        estimates[name] = Estimate(float(iqm(values)), float(iqm_low), float(iqm_high), float(values.mean()),
                                   float(mean_low), float(mean_high), int(values.size), float(values.std(ddof=1)), chosen)
    return estimates


def compare(name_a: str, scores_a: np.ndarray, name_b: str, scores_b: np.ndarray, reps: int = 2000, seed: int = 0,
            confidence: float = 0.95, method: str = "auto", paired: bool = False) -> Comparison:
    """Compares per-seed scores of shape (n_a,) and (n_b,), each n >= 2, as `a` minus `b`.

    With `paired` (the scores aligned by seed, n_a == n_b: seeds are blocks, `rlfit.study.paired`) the difference of
    means gets the paired interval and the headline test is the paired t test, with the Wilcoxon signed-rank test
    beside it; the unpaired tests are still computed.

    Intervals on the difference of means and of IQMs by `method` (Welch's t and Yuen-Welch below 30 seeds, BCa
    from 30); P(a > b) (ties half) with a BCa bootstrap interval (percentile where BCa is undefined: every
    resample gives the same value); Welch's t test and the Mann-Whitney U test (two-sided, raw p-values: the report
    adjusts them for the family of tests); Hedges' g as a descriptive standardized difference.
    """
    a, b = _scores(name_a, scores_a), _scores(name_b, scores_b)
    if min(a.size, b.size) < 2:
        raise ValueError(f"compare needs at least 2 seeds per variant, got {a.size} for {name_a!r} and {b.size} for {name_b!r}")
    _check_reps(reps)
    _check_confidence(confidence)
    chosen = method_for(min(a.size, b.size), method)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # constant samples: t and p come out inf or nan
        welch = scipy.stats.ttest_ind(a, b, equal_var=False)
    mannwhitney = scipy.stats.mannwhitneyu(a, b, alternative="two-sided")
    mean_low, mean_high = difference_interval(a, b, "mean", chosen, confidence, reps, seed)
    iqm_low, iqm_high = difference_interval(a, b, "iqm", chosen, confidence, reps, seed)
    pi_low, pi_high = _probability_of_improvement_interval(a, b, confidence, reps, seed)
    blocked = {"test": "Welch's t", "p_value": float(welch.pvalue)}
    if paired:
        from rlfit.study.paired import paired_test

        test = paired_test(a, b, chosen, confidence, reps, seed)
        mean_low, mean_high = test.low, test.high
        blocked = {"paired": True, "paired_t": test.t, "paired_df": float(test.df), "paired_p": test.p,
                   "wilcoxon_w": test.wilcoxon_w, "wilcoxon_p": test.wilcoxon_p, "test": "paired t", "p_value": test.p}
    return Comparison(
        a=name_a, b=name_b, n_a=int(a.size), n_b=int(b.size),
        mean_diff=float(a.mean() - b.mean()), mean_diff_low=mean_low, mean_diff_high=mean_high,
        iqm_diff=float(iqm(a) - iqm(b)), iqm_diff_low=iqm_low, iqm_diff_high=iqm_high,
        prob_improvement=float(probability_of_improvement(a, b)), prob_improvement_low=pi_low, prob_improvement_high=pi_high,
        effect_size=hedges_g(a, b), welch_t=float(welch.statistic), welch_df=float(welch.df), welch_p=float(welch.pvalue),
        mannwhitney_u=float(mannwhitney.statistic), mannwhitney_p=float(mannwhitney.pvalue), method=chosen, **blocked)


def comparison_verdict(comparison: Comparison, p_adjusted: float, alpha: float = 0.05) -> str:
    """One sentence from the difference's interval and the family-adjusted p of its headline test (paired t where
    seeds are paired, else Welch's t; never from power)."""
    c = comparison
    if not p_adjusted < alpha:
        return (f"no difference detected at n={_seeds(c)} (adjusted p = {p_adjusted:.2g}); the difference of means "
                "lies in its interval, which includes effects of either sign or none" if c.mean_diff_low <= 0 <= c.mean_diff_high
                else f"not significant after correction at n={_seeds(c)} (adjusted p = {p_adjusted:.2g}), though the "
                "unadjusted interval excludes 0")
    higher, lower = (c.a, c.b) if c.mean_diff > 0 else (c.b, c.a)
    return f"`{higher}` scores higher than `{lower}` (adjusted p = {p_adjusted:.2g}, n={_seeds(c)})"


def _seeds(c: Comparison) -> str:
    if c.paired:
        return f"{c.n_a} paired seeds"
    return f"{c.n_a}" if c.n_a == c.n_b else f"{c.n_a}/{c.n_b}"


def probability_of_improvement(scores_a: np.ndarray, scores_b: np.ndarray) -> np.ndarray:
    """P(A > B) + P(A = B) / 2 over all (a, b) pairs: scores (..., n_a) and (..., n_b) -> (...)."""
    a, b = scores_a[..., :, None], scores_b[..., None, :]
    return np.mean((a > b) + 0.5 * (a == b), axis=(-2, -1))


def _probability_of_improvement_interval(a: np.ndarray, b: np.ndarray, confidence: float, reps: int,
                                         seed: int) -> tuple[float, float]:
    """BCa bootstrap interval of P(a > b), each variant resampled on its own; percentile where BCa is undefined."""

    def statistic(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        return probability_of_improvement(np.moveaxis(x, axis, -1), np.moveaxis(y, axis, -1))

    interval = None
    for method in ("BCa", "percentile"):
        with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
            warnings.simplefilter("ignore")
            interval = scipy.stats.bootstrap((a, b), statistic, vectorized=True, method=method, n_resamples=reps,
                                             confidence_level=confidence, rng=seed).confidence_interval
        if not (math.isnan(interval.low) or math.isnan(interval.high)):
            break
    return float(interval.low), float(interval.high)


def hedges_g(scores_a: np.ndarray, scores_b: np.ndarray) -> float:
    """Bias-corrected standardized mean difference of `a` over `b` (shapes (n_a,), (n_b,), n_a + n_b >= 3).

    Identical constant samples give 0; constant samples with different values give +-inf.
    """
    a = _scores("scores_a", scores_a)
    b = _scores("scores_b", scores_b)
    dof = a.size + b.size - 2
    if dof < 1:
        raise ValueError("hedges_g needs at least 3 scores in all")
    pooled_var = ((a.size - 1) * _var(a) + (b.size - 1) * _var(b)) / dof
    diff = float(a.mean() - b.mean())
    if pooled_var == 0.0:
        return 0.0 if diff == 0.0 else math.copysign(math.inf, diff)
    return diff / math.sqrt(pooled_var) * (1.0 - 3.0 / (4.0 * dof - 1.0))
def correlation(x: np.ndarray, y: np.ndarray, reps: int = 2000, seed: int = 0) -> Correlation:
    """Pearson r with Fisher's z 95% CI and Spearman rho with a paired percentile bootstrap 95% CI.

    `x` and `y` have shape (n,), n >= 2, one pair per trial. Below 4 trials the intervals are NaN and the
    verdict is "too few trials". Bootstrap resamples in which x or y is constant have no rank correlation;
    when any occur, the interval is taken over the remaining resamples.
    """
    x = _scores("x", x)
    y = _scores("y", y)
    if x.size != y.size:
        raise ValueError(f"correlation needs x and y of the same length, got {x.size} and {y.size}")
    if x.size < 2:
        raise ValueError(f"correlation needs at least 2 trials, got {x.size}")
    _check_reps(reps)
    n = int(x.size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant input: scipy warns and returns NaN, which the verdict reports
        pearson = scipy.stats.pearsonr(x, y)
        spearman = scipy.stats.spearmanr(x, y)
        r, rho = float(pearson.statistic), float(spearman.statistic)
        pearson_low = pearson_high = spearman_low = spearman_high = math.nan
        if n >= 4 and not math.isnan(r):
            pearson_low, pearson_high = (float(v) for v in pearson.confidence_interval(0.95))
        if n >= 4 and not math.isnan(rho):
            spearman_low, spearman_high = _spearman_bootstrap_interval(x, y, reps, seed)
    return Correlation(
        n=n,
        pearson_r=r,
        pearson_low=pearson_low,
        pearson_high=pearson_high,
        pearson_p=float(pearson.pvalue),
        spearman_rho=rho,
        spearman_low=spearman_low,
        spearman_high=spearman_high,
        spearman_p=float(spearman.pvalue),
        verdict=_correlation_verdict(n, r, pearson_low, pearson_high),
    )


class RatioEstimate(NamedTuple):
    """mean(numerator) / mean(denominator) over one variant's paired trials, with a BCa bootstrap interval.

    `note` is "" when the ratio and its interval are defined, else why not (a refused ratio is NaN).
    """

    n: int
    ratio: float
    low: float
    high: float
    note: str


RATIO_REFUSED = ("refused: {which} has values <= 0 (smallest {smallest:.3g}); a ratio needs a ratio scale (a true "
                 "zero, positive values): compare differences instead")
RATIO_TOO_FEW = "one trial: no interval (a spread needs 2 or more trials)"


def ratio_of_means(numerator: np.ndarray, denominator: np.ndarray, reps: int = 2000, confidence: float = 0.95,
                   seed: int = 0) -> RatioEstimate:
    """mean(numerator) / mean(denominator) with a paired BCa bootstrap CI (scipy) that resamples trials.

    `numerator` and `denominator` have shape (n,), one pair per trial in the same order. A ratio means "the
    fraction kept" only on a ratio scale: when any numerator or denominator value is <= 0 (a return with step
    costs, a difference) the ratio is refused (NaN) and `note` names the measure and its smallest value.
    """
    num = _scores("numerator", numerator)
    den = _scores("denominator", denominator)
    if num.size != den.size:
        raise ValueError(f"ratio_of_means needs paired trials, got {num.size} numerators and {den.size} denominators")
    _check_confidence(confidence)
    _check_reps(reps)
    n = int(num.size)
    for which, values in (("the numerator", num), ("the denominator", den)):
        if values.min() <= 0.0:
            return RatioEstimate(n, math.nan, math.nan, math.nan, RATIO_REFUSED.format(which=which, smallest=values.min()))
    ratio = float(num.mean() / den.mean())
    if n < 2:
        return RatioEstimate(n, ratio, math.nan, math.nan, RATIO_TOO_FEW)
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore")  # constant pairs: BCa is undefined, the ratio is exact
        result = scipy.stats.bootstrap((num, den), _ratio, paired=True, vectorized=True, method="BCa", n_resamples=reps,
                                       confidence_level=confidence, rng=seed)
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    if math.isnan(low) or math.isnan(high):
        low = high = ratio
    return RatioEstimate(n, ratio, low, high, "")


def performance_profile(scores: Mapping[str, np.ndarray], taus: np.ndarray, reps: int = 2000, confidence: float = 0.95,
                        seed: int = 0) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Fraction of seeds scoring above each threshold, with a percentile bootstrap interval over seeds (scipy).

    `scores[name]` has shape (num_seeds,) and `taus` shape (T,); each value is (profile, low, high), each (T,).
    A single seed's band is its profile (no interval). Percentile, not BCa: a fraction of 0 or 1 leaves BCa undefined.
    """
    arrays = _score_mapping(scores)
    thresholds = _scores("taus", taus)
    _check_reps(reps)

    def fraction_above(values: np.ndarray, axis: int = -1) -> np.ndarray:
        """(..., n) -> (T, ...): scipy wants a vector statistic's outputs first."""
        above = np.mean(np.moveaxis(values, axis, -1)[..., None, :] > thresholds[:, None], axis=-1)
        return np.moveaxis(above, -1, 0)

    profiles = {}
    for name, values in arrays.items():
        profile = fraction_above(values)
        if values.size == 1:
            profiles[name] = (profile, profile, profile)
            continue
        result = scipy.stats.bootstrap((values,), fraction_above, vectorized=True, method="percentile",
                                       n_resamples=reps, confidence_level=confidence, rng=seed)
        profiles[name] = (profile, np.asarray(result.confidence_interval.low, float),
                          np.asarray(result.confidence_interval.high, float))
    return profiles


def _ratio(numerator: np.ndarray, denominator: np.ndarray, axis: int = -1) -> np.ndarray:
    """(..., n), (..., n) -> (...): mean(numerator) / mean(denominator) along `axis`."""
    return np.mean(numerator, axis=axis) / np.mean(denominator, axis=axis)


def _spearman_bootstrap_interval(x: np.ndarray, y: np.ndarray, reps: int, seed: int) -> tuple[float, float]:
    """Percentile bootstrap 95% CI of Spearman's rho over resampled (x, y) pairs (scipy), NaN resamples left out."""

    def rho(x_resample: np.ndarray, y_resample: np.ndarray) -> float:
        return scipy.stats.spearmanr(x_resample, y_resample).statistic

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # resamples with a constant x or y: NaN, left out below
        result = scipy.stats.bootstrap((x, y), rho, paired=True, vectorized=False, method="percentile", n_resamples=reps,
                                       confidence_level=0.95, rng=seed)
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    if math.isnan(low) or math.isnan(high):
        low, high = (float(v) for v in np.nanquantile(result.bootstrap_distribution, [0.025, 0.975]))
    return low, high
def _correlation_verdict(n: int, r: float, low: float, high: float) -> str:
    """One sentence on Pearson's r: its CI and whether that excludes 0."""
    if n < 4:
        return f"too few trials: n={n}, at least 4 are needed for a confidence interval"
    if math.isnan(r):
        return f"correlation undefined: x or y is constant over the {n} trials"
    interval = f"r={r:.2f}, 95% CI [{low:.2f}, {high:.2f}] over n={n} trials"
    if low > 0.0:
        return f"{interval}: the interval excludes 0 (positive correlation)"
    if high < 0.0:
        return f"{interval}: the interval excludes 0 (negative correlation)"
    return f"{interval}: the interval includes 0 (no clear linear correlation)"


def _var(values: np.ndarray) -> float:
    """Sample variance (ddof 1) of shape (n,); 0 for n == 1."""
    return float(values.var(ddof=1)) if values.size > 1 else 0.0


def _scores(name: str, values: np.ndarray) -> np.ndarray:
    """`values` as a non-empty finite 1-D float array, or a one-line ValueError naming `name`."""
    try:
        array = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected numbers, got {type(values).__name__}") from None
    if array.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D array (one value per trial), got shape {array.shape}")
    if array.size == 0:
        raise ValueError(f"{name}: no values")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name}: contains NaN or infinite values; drop or fix those trials first")
    return array


def _score_mapping(scores: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Each variant's scores validated by `_scores`; at least one variant."""
    if not scores:
        raise ValueError("no variants: scores is empty")
    return {name: _scores(name, values) for name, values in scores.items()}


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")


def _check_reps(reps: int) -> None:
    if reps < 1:
        raise ValueError(f"reps must be at least 1, got {reps}")
