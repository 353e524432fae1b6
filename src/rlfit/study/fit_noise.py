"""Is a fit on variant means tighter than the noise it must contain?

A variant's mean over its seeds carries the seeds' noise: variance sigma^2 / n_v, where sigma^2 is the spread of
trials about their variant's and seed's effects (a two-way model, variant + seed, when seeds are shared across
variants: a seed's shared episodes move every variant alike and cancel in the fit's intercept; variant alone when
no seed is shared). The residual variance s^2 of a fit on G variant means estimates that noise plus whatever the
model misses, so it cannot truly be below sigma^2 * mean(1 / n_v). The check:

    F = s^2 / (sigma^2 * mean(1 / n_v)),  F(G - p, df_sigma) under a fit that misses nothing

F < 1 says the residuals are smaller than the seeds' noise allows: the fit's interval is too narrow by about
sqrt(F), and the report's headline becomes the trial-level fit with seeds as blocks, whose residual variance is the
trials' own (`rlfit.study.generalization.BLOCKED`); the lower-tail p says how unusual so small an F is. F well above
1 (upper-tail p) says the variants differ beyond the model, which the means fit's interval already contains.

    check = noise_check(fit.scale, fit.df_resid, y, labels, seeds)   # y, labels, seeds: (n,) per trial
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.stats


def noise_check(residual_variance: float, residual_df: int, y: np.ndarray, labels: Sequence[str],
                seeds: Sequence[int]) -> dict[str, Any]:
    """The F check of the module docstring; {'note': why} when the trials leave no within-variant spread."""
    import statsmodels.api as sm

    labels, seeds = np.asarray([str(v) for v in labels]), np.asarray(seeds)
    variants = np.unique(labels)
    columns = [(labels == v).astype(float) for v in variants]
    shared = [s for s in np.unique(seeds) if len(set(labels[seeds == s].tolist())) >= 2]
    blocked = len(shared) >= 2
    if blocked:
        columns += [(seeds == s).astype(float) for s in shared[1:]]
    fit = sm.OLS(y, np.column_stack(columns)).fit()
    if fit.df_resid < 1 or fit.scale <= 0:
        return {"note": "no spread between seeds within a variant to compare the fit with"}
    counts = np.array([np.sum(labels == v) for v in variants])
    expected = float(fit.scale * np.mean(1.0 / counts))
    f = residual_variance / expected
    return {"residual_sd": float(np.sqrt(residual_variance)), "expected_sd": float(np.sqrt(expected)), "f": float(f),
            "df": [int(residual_df), int(fit.df_resid)], "seeds_as_blocks": blocked,
            "p_lower": float(scipy.stats.f.cdf(f, residual_df, fit.df_resid)),
            "p_upper": float(scipy.stats.f.sf(f, residual_df, fit.df_resid)), "too_tight": bool(f < 1.0)}
