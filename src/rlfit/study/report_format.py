"""How report.md writes numbers: intervals whose numbers share their decimals, p-values to two significant digits."""

from __future__ import annotations

import math

SIGNIFICANT = 3
"""Significant digits of the largest number in an interval; the others get the same decimals."""


def decimals(*values: float) -> int:
    """Decimals that give the largest |value| SIGNIFICANT significant digits (0 for 100 and above)."""
    largest = max((abs(v) for v in values if v is not None and math.isfinite(v)), default=0.0)
    if largest == 0.0:
        return SIGNIFICANT - 1
    return max(0, SIGNIFICANT - 1 - math.floor(math.log10(largest)))


def fmt_interval(point: float, low: float | None, high: float | None, sign: bool = False, note: str = "") -> str:
    """'398 [313, 509]', '0.504 [0.470, 0.550]', '+139 [38, 240]'; without an interval the point and `note`."""
    plus = "+" if sign else ""
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        places = decimals(point)
        return f"{point:{plus}.{places}f}" + (f" ({note})" if note else "")
    places = decimals(point, low, high)
    return f"{point:{plus}.{places}f} [{low:{plus}.{places}f}, {high:{plus}.{places}f}]"


def fmt_number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.{decimals(value)}f}"


def fmt_p(p: float | None) -> str:
    """Two significant digits: 0.013, 0.27, 1, 3.1e-05."""
    return "n/a" if p is None or (isinstance(p, float) and math.isnan(p)) else f"{p:.2g}"
