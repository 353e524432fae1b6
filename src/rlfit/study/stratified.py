"""Aggregate statistics over several environments as rliable defines them (Agarwal et al. 2021, "Deep
Reinforcement Learning at the Edge of the Statistical Precipice"): the interquartile mean of all runs pooled across
environments, the probability of improvement, and stratified bootstrap intervals of both.

A side's scores are one 1-D array per environment (a stratum), shape (n_e,), n_e >= 1, the sizes free to differ.
A stratified bootstrap resample draws n_e runs with replacement from each environment's own runs, never across
environments, so every resample keeps each environment's share of the runs. Intervals are percentile intervals
over the resamples, as rliable's `get_interval_estimates` gives by default (`rlfit.study.intervals` has the
t and BCa intervals the study reports use on few seeds; these are for a comparison whose protocol names rliable's).

numpy and scipy only: rliable itself is archived. The same inputs, resamples and seed give the same numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from rlfit.study.intervals import iqm
from rlfit.study.stats import probability_of_improvement

Strata = Sequence[np.ndarray]
"""One side's scores: an array (n_e,) per environment, in a fixed order of environments."""
StratifiedStatistic = Callable[[Sequence[np.ndarray]], np.ndarray]
"""Takes one array (..., n_e) per environment and returns the statistic over the last axes, shape (...)."""


class Interval(NamedTuple):
    """A statistic on the data as given, and its percentile bootstrap interval."""

    point: float
    low: float
    high: float
    resamples: int


def pooled_iqm(strata: Sequence[np.ndarray]) -> np.ndarray:
    """rliable's aggregate IQM: the 25% trimmed mean of every run of every environment pooled; each stratum
    (..., n_e) -> (...). rliable assumes as many runs per environment; with unequal counts an environment with
    more runs weighs more, which is why a protocol declares the same seeds everywhere."""
    return iqm(np.concatenate([np.asarray(s, dtype=float) for s in strata], axis=-1))


def mean_probability_of_improvement(strata_x: Sequence[np.ndarray], strata_y: Sequence[np.ndarray]) -> np.ndarray:
    """rliable's P(X > Y): per environment the Mann-Whitney U of X over Y divided by n_x n_y (ties count one half),
    averaged over environments with equal weight; strata (..., n_x_e) and (..., n_y_e) -> (...)."""
    per_env = [probability_of_improvement(np.asarray(x, dtype=float), np.asarray(y, dtype=float))
               for x, y in zip(strata_x, strata_y, strict=True)]
    return np.mean(np.stack(per_env, axis=0), axis=0)


def stratified_resamples(strata: Strata, reps: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Each stratum (n_e,) resampled `reps` times with replacement from its own values: arrays (reps, n_e)."""
    if reps < 1:
        raise ValueError(f"reps must be at least 1, got {reps}")
    out = []
    for stratum in strata:
        values = _stratum(stratum)
        out.append(values[rng.integers(0, values.size, size=(reps, values.size))])
    return out


def percentile_interval(samples: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """The (1 - confidence) / 2 and (1 + confidence) / 2 quantiles of bootstrap statistics (reps,)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    tail = 100.0 * (1.0 - confidence) / 2.0
    low, high = np.percentile(samples, [tail, 100.0 - tail])
    return float(low), float(high)


def stratified_interval(strata: Strata, statistic: StratifiedStatistic, reps: int = 10_000, seed: int = 0,
                        confidence: float = 0.95) -> Interval:
    """`statistic` of one side's strata with its stratified percentile bootstrap interval."""
    rng = np.random.default_rng(seed)
    samples = statistic(stratified_resamples(strata, reps, rng))
    return Interval(float(statistic([_stratum(s) for s in strata])), *percentile_interval(samples, confidence), reps)


def stratified_two_sided_interval(strata_x: Strata, strata_y: Strata,
                                  statistic: Callable[[Sequence[np.ndarray], Sequence[np.ndarray]], np.ndarray],
                                  reps: int = 10_000, seed: int = 0, confidence: float = 0.95) -> Interval:
    """`statistic(x, y)` with its interval, X and Y each resampled within each environment, independently of each
    other (rliable's StratifiedIndependentBootstrap): one generator from `seed` draws X's resamples, then Y's."""
    if len(strata_x) != len(strata_y):
        raise ValueError(f"the two sides need the same environments: {len(strata_x)} strata against {len(strata_y)}")
    rng = np.random.default_rng(seed)
    x, y = stratified_resamples(strata_x, reps, rng), stratified_resamples(strata_y, reps, rng)
    point = statistic([_stratum(s) for s in strata_x], [_stratum(s) for s in strata_y])
    return Interval(float(point), *percentile_interval(statistic(x, y), confidence), reps)


def iqm_interval(strata: Strata, reps: int = 10_000, seed: int = 0, confidence: float = 0.95) -> Interval:
    """The pooled IQM of one side with its stratified bootstrap interval."""
    return stratified_interval(strata, pooled_iqm, reps, seed, confidence)


def iqm_difference_interval(strata_x: Strata, strata_y: Strata, reps: int = 10_000, seed: int = 0,
                            confidence: float = 0.95) -> Interval:
    """IQM(X) - IQM(Y), pooled IQMs, with its interval (both sides resampled within environments)."""
    return stratified_two_sided_interval(strata_x, strata_y, lambda x, y: pooled_iqm(x) - pooled_iqm(y), reps, seed,
                                         confidence)


def improvement_interval(strata_x: Strata, strata_y: Strata, reps: int = 10_000, seed: int = 0,
                         confidence: float = 0.95) -> Interval:
    """P(X > Y) averaged over environments, with its interval (both sides resampled within environments)."""
    return stratified_two_sided_interval(strata_x, strata_y, mean_probability_of_improvement, reps, seed, confidence)


def mean_difference_interval(x: np.ndarray, y: np.ndarray, reps: int = 10_000, seed: int = 0,
                             confidence: float = 0.95) -> Interval:
    """mean(x) - mean(y) for one environment's seeds (n_x,) and (n_y,), each side resampled on its own (one
    stratum per side), with its percentile interval."""
    return stratified_two_sided_interval([x], [y], lambda a, b: a[0].mean(axis=-1) - b[0].mean(axis=-1), reps, seed,
                                         confidence)


def _stratum(values: np.ndarray) -> np.ndarray:
    """One environment's runs as a non-empty finite 1-D float array, or a one-line ValueError."""
    array = np.asarray(values, dtype=float)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"each environment needs a 1-D array of at least one run, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError("an environment's scores contain NaN or infinite values; drop or fix those runs first")
    return array
