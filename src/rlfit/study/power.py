"""A-priori planning: how many seeds per variant a Welch test needs to detect a difference of a chosen size d,
given the per-seed spread a pilot study measured. It is not a verdict on the pilot's own result (power at the
observed effect only restates the p-value); it answers "how many seeds should the next study run?".

Power of Welch's two-sided test at n seeds per variant with per-seed standard deviations s_a and s_b:
t' ~ noncentral t with the Welch-Satterthwaite degrees of freedom df = (n - 1) (s_a^2 + s_b^2)^2 / (s_a^4 + s_b^4)
and noncentrality d / sqrt((s_a^2 + s_b^2) / n); power = P(|t'| > t(1 - alpha / 2, df)).
"""

from __future__ import annotations

import math

import scipy.stats

POWER_TARGET = 0.8
"""The power the planner asks for (the usual 80%)."""
MAX_SEEDS = 10_000
"""The planner stops searching here and returns None: d is too small next to the spread to be worth planning."""


def welch_power(difference: float, sd_a: float, sd_b: float, n: int, alpha: float = 0.05) -> float:
    """Power of a two-sided Welch test at `alpha` with n >= 2 seeds per variant, when the true difference of
    means is `difference` and the per-seed standard deviations are sd_a and sd_b (not both 0)."""
    if n < 2:
        raise ValueError(f"welch_power needs n >= 2 seeds per variant, got {n}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    var_a, var_b = sd_a ** 2, sd_b ** 2
    if var_a + var_b == 0.0:
        raise ValueError("welch_power needs a spread: sd_a and sd_b are both 0")
    dof = (n - 1) * (var_a + var_b) ** 2 / (var_a ** 2 + var_b ** 2)
    noncentrality = abs(difference) / math.sqrt((var_a + var_b) / n)
    critical = scipy.stats.t.ppf(1.0 - alpha / 2.0, dof)
    # the lower tail as the upper tail of -noncentrality (scipy's cdf loses precision far in that tail)
    return float(scipy.stats.nct.sf(critical, dof, noncentrality) + scipy.stats.nct.sf(critical, dof, -noncentrality))


def seeds_needed(difference: float, sd_a: float, sd_b: float, power: float = POWER_TARGET, alpha: float = 0.05,
                 cap: int = MAX_SEEDS) -> int | None:
    """Smallest n >= 2 per variant at which `welch_power` reaches `power`; None when even `cap` falls short
    (or `difference` is 0)."""
    if difference == 0.0 or welch_power(difference, sd_a, sd_b, cap, alpha) < power:
        return None
    low, high = 2, cap  # power grows with n: bisect for the first n that reaches the target
    while low < high:
        middle = (low + high) // 2
        if welch_power(difference, sd_a, sd_b, middle, alpha) >= power:
            high = middle
        else:
            low = middle + 1
    return low
