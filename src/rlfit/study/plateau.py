"""Has training plateaued? Per variant, how much the evaluation return still rose at the end of training.

Per seed, over its evaluations after the first (the starting policy's is left out) split into quarters:

    late rise = mean eval return over the last quarter - mean over the quarter before it

and per variant the mean late rise over seeds with a 95% t interval (`rlfit.study.intervals.mean_t_interval`).
An interval above 0 says the curve was still rising; one that covers 0 finds no rise at this number of seeds,
and its upper end bounds the rise the data allows. A few seeds per variant give each interval little power, so
`pooled_late_rise` pools every trial of every variant. Trials of different variants with the same seed are not
independent: their evaluations draw the same episodes (the evaluation key depends only on the seed and the
iteration), so a seed's luck moves every variant alike. Where trials share seeds, the pooled test takes **seeds as
blocks**: per seed the mean rise over the variants that finished it, then the mean of those seed means with a 95% t
interval and a one-sample t test over seeds (S - 1 degrees of freedom). In a balanced design this is the exact test
of the grand mean in the model rise = mu + seed effect (random) + error, the same standard error as a
random-intercept model by seed (statsmodels' MixedLM, REML) whenever its seed variance is above 0; unlike the
MixedLM it does not drop to the trials' own spread when that variance is estimated at 0, and its t has the seeds'
degrees of freedom. That is the headline; the same over the trials and over the variants' means (both treating
their units as independent, too narrow where seeds are shared) are shown beside it. A seed that only one trial
has is a block of its own; with no shared seed the trials are the units. Shapes: a variant's rewards are
(num_seeds, T) over the evaluation steps every seed reached (`rlfit.study.curves.variant_curves`), its seeds
(num_seeds,) in the same order (`rlfit.study.curves.variant_curve_seeds`).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

MIN_EVALUATIONS = 8
"""Evaluations after the first a curve needs for two quarters of at least two points each."""


def late_rise(rewards: np.ndarray) -> np.ndarray:
    """(num_seeds, T) evaluation returns -> (num_seeds,) mean of the last quarter minus the quarter before it,
    over the evaluations after the first; needs T - 1 >= MIN_EVALUATIONS."""
    later = rewards[:, 1:]
    quarter = later.shape[1] // 4
    if quarter < 2:
        raise ValueError(f"a late rise needs {MIN_EVALUATIONS} evaluations after the first, got {later.shape[1]}")
    last = later[:, -quarter:].mean(axis=1)
    before = later[:, -2 * quarter:-quarter].mean(axis=1)
    return last - before


def plateau_entries(curves: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, dict[str, Any]]:
    """variant -> its late rise: mean over seeds with a 95% t interval, the env steps each quarter spans, and a
    verdict; a variant with too few evaluations or one seed says why instead."""
    from rlfit.study.intervals import mean_t_interval

    entries: dict[str, dict[str, Any]] = {}
    for variant, (steps, rewards) in curves.items():
        if rewards.shape[1] - 1 < MIN_EVALUATIONS:
            entries[variant] = {"note": f"{rewards.shape[1]} evaluations: a late rise needs {MIN_EVALUATIONS + 1}"}
            continue
        rise = late_rise(rewards)
        quarter = (rewards.shape[1] - 1) // 4
        entry: dict[str, Any] = {"seeds": int(rise.size), "rise": rise.tolist(), "mean": float(rise.mean()),
                                 "last_quarter_steps": [float(steps[-quarter]), float(steps[-1])],
                                 "quarter_before_steps": [float(steps[-2 * quarter]), float(steps[-quarter - 1])],
                                 "last_quarter_return": float(rewards[:, -quarter:].mean())}
        if rise.size < 2:
            entry.update(low=None, high=None, verdict="one seed: no interval")
        else:
            low, high = (float(v) for v in mean_t_interval(rise))
            entry.update(low=low, high=high, verdict="still rising" if low > 0 else
                         "falling" if high < 0 else "no rise detected")
        entries[variant] = entry
    return entries


def pooled_late_rise(curves: dict[str, tuple[np.ndarray, np.ndarray]],
                     seeds: dict[str, Sequence[int]] | None = None) -> dict[str, Any]:
    """The late rise pooled over the variants with enough evaluations: with `seeds` (variant -> the seed of each
    row of its rewards) and a seed that two or more trials share, over seeds as blocks (`over_seeds`, the
    headline); always over every trial and over the variants' means. Each: mean, 95% t interval, one-sample t and
    two-sided p against 0, verdict; plus the variants whose mean rise is above 0 and `headline`, the units the
    verdict rests on. {'note': why} with fewer than 2 trials."""
    rises = {variant: late_rise(rewards) for variant, (_, rewards) in curves.items()
             if rewards.shape[1] - 1 >= MIN_EVALUATIONS}
    trials = np.concatenate(list(rises.values())) if rises else np.zeros(0)
    if trials.size < 2:
        return {"note": f"{trials.size} trials with {MIN_EVALUATIONS + 1} or more evaluations: nothing to pool"}
    entry: dict[str, Any] = {"trials": int(trials.size), "variants": len(rises),
                             "rising_variants": sum(1 for r in rises.values() if r.mean() > 0),
                             "headline": "over_trials"}
    units = {"over_trials": trials, "over_variant_means": np.array([r.mean() for r in rises.values()])}
    blocks = seed_block_means(rises, seeds) if seeds is not None else None
    if blocks is not None:
        units = {"over_seeds": blocks[1], **units}
        entry.update(headline="over_seeds", seeds=blocks[0], shared_seeds=blocks[2])
    for name, values in units.items():
        if values.size >= 2:
            entry[name] = one_sample(values)
        elif name == "over_seeds":
            entry[name] = {"n": 1, "mean": float(values[0]), "low": None, "high": None, "t": None, "p_value": None,
                           "verdict": "one seed shared by every trial: no interval over seeds"}
    return entry


def seed_block_means(rises: dict[str, np.ndarray], seeds: dict[str, Sequence[int]]) -> tuple[list[int], np.ndarray, int] | None:
    """(the seeds in ascending order, the mean rise of each over the variants that finished it (S,), how many
    seeds two or more trials share), or None when no seed is shared (the trials are then independent units)."""
    pairs = [(int(seed), float(rise)) for variant, values in rises.items()
             for seed, rise in zip(seeds[variant], values, strict=True)]
    blocks: dict[int, list[float]] = {}
    for seed, rise in pairs:
        blocks.setdefault(seed, []).append(rise)
    shared = sum(1 for values in blocks.values() if len(values) >= 2)
    if not shared:
        return None
    order = sorted(blocks)
    return order, np.array([np.mean(blocks[seed]) for seed in order]), shared


def one_sample(values: np.ndarray) -> dict[str, Any]:
    """(n,) values, n >= 2 -> n, mean, 95% t interval, one-sample t and two-sided p against 0, and a verdict."""
    import scipy.stats

    from rlfit.study.intervals import mean_t_interval

    low, high = (float(v) for v in mean_t_interval(values))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # equal rises: t is infinite or undefined
        test = scipy.stats.ttest_1samp(values, 0.0)
    return {"n": int(values.size), "mean": float(values.mean()), "low": low, "high": high,
            "t": float(test.statistic), "p_value": float(test.pvalue),
            "verdict": "still rising" if low > 0 else "falling" if high < 0 else "no rise detected"}
