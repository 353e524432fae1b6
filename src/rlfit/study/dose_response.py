"""A graded dose-response against a step: does the outcome follow a graded quantity (log2 bits), or does it jump
once, between two neighbouring variants, and stay flat on either side?

On the variants' means (G rows), with covariates Z (the intercept and in-distribution performance), the graded
quantity g and step_k = 1 for the variants above the k-th smallest g:

    graded  y ~ Z + g            step at k  y ~ Z + step_k            both at k  y ~ Z + g + step_k

The split k is chosen where the step fits best (least residual sum of squares), over splits with MIN_SIDE or more
variants on each side. Choosing it makes a naive F test too kind to the step, so both tests are permutation tests
that choose again in every permutation (Freedman and Lane: fitted values of the model under test plus its permuted
residuals; every permutation of G <= EXACT_UP_TO variants, else PERMUTATIONS random ones):

- the step beyond the graded trend: sup over k of F(both at k against graded), null: graded;
- the graded trend beyond the step: F(both at k* against the step at k*), null: the step, k* re-chosen each time.

The verdict says which the data favour at ALPHA, or that they cannot tell. With the step in the model, the graded
coefficient's OLS interval (at the chosen split, so slightly too narrow) says what is left of the trend.

    entry = step_against_graded(covariates, graded, y, names)   # (G, q), (G,), (G,), G names
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

MIN_SIDE = 2
"""Variants a step needs on each side of its split: one variant alone is an outlier (`rlfit.study.influence`)."""
MIN_VARIANTS = 6
"""The model with both the trend and the step keeps G - q - 2 >= 2 residual degrees of freedom (q = 2 covariates)."""
EXACT_UP_TO = 8
"""Up to this many variants every permutation is used (8! = 40,320); above, PERMUTATIONS random ones."""
PERMUTATIONS = 9999
ALPHA = 0.05


def step_against_graded(covariates: np.ndarray, graded: np.ndarray, y: np.ndarray, names: Sequence[str],
                        confidence: float = 0.95, seed: int = 0) -> dict[str, Any]:
    """Both permutation tests, the chosen split, the graded coefficient with the step in the model, and a verdict
    (module docstring); {'note': why} below MIN_VARIANTS variants or without a spread in `graded`."""
    import statsmodels.api as sm

    count = y.size
    if count < MIN_VARIANTS:
        return {"note": f"{count} variants: a step against a graded trend needs {MIN_VARIANTS} or more"}
    order = np.argsort(graded, kind="stable")
    steps = {k: _step(order, k) for k in range(MIN_SIDE, count - MIN_SIDE + 1)
             if graded[order[k - 1]] < graded[order[k]]}
    if not steps:
        return {"note": "the graded quantity takes too few distinct values for a step"}
    graded_design = np.column_stack([covariates, graded])
    permuted = _permutations(count, seed)
    step_sup_f, step_p = _step_beyond_graded(graded_design, steps, y, permuted)
    split, trend_f, trend_p = _graded_beyond_step(covariates, graded, steps, y, permuted)
    both = sm.OLS(y, np.column_stack([graded_design, steps[split]])).fit()
    low, high = both.conf_int(alpha=1.0 - confidence)[covariates.shape[1]]
    below, above = str(names[order[split - 1]]), str(names[order[split]])
    entry = {"split_after": below, "split_before": above, "low_side": [str(names[i]) for i in order[:split]],
             "high_side": [str(names[i]) for i in order[split:]],
             "rss_graded": _rss(graded_design, y), "rss_step": _rss(np.column_stack([covariates, steps[split]]), y),
             "step_beyond_graded": {"sup_f": step_sup_f, "p_value": step_p},
             "graded_beyond_step": {"f": trend_f, "p_value": trend_p},
             "graded_with_step": {"estimate": float(both.params[covariates.shape[1]]), "low": float(low),
                                  "high": float(high), "p_value": float(both.pvalues[covariates.shape[1]]),
                                  "degrees_of_freedom": int(both.df_resid)},
             "permutations": int(permuted.shape[0]), "exact": count <= EXACT_UP_TO}
    entry["verdict"] = verdict(step_p, trend_p, below, above)
    return entry


def verdict(step_p: float, trend_p: float, below: str, above: str) -> str:
    """Which model the two permutation p-values favour, in words."""
    jump = f"a step between `{below}` and `{above}`"
    if step_p < ALPHA <= trend_p:
        return f"the data favour {jump}: it explains what the graded trend does, and the trend adds nothing beyond it"
    if trend_p < ALPHA <= step_p:
        return f"the data favour a graded trend: it adds to {jump}, and no step adds to it"
    if step_p < ALPHA and trend_p < ALPHA:
        return f"both: {jump} and a graded trend beyond it"
    return f"cannot tell a graded trend from {jump}: neither adds significantly to the other"


def _step(order: np.ndarray, k: int) -> np.ndarray:
    """(G,) 0 for the k variants of smallest graded value, 1 above."""
    step = np.zeros(order.size)
    step[order[k:]] = 1.0
    return step


def _permutations(count: int, seed: int) -> np.ndarray:
    """(B, G) index permutations: all of them up to EXACT_UP_TO variants (the identity first), else the identity and
    PERMUTATIONS random ones."""
    if count <= EXACT_UP_TO:
        return np.array(list(itertools.permutations(range(count))))
    rng = np.random.default_rng(seed)
    return np.vstack([np.arange(count), np.array([rng.permutation(count) for _ in range(PERMUTATIONS)])])


def _residual_maker(design: np.ndarray) -> np.ndarray:
    """(G, G) I - X X^+: residuals of an OLS fit on `design` are this times y."""
    return np.eye(design.shape[0]) - design @ np.linalg.pinv(design)


def _rss(design: np.ndarray, y: np.ndarray) -> float:
    return float(np.sum((_residual_maker(design) @ y) ** 2))


def _rss_all(design: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """(B, G) outcomes -> (B,) residual sums of squares on `design`."""
    return np.sum((ys @ _residual_maker(design).T) ** 2, axis=1)


def _f(rss_small: np.ndarray, rss_large: np.ndarray, df_large: int) -> np.ndarray:
    """F for one added column: (RSS_small - RSS_large) / (RSS_large / df_large)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return (rss_small - rss_large) / (rss_large / df_large)


def _freedman_lane(design: np.ndarray, y: np.ndarray, permuted: np.ndarray) -> np.ndarray:
    """(B, G): fitted values of `design` plus its residuals permuted by each row of `permuted`."""
    residuals = _residual_maker(design) @ y
    return (y - residuals)[None, :] + residuals[permuted]


def _p(observed: float, null: np.ndarray) -> float:
    """Share of the permutations (the identity among them) whose statistic reaches the observed one."""
    return float(np.mean(null >= observed * (1 - 1e-9)))


def _step_beyond_graded(graded_design: np.ndarray, steps: dict[int, np.ndarray], y: np.ndarray,
                        permuted: np.ndarray) -> tuple[float, float]:
    """(sup over splits of F for adding the step to the graded model, its permutation p under the graded model)."""
    ys = _freedman_lane(graded_design, y, permuted)
    df = graded_design.shape[0] - graded_design.shape[1] - 1
    base = _rss_all(graded_design, ys)
    sup = np.max([_f(base, _rss_all(np.column_stack([graded_design, s]), ys), df) for s in steps.values()], axis=0)
    return float(sup[0]), _p(sup[0], sup)


def _graded_beyond_step(covariates: np.ndarray, graded: np.ndarray, steps: dict[int, np.ndarray], y: np.ndarray,
                        permuted: np.ndarray) -> tuple[int, float, float]:
    """(the chosen split, F for adding the graded trend to the step there, its permutation p under the step model
    with the split chosen again in each permutation)."""
    splits = list(steps)
    chosen = splits[int(np.argmin([_rss(np.column_stack([covariates, steps[k]]), y) for k in splits]))]
    ys = _freedman_lane(np.column_stack([covariates, steps[chosen]]), y, permuted)
    step_rss = np.stack([_rss_all(np.column_stack([covariates, steps[k]]), ys) for k in splits])
    both_rss = np.stack([_rss_all(np.column_stack([covariates, graded, steps[k]]), ys) for k in splits])
    best = np.argmin(step_rss, axis=0)
    columns = np.arange(ys.shape[0])
    df = ys.shape[1] - covariates.shape[1] - 2
    f = _f(step_rss[best, columns], both_rss[best, columns], df)
    return chosen, float(f[0]), _p(f[0], f)
