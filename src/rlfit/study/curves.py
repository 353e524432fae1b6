"""Each variant's evaluation curves over the trials that reached the same evaluation steps, and their seeds: what
the learning-curve figure and the plateau check (`rlfit.study.plateau`) read.

    curves = variant_curves(results, variants)          # variant -> (steps (T,), values (num_seeds, T))
    seeds = variant_curve_seeds(results, variants)      # variant -> [seed of each row of values]
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from rlfit.study.trials import TrialResult


def curve_runs(results: list[TrialResult], variant: str, clock: bool = False,
               column: str = "eval/episode_reward") -> list[TrialResult]:
    """The variant's trials that have a curve of `column` (the return by default; with `clock` also a training
    wall-clock at each evaluation), each with that column as its curve, in `results`' order."""
    runs = [r for r in results if r.trial.variant == variant and r.curve[0].size]
    if column != "eval/episode_reward":
        runs = [replace(r, curve=(r.curve[0], r.training[column])) for r in runs if column in r.training]
    if clock:
        runs = [r for r in runs if r.wall.size == r.curve[0].size]
    return runs


def variant_curves(results: list[TrialResult], variants: list[str], clock: bool = False,
                   column: str = "eval/episode_reward") -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """variant -> (x (T,), values (num_seeds, T)) of the eval `column` (the return by default) over the evaluation
    steps every seed reached; x is env steps, or with `clock` the mean over seeds of the training wall-clock seconds
    at each of them. Rows follow `curve_runs`' order (`variant_curve_seeds` gives their seeds)."""
    curves = {}
    for variant in variants:
        runs = curve_runs(results, variant, clock, column)
        if not runs:
            continue
        common = sorted(set.intersection(*(set(r.curve[0].tolist()) for r in runs)))
        if not common:
            continue
        index = [np.searchsorted(r.curve[0], common) for r in runs]
        rewards = np.stack([r.curve[1][i] for r, i in zip(runs, index)])
        x = np.mean([r.wall[i] for r, i in zip(runs, index)], axis=0) if clock else np.array(common)
        curves[variant] = (x, rewards)
    return curves


def variant_curve_seeds(results: list[TrialResult], variants: list[str],
                        column: str = "eval/episode_reward") -> dict[str, list[int]]:
    """variant -> the seed of each row of `variant_curves(results, variants, column=column)[variant][1]`."""
    return {variant: [r.trial.seed for r in curve_runs(results, variant, column=column)] for variant in variants}
