"""Interval coverage by simulation (known distributions, n = 5 and 10, nominal 95%) and the intervals against
textbook formulas computed here by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats

from rlfit.errors import UserError
from rlfit.study.intervals import (BCA_MIN_SEEDS, bca_interval, check_method, difference_interval, iqm_t_interval,
                                   mean_t_interval, method_for)
from rlfit.study.stats import compare, interval_estimates

REPLICATIONS = 20_000
"""Coverage's standard error at 95% is 0.0015 with this many samples: the 93-97% window is +-13 of them."""
DISTRIBUTIONS = {  # (draw, the population's mean and 25% trimmed mean: both 0 for these symmetric laws)
    "normal": lambda rng, shape: rng.normal(size=shape),
    "logistic": lambda rng, shape: rng.logistic(size=shape),
}


def coverage(low: np.ndarray, high: np.ndarray, truth: float) -> float:
    return float(np.mean((low <= truth) & (truth <= high)))


@pytest.mark.parametrize("n", [5, 10])
@pytest.mark.parametrize("distribution", list(DISTRIBUTIONS))
def test_the_mean_and_iqm_intervals_cover_95_percent(distribution, n):
    samples = DISTRIBUTIONS[distribution](np.random.default_rng(n), (REPLICATIONS, n))
    assert method_for(n) == "t"  # what the report uses at this n
    assert 0.93 <= coverage(*mean_t_interval(samples), 0.0) <= 0.97
    assert 0.93 <= coverage(*iqm_t_interval(samples), 0.0) <= 0.97


@pytest.mark.parametrize("n", [5, 10])
def test_the_difference_intervals_cover_95_percent_with_unequal_spreads(n):
    rng = np.random.default_rng(100 + n)
    a, b = rng.normal(1.0, 1.0, size=(REPLICATIONS, n)), rng.normal(0.0, 3.0, size=(REPLICATIONS, n))
    for trim in (0.0, 0.25):  # Welch (means), Yuen-Welch (IQMs); difference_interval calls these per pair
        interval = scipy.stats.ttest_ind(a, b, axis=-1, equal_var=False, trim=trim).confidence_interval()
        assert 0.93 <= coverage(interval.low, interval.high, 1.0) <= 0.97


def test_the_report_path_gives_these_intervals_and_covers_95_percent_at_n_10():
    """interval_estimates over many variants at once (as a report calls it): the old percentile bootstrap covered 89%."""
    samples = np.random.default_rng(7).normal(size=(1000, 10))
    estimates = interval_estimates({str(i): row for i, row in enumerate(samples)})
    low, high = (np.array([getattr(estimates[str(i)], f) for i in range(len(samples))]) for f in ("mean_low", "mean_high"))
    assert 0.93 <= coverage(low, high, 0.0) <= 0.97
    np.testing.assert_allclose((low, high), mean_t_interval(samples))
    iqm_low = np.array([estimates[str(i)].iqm_low for i in range(len(samples))])
    np.testing.assert_allclose(iqm_low, iqm_t_interval(samples)[0])


def test_bca_covers_about_95_percent_from_the_seeds_where_the_rule_uses_it():
    samples = np.random.default_rng(3).normal(size=(600, BCA_MIN_SEEDS))
    assert method_for(BCA_MIN_SEEDS) == "bca" and method_for(BCA_MIN_SEEDS - 1) == "t"
    assert 0.92 <= coverage(*bca_interval(samples, "mean", reps=1000), 0.0) <= 0.97


def test_the_mean_interval_is_the_textbook_t_interval():
    x = np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0])
    half = scipy.stats.t.ppf(0.975, 5) * x.std(ddof=1) / math.sqrt(6)
    assert mean_t_interval(x) == pytest.approx((x.mean() - half, x.mean() + half))


def test_the_iqm_interval_is_yuens_by_hand():
    x = np.array([10.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])  # n 8: 2 cut from each end, h 4
    winsorized = np.array([3.0, 3.0, 3.0, 4.0, 5.0, 6.0, 6.0, 6.0])
    centre = (3.0 + 4.0 + 5.0 + 6.0) / 4
    half = scipy.stats.t.ppf(0.975, 3) * math.sqrt(7 * winsorized.var(ddof=1) / (4 * 3))
    assert iqm_t_interval(x) == pytest.approx((centre - half, centre + half))


def test_the_difference_of_means_interval_is_welchs():
    a, b = np.array([5.0, 7.0, 6.0, 9.0]), np.array([1.0, 2.0, 2.5, 0.5, 3.0])
    va, vb = a.var(ddof=1) / 4, b.var(ddof=1) / 5
    dof = (va + vb) ** 2 / (va ** 2 / 3 + vb ** 2 / 4)
    half = scipy.stats.t.ppf(0.975, dof) * math.sqrt(va + vb)
    diff = a.mean() - b.mean()
    assert difference_interval(a, b, "mean") == pytest.approx((diff - half, diff + half))
    result = compare("a", a, "b", b, reps=200)
    assert (result.mean_diff_low, result.mean_diff_high) == pytest.approx((diff - half, diff + half))
    assert result.welch_df == pytest.approx(dof)


def test_a_constant_sample_gives_a_zero_width_interval_not_nan():
    assert mean_t_interval(np.full(5, 2.0)) == (2.0, 2.0)
    assert difference_interval(np.full(4, 3.0), np.full(4, 1.0), "mean") == (2.0, 2.0)
    assert bca_interval(np.full(40, 2.0), "iqm") == (2.0, 2.0)


def test_an_unknown_method_is_one_line_naming_the_choices():
    with pytest.raises(UserError, match=r"^unknown interval method 'bac' \(did you mean bca\?\); choose from auto, t, bca$"):
        check_method("bac")
