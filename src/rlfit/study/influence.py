"""Does a fit across variants rest on one of them? Leverage, Cook's distance and leave-one-variant-out refits of an
OLS fit on the variants' means (one row per variant, `rlfit.study.generalization`).

- leverage h_g: the diagonal of the hat matrix X (X'X)^-1 X'; a variant far from the others in its predictors
  has high leverage (flagged above 2p/G, p coefficients, G variants);
- Cook's distance D_g: how far all fitted values move when variant g is left out, in units of p s^2 (flagged
  above 4/G);
- the fit again without each variant: the coefficient's estimate, interval and p. A variant *changes the verdict*
  when leaving it out puts the interval on another side of 0, either way: the fit *rests on* it when the full
  interval excludes 0 and the one without it covers 0 (`rests_on`); leaving it out *moves the interval off 0*
  when the full interval covers 0 and the one without it excludes 0 (`moves_off_zero`, a null result that rests
  on one variant); an interval that excludes 0 on one side and, without it, on the other is in `flips_sign`. The
  report says so in words. The range of the estimate over the refits without each flagged variant is reported
  beside it.

    check = influence_check(design, y, names, column=2)   # design (G, p) with the intercept, y (G,)
    check["rests_on"], check["moves_off_zero"], check["flagged"], check["without"]["beta=0.1"]["estimate"]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

COOK_LIMIT = 4.0
"""Cook's distance counts as large above COOK_LIMIT / G (G variants)."""
LEVERAGE_LIMIT = 2.0
"""Leverage counts as high above LEVERAGE_LIMIT * p / G (p coefficients)."""


def influence_check(design: np.ndarray, y: np.ndarray, names: Sequence[str], column: int,
                    confidence: float = 0.95) -> dict[str, Any]:
    """Leverage and Cook's distance of each row of an OLS fit of y (G,) on design (G, p) (statsmodels), the
    coefficient `column` refitted without each row (when G - 1 > p), the rows flagged as influential, the range of
    the estimate without them, and the rows whose removal changes the verdict (`verdict_changes`)."""
    import statsmodels.api as sm
    from statsmodels.stats.outliers_influence import OLSInfluence

    count, parameters = design.shape
    fit = sm.OLS(y, design).fit()
    influence = OLSInfluence(fit)
    leverage, cooks = influence.hat_matrix_diag, influence.cooks_distance[0]
    flagged = [str(name) for name, h, d in zip(names, leverage, cooks)
               if d > COOK_LIMIT / count or h > LEVERAGE_LIMIT * parameters / count]
    full = _coefficient(fit, column, confidence)
    entry: dict[str, Any] = {"leverage": dict(zip(map(str, names), leverage.tolist())),
                             "cooks_distance": dict(zip(map(str, names), cooks.tolist())),
                             "cook_limit": COOK_LIMIT / count, "leverage_limit": LEVERAGE_LIMIT * parameters / count,
                             "flagged": flagged, "full": full, "without": {}, "rests_on": [],
                             "moves_off_zero": [], "flips_sign": []}
    if count - 1 <= parameters:
        entry["note"] = f"{count} variants: leaving one out leaves no residual degrees of freedom, so no refits"
        return entry
    for index, name in enumerate(map(str, names)):
        keep = np.arange(count) != index
        entry["without"][name] = _coefficient(sm.OLS(y[keep], design[keep]).fit(), column, confidence)
    entry.update(verdict_changes(full, entry["without"]))
    if flagged:
        estimates = [entry["without"][name]["estimate"] for name in flagged]
        entry["range_without_flagged"] = [min(estimates), max(estimates)]
    return entry


def side(interval: dict[str, float]) -> str:
    """'above 0', 'below 0' or 'covers 0': where an interval {'low', 'high'} lies."""
    return "above 0" if interval["low"] > 0 else "below 0" if interval["high"] < 0 else "covers 0"


def verdict_changes(full: dict[str, float], without: dict[str, dict[str, float]]) -> dict[str, list[str]]:
    """The left-out rows that put the interval on another side of 0 than the full fit's: `rests_on` (excluded 0,
    covers it without the row), `moves_off_zero` (covered 0, excludes it without the row) and `flips_sign`
    (excluded 0 on one side, on the other without the row)."""
    before = side(full)
    changes: dict[str, list[str]] = {"rests_on": [], "moves_off_zero": [], "flips_sign": []}
    for name, refit in without.items():
        after = side(refit)
        if after == before:
            continue
        key = "rests_on" if after == "covers 0" else "moves_off_zero" if before == "covers 0" else "flips_sign"
        changes[key].append(name)
    return changes


def _coefficient(fit: Any, column: int, confidence: float) -> dict[str, float]:
    low, high = fit.conf_int(alpha=1.0 - confidence)[column]
    return {"estimate": float(fit.params[column]), "low": float(low), "high": float(high),
            "p_value": float(fit.pvalues[column]), "degrees_of_freedom": int(fit.df_resid)}
