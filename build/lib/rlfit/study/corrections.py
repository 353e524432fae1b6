"""Adjusting a report's family of p-values for multiple comparisons: Holm's step-down (the family-wise error
rate, the default) or Benjamini-Hochberg's step-up (the false discovery rate, scipy.stats.false_discovery_control).

    holm([0.01, 0.04, 0.03]) -> [0.03, 0.06, 0.06]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.stats

from rlfit.errors import UserError, did_you_mean

CORRECTIONS = ("holm", "bh")
"""holm: Holm (1979), controls the chance of any false positive in the family; bh: Benjamini-Hochberg (1995),
controls the expected fraction of false positives among the differences called."""
CORRECTION_NAMES = {"holm": "Holm's step-down correction (family-wise error rate)",
                    "bh": "the Benjamini-Hochberg correction (false discovery rate)"}


def check_correction(name: str) -> str:
    """`name` if it is one of CORRECTIONS, else a one-line UserError naming the choices."""
    if name not in CORRECTIONS:
        raise UserError(f"unknown correction '{name}'{did_you_mean(str(name), list(CORRECTIONS))}; "
                        f"choose from {', '.join(CORRECTIONS)}")
    return name


def adjust(p_values: Sequence[float], correction: str = "holm") -> list[float]:
    """The family's adjusted p-values, in the given order (m p-values in, m out; none in, none out)."""
    check_correction(correction)
    p = np.asarray(p_values, dtype=float)
    if p.size == 0:
        return []
    if np.any(np.isnan(p)) or np.any((p < 0) | (p > 1)):
        raise ValueError(f"p-values must lie in [0, 1], got {p.tolist()}")
    if correction == "bh":
        return [float(v) for v in scipy.stats.false_discovery_control(p, method="bh")]
    return holm(p)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's adjusted p-values: sorted ascending, p_(i) times (m - i + 1) for i = 1..m, made non-decreasing by
    a running maximum and capped at 1, returned in the given order."""
    p = np.asarray(p_values, dtype=float)
    order = np.argsort(p, kind="stable")
    m = p.size
    stepped = np.maximum.accumulate(p[order] * (m - np.arange(m)))
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(stepped, 1.0)
    return [float(v) for v in adjusted]
