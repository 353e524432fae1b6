"""The a-priori seeds planner: Welch's power against simulated Welch tests, and the seeds it asks for."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats

from rlfit.study.power import seeds_needed, welch_power


@pytest.mark.parametrize("n, sd_a, sd_b, difference", [(6, 1.0, 3.0, 2.5), (10, 2.0, 2.0, 2.0), (20, 1.0, 0.5, 0.5)])
def test_welch_power_matches_simulated_welch_tests(n, sd_a, sd_b, difference):
    rng = np.random.default_rng(n)
    a = rng.normal(difference, sd_a, size=(40_000, n))
    b = rng.normal(0.0, sd_b, size=(40_000, n))
    rejected = scipy.stats.ttest_ind(a, b, axis=1, equal_var=False).pvalue < 0.05
    assert welch_power(difference, sd_a, sd_b, n) == pytest.approx(rejected.mean(), abs=0.012)


def test_seeds_needed_is_the_first_n_that_reaches_80_percent():
    n = seeds_needed(1.0, 1.0, 1.0)
    assert welch_power(1.0, 1.0, 1.0, n) >= 0.8 > welch_power(1.0, 1.0, 1.0, n - 1)
    assert n == 17  # d = 1 SD: 17 per group (a pooled t test needs 17 too; G*Power)
    assert seeds_needed(0.5, 1.0, 1.0) == 64  # d = 0.5 SD: G*Power's 64 per group
    assert seeds_needed(-0.5, 1.0, 1.0) == 64


def test_no_plan_for_a_zero_or_hopeless_difference():
    assert seeds_needed(0.0, 1.0, 1.0) is None
    assert seeds_needed(1e-4, 1.0, 1.0) is None


def test_bad_input_raises():
    with pytest.raises(ValueError, match="both 0"):
        welch_power(1.0, 0.0, 0.0, 5)
    with pytest.raises(ValueError, match="n >= 2"):
        welch_power(1.0, 1.0, 1.0, 1)
