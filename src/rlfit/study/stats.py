"""Statistics over trials: interval estimates, two-variant comparisons, correlations, ratios of means and
performance profiles.

Every function takes per-seed scores as plain 1-D numpy arrays and returns NamedTuples of Python numbers.
The bootstraps are rliable's stratified bootstrap (Agarwal et al., 2021) and scipy's; none is written here.

rliable draws its bootstrap indices from numpy's global random generator (its `random_state` argument does
not reach the draws), so each call here seeds that generator with `seed` for the duration of the call and
restores the caller's state afterwards: the same inputs and seed give the same intervals.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import NamedTuple

import numpy as np
import scipy.stats
from rliable import library as rly
from rliable import metrics

POWER_TARGET = 0.8
"""The power a comparison must reach before a difference is called significant (the usual 80%)."""

MAX_SEEDS_NEEDED = 10_000
"""`seeds_for_power` stops searching here and returns this cap for effects too small to detect."""


class Estimate(NamedTuple):
    """IQM and mean of one variant's per-seed scores, each with a stratified bootstrap confidence interval."""

    iqm: float
    iqm_low: float
    iqm_high: float
    mean: float
    mean_low: float
    mean_high: float
    n: int


class Comparison(NamedTuple):
    """Variant `a` against variant `b`: effect size, tests, probability of improvement, power and a verdict."""

    a: str
    b: str
    n_a: int
    n_b: int
    mean_diff: float
    effect_size: float
    welch_t: float
    welch_p: float
    mannwhitney_u: float
    mannwhitney_p: float
    prob_improvement: float
    prob_improvement_low: float
    prob_improvement_high: float
    power: float
    seeds_needed: int | None
    verdict: str


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


def interval_estimates(
    scores: Mapping[str, np.ndarray], reps: int = 2000, confidence: float = 0.95, seed: int = 0
) -> dict[str, Estimate]:
    """IQM and mean per variant with stratified bootstrap CIs (rliable, percentile method).

    `scores[name]` has shape (num_seeds,); it becomes rliable's (num_runs, num_tasks) = (num_seeds, 1).
    With a single seed no bootstrap is possible: low = high = the value itself.
    """
    arrays = _score_mapping(scores)
    _check_confidence(confidence)
    _check_reps(reps)
    estimates = {}
    for name, values in arrays.items():
        if values.size == 1:
            value = float(values[0])
            estimates[name] = Estimate(value, value, value, value, value, value, 1)
            continue
        with seeded_global_rng(seed):
            points, intervals = rly.get_interval_estimates(
                {name: values[:, None]}, func=_iqm_and_mean, reps=reps, confidence_interval_size=confidence
            )
        (iqm, mean), ((iqm_low, mean_low), (iqm_high, mean_high)) = points[name], intervals[name]
        estimates[name] = Estimate(
            float(iqm), float(iqm_low), float(iqm_high), float(mean), float(mean_low), float(mean_high), int(values.size)
        )
    return estimates


def compare(
    name_a: str,
    scores_a: np.ndarray,
    name_b: str,
    scores_b: np.ndarray,
    alpha: float = 0.05,
    reps: int = 2000,
    seed: int = 0,
) -> Comparison:
    """Compares per-seed scores of shape (n_a,) and (n_b,), each n >= 2, as `a` minus `b`.

    The effect size is Hedges' g (Cohen's d with the pooled SD, times 1 - 3 / (4 (n_a + n_b) - 9)); power and
    `seeds_needed` are those of a two-sided two-sample t test at `alpha` for |g|. The verdict never calls a
    difference significant on fewer seeds than that test needs (or fewer than 3); it says so instead.
    """
    a = _scores(name_a, scores_a)
    b = _scores(name_b, scores_b)
    if min(a.size, b.size) < 2:
        raise ValueError(f"compare needs at least 2 seeds per variant, got {a.size} for {name_a!r} and {b.size} for {name_b!r}")
    _check_alpha(alpha)
    _check_reps(reps)
    g = hedges_g(a, b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # constant samples: t and p come out inf or nan
        welch = scipy.stats.ttest_ind(a, b, equal_var=False)
    mannwhitney = scipy.stats.mannwhitneyu(a, b, alternative="two-sided")
    with seeded_global_rng(seed):
        points, intervals = rly.get_interval_estimates(
            {"pair": [a[:, None], b[:, None]]}, func=_probability_of_improvement, reps=reps
        )
    power = t_test_power(g, a.size, b.size, alpha)
    needed = seeds_for_power(g, alpha=alpha)
    return Comparison(
        a=name_a,
        b=name_b,
        n_a=int(a.size),
        n_b=int(b.size),
        mean_diff=float(a.mean() - b.mean()),
        effect_size=g,
        welch_t=float(welch.statistic),
        welch_p=float(welch.pvalue),
        mannwhitney_u=float(mannwhitney.statistic),
        mannwhitney_p=float(mannwhitney.pvalue),
        prob_improvement=float(points["pair"][0]),
        prob_improvement_low=float(intervals["pair"][0, 0]),
        prob_improvement_high=float(intervals["pair"][1, 0]),
        power=power,
        seeds_needed=needed,
        verdict=_comparison_verdict(a.size, b.size, g, float(welch.pvalue), needed, alpha),
    )


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


def t_test_power(effect_size: float, n_a: int, n_b: int, alpha: float = 0.05) -> float:
    """Power of a two-sided two-sample t test (pooled SD) at `alpha` for a true standardized effect `effect_size`.

    Under the alternative, t follows a noncentral t with n_a + n_b - 2 degrees of freedom and noncentrality
    |effect_size| * sqrt(n_a n_b / (n_a + n_b)); power is its mass beyond the two critical values.
    An infinite effect (constant samples that differ) has power 1.
    """
    _check_alpha(alpha)
    if min(n_a, n_b) < 1 or n_a + n_b < 3:
        raise ValueError(f"t_test_power needs n_a, n_b >= 1 and n_a + n_b >= 3, got {n_a} and {n_b}")
    if math.isnan(effect_size):
        raise ValueError("t_test_power: effect_size is NaN")
    if math.isinf(effect_size):
        return 1.0
    dof = n_a + n_b - 2
    noncentrality = abs(effect_size) * math.sqrt(n_a * n_b / (n_a + n_b))
    critical = scipy.stats.t.ppf(1.0 - alpha / 2.0, dof)
    # P(T < -c) under noncentrality delta is P(T > c) under -delta; scipy's cdf returns NaN far in that tail.
    power = scipy.stats.nct.sf(critical, dof, noncentrality) + scipy.stats.nct.sf(critical, dof, -noncentrality)
    return float(power)


def seeds_for_power(
    effect_size: float, power: float = POWER_TARGET, alpha: float = 0.05, cap: int = MAX_SEEDS_NEEDED
) -> int | None:
    """Smallest n per group (n >= 2) at which `t_test_power(effect_size, n, n, alpha)` reaches `power`.

    None for a zero effect (no n suffices); `cap` when even `cap` seeds per group fall short.
    """
    if effect_size == 0.0:
        return None
    if t_test_power(effect_size, cap, cap, alpha) < power:
        return cap
    low, high = 2, cap  # power grows with n: bisect for the first n that reaches the target
    while low < high:
        middle = (low + high) // 2
        if t_test_power(effect_size, middle, middle, alpha) >= power:
            high = middle
        else:
            low = middle + 1
    return low


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
    """mean(numerator) / mean(denominator) over one variant's paired trials, with a percentile bootstrap interval.

    `note` is "" when the interval is defined, else why it is NaN (or why the ratio itself is NaN).
    """

    n: int
    ratio: float
    low: float
    high: float
    note: str


RATIO_NOT_DEFINED = "not defined: the denominator's mean is not positive"
RATIO_NO_INTERVAL = "the denominator's mean is not positive in every resample: no interval"
RATIO_TOO_FEW = "too few trials"


def ratio_of_means(
    numerator: np.ndarray, denominator: np.ndarray, reps: int = 2000, confidence: float = 0.95, seed: int = 0
) -> RatioEstimate:
    """mean(numerator) / mean(denominator) with a paired percentile bootstrap CI (scipy) that resamples trials.

    `numerator` and `denominator` have shape (n,), one pair per trial in the same order. The ratio reads as "the
    fraction kept" only over a positive denominator: a point denominator mean <= 0 gives a NaN ratio, and any
    resample whose denominator mean is <= 0 gives a NaN interval; n < 2 gives a NaN interval. `note` says which.
    """
    num = _scores("numerator", numerator)
    den = _scores("denominator", denominator)
    if num.size != den.size:
        raise ValueError(f"ratio_of_means needs paired trials, got {num.size} numerators and {den.size} denominators")
    _check_confidence(confidence)
    _check_reps(reps)
    n = int(num.size)
    if den.mean() <= 0.0:
        return RatioEstimate(n, math.nan, math.nan, math.nan, RATIO_NOT_DEFINED)
    ratio = float(num.mean() / den.mean())
    if n < 2:
        return RatioEstimate(n, ratio, math.nan, math.nan, RATIO_TOO_FEW)
    result = scipy.stats.bootstrap((num, den), _ratio_and_denominator, paired=True, vectorized=True,
                                   method="percentile", n_resamples=reps, confidence_level=confidence, rng=seed)
    if np.any(result.bootstrap_distribution[1] <= 0.0):
        return RatioEstimate(n, ratio, math.nan, math.nan, RATIO_NO_INTERVAL)
    return RatioEstimate(n, ratio, float(result.confidence_interval.low[0]), float(result.confidence_interval.high[0]), "")


def performance_profile(
    scores: Mapping[str, np.ndarray], taus: np.ndarray, reps: int = 2000, seed: int = 0
) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Fraction of seeds scoring above each threshold, with its 95% stratified bootstrap CI (rliable).

    `scores[name]` has shape (num_seeds,) and `taus` shape (T,); each value is (profile, low, high), each (T,).
    """
    arrays = _score_mapping(scores)
    thresholds = _scores("taus", taus)
    _check_reps(reps)
    with seeded_global_rng(seed):
        profiles, intervals = rly.create_performance_profile(
            {name: values[:, None] for name, values in arrays.items()}, thresholds, reps=reps
        )
    return {
        name: (np.asarray(profiles[name], float), np.asarray(intervals[name][0], float), np.asarray(intervals[name][1], float))
        for name in arrays
    }


@contextmanager
def seeded_global_rng(seed: int) -> Iterator[None]:
    """Seeds numpy's global generator, which rliable's bootstraps draw from, and restores the caller's state on exit."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


def _iqm_and_mean(scores: np.ndarray) -> np.ndarray:
    """(num_runs, num_tasks) -> (2,): rliable's IQM and mean."""
    return np.array([metrics.aggregate_iqm(scores), metrics.aggregate_mean(scores)])


def _probability_of_improvement(scores_x: np.ndarray, scores_y: np.ndarray) -> np.ndarray:
    """(n_x, 1), (n_y, 1) -> (1,): rliable's P(X > Y), ties counted half."""
    return np.array([metrics.probability_of_improvement(scores_x, scores_y)])


def _ratio_and_denominator(numerator: np.ndarray, denominator: np.ndarray, axis: int = -1) -> np.ndarray:
    """(..., n), (..., n) -> (2, ...): mean(numerator) / mean(denominator) and mean(denominator) along `axis`."""
    den = np.mean(denominator, axis=axis)
    with np.errstate(divide="ignore", invalid="ignore"):  # resamples with a zero denominator are reported, not used
        ratio = np.mean(numerator, axis=axis) / den
    return np.stack([ratio, den])


def _spearman_bootstrap_interval(x: np.ndarray, y: np.ndarray, reps: int, seed: int) -> tuple[float, float]:
    """Percentile bootstrap 95% CI of Spearman's rho over resampled (x, y) pairs (scipy), NaN resamples left out."""

    def rho(x_resample: np.ndarray, y_resample: np.ndarray) -> float:
        return scipy.stats.spearmanr(x_resample, y_resample).statistic

    result = scipy.stats.bootstrap(
        (x, y), rho, paired=True, vectorized=False, method="percentile", n_resamples=reps, confidence_level=0.95, rng=seed
    )
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    if math.isnan(low) or math.isnan(high):
        low, high = (float(v) for v in np.nanquantile(result.bootstrap_distribution, [0.025, 0.975]))
    return low, high


def _comparison_verdict(n_a: int, n_b: int, g: float, welch_p: float, needed: int | None, alpha: float) -> str:
    """One sentence; "too few seeds" whenever a group has fewer than 3 seeds or fewer than `needed`."""
    n = min(n_a, n_b)
    seeds = f"n={n_a}" if n_a == n_b else f"n={n_a}/{n_b}"
    if n < 3 or (needed is not None and n < needed):
        if needed is None:
            return f"too few seeds: {seeds} per variant, and no number of seeds reaches 80% power at the observed effect size g=0"
        return f"too few seeds: {seeds} per variant, {needed} needed for 80% power at the observed effect size g={g:.2f}"
    if welch_p < alpha:
        return f"significant (Welch p={welch_p:.3g}, g={g:.2f})"
    return f"no significant difference (Welch p={welch_p:.3g}, g={g:.2f})"


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


def _check_alpha(alpha: float) -> None:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")


def _check_reps(reps: int) -> None:
    if reps < 1:
        raise ValueError(f"reps must be at least 1, got {reps}")
