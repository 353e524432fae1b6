"""Has training plateaued? Per variant, how much the evaluation return still rose at the end of training.

Per seed, over its evaluations after the first (the starting policy's is left out) split into quarters:

    late rise = mean eval return over the last quarter - mean over the quarter before it

and per variant the mean late rise over seeds with a 95% t interval (`rlfit.study.intervals.mean_t_interval`).
An interval above 0 says the curve was still rising; one that covers 0 finds no rise at this number of seeds,
and its upper end bounds the rise the data allows. A few seeds per variant give each interval little power, so
`pooled_late_rise` pools every trial of every variant: the mean late rise with its t interval and one-sample t
test (trials as the units), the same over the variants' means (variants as the units, the cautious form: a
variant's seeds share its settings), and how many variants rose on average. Shapes: a variant's rewards are
(num_seeds, T) over the evaluation steps every seed reached (`rlfit.study.report.variant_curves`).
"""

from __future__ import annotations

import warnings
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


def pooled_late_rise(curves: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, Any]:
    """The late rise pooled over every trial (and over the variants' means) of the variants with enough
    evaluations: mean, 95% t interval, one-sample t and two-sided p against 0, and the variants whose mean rise is
    above 0; {'note': why} with fewer than 2 trials."""
    import scipy.stats

    from rlfit.study.intervals import mean_t_interval

    rises = {variant: late_rise(rewards) for variant, (_, rewards) in curves.items()
             if rewards.shape[1] - 1 >= MIN_EVALUATIONS}
    trials = np.concatenate(list(rises.values())) if rises else np.zeros(0)
    if trials.size < 2:
        return {"note": f"{trials.size} trials with {MIN_EVALUATIONS + 1} or more evaluations: nothing to pool"}
    entry: dict[str, Any] = {"trials": int(trials.size), "variants": len(rises),
                             "rising_variants": sum(1 for r in rises.values() if r.mean() > 0)}
    for units, values in (("over_trials", trials), ("over_variant_means", np.array([r.mean() for r in rises.values()]))):
        if values.size < 2:
            continue
        low, high = (float(v) for v in mean_t_interval(values))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # equal rises: t is infinite or undefined
            test = scipy.stats.ttest_1samp(values, 0.0)
        entry[units] = {"n": int(values.size), "mean": float(values.mean()), "low": low, "high": high,
                        "t": float(test.statistic), "p_value": float(test.pvalue),
                        "verdict": "still rising" if low > 0 else "falling" if high < 0 else "no rise detected"}
    return entry
