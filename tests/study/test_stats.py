"""Experiment statistics against hand computations, textbook formulas, G*Power figures and simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats

from rlfit.study.stats import (
    Estimate,
    compare,
    correlation,
    hedges_g,
    interval_estimates,
    performance_profile,
    ratio_of_means,
    seeds_for_power,
    t_test_power,
)


def standardized(n: int, seed: int) -> np.ndarray:
    """n normal draws rescaled to sample mean 0 and sample SD (ddof 1) exactly 1."""
    values = np.random.default_rng(seed).normal(size=n)
    return (values - values.mean()) / values.std(ddof=1)


# ---------------------------------------------------------------- interval estimates

def test_iqm_is_the_mean_of_the_middle_half_and_the_mean_ci_contains_the_mean():
    scores = np.array([9.0, -4.0, 1.0, 2.0, 100.0, 3.0, 4.0, 0.5])
    estimate = interval_estimates({"v": scores}, reps=500)["v"]
    middle_half = np.sort(scores)[2:6]
    assert estimate.iqm == pytest.approx(sum(middle_half) / 4)
    assert estimate.mean == pytest.approx(sum(scores) / 8)
    assert estimate.mean_low <= estimate.mean <= estimate.mean_high
    assert estimate.iqm_low <= estimate.iqm <= estimate.iqm_high
    assert estimate.n == 8
    assert all(type(value) is float for value in estimate[:6])


def test_a_single_seed_gives_its_value_with_a_zero_width_interval():
    assert interval_estimates({"v": np.array([2.5])})["v"] == Estimate(2.5, 2.5, 2.5, 2.5, 2.5, 2.5, 1)


def test_the_mean_ci_covers_the_true_mean_about_95_percent_of_the_time():
    rng = np.random.default_rng(123)
    covered = 0
    for trial in range(200):
        estimate = interval_estimates({"v": rng.normal(size=20)}, reps=300, seed=trial)["v"]
        covered += estimate.mean_low <= 0.0 <= estimate.mean_high
    assert 0.88 <= covered / 200 <= 0.99


def test_intervals_are_reproducible_per_seed_and_leave_the_global_rng_alone():
    scores = {"a": np.random.default_rng(0).normal(size=12), "b": np.random.default_rng(1).normal(size=7)}
    np.random.seed(42)
    first = interval_estimates(scores, reps=200, seed=3)
    after_first = np.random.random()
    np.random.seed(42)
    assert interval_estimates(scores, reps=200, seed=3) == first
    assert np.random.random() == after_first
    other = interval_estimates(scores, reps=200, seed=4)
    assert other["a"].mean == first["a"].mean and other["a"].mean_low != first["a"].mean_low


def test_a_wider_confidence_gives_a_wider_interval():
    scores = {"v": np.random.default_rng(5).normal(size=15)}
    narrow = interval_estimates(scores, reps=500, confidence=0.5)["v"]
    wide = interval_estimates(scores, reps=500, confidence=0.99)["v"]
    assert wide.mean_low < narrow.mean_low < narrow.mean_high < wide.mean_high


# ---------------------------------------------------------------- comparisons

def test_welch_t_and_p_match_the_textbook_formulas():
    rng = np.random.default_rng(7)
    a, b = rng.normal(1.0, 1.0, size=9), rng.normal(0.0, 3.0, size=14)
    result = compare("a", a, "b", b, reps=200)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    t = (a.mean() - b.mean()) / math.sqrt(va + vb)
    dof = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))  # Welch-Satterthwaite
    assert result.welch_t == pytest.approx(t)
    assert result.welch_p == pytest.approx(2 * scipy.stats.t.sf(abs(t), dof))
    assert result.mean_diff == pytest.approx(a.mean() - b.mean())
    assert (result.n_a, result.n_b) == (9, 14)


def test_hedges_g_matches_the_formula():
    rng = np.random.default_rng(8)
    a, b = rng.normal(2.0, 1.0, size=6), rng.normal(0.0, 2.0, size=11)
    pooled_sd = math.sqrt(((a.size - 1) * a.var(ddof=1) + (b.size - 1) * b.var(ddof=1)) / (a.size + b.size - 2))
    correction = 1 - 3 / (4 * (a.size + b.size) - 9)
    expected = (a.mean() - b.mean()) / pooled_sd * correction
    assert hedges_g(a, b) == pytest.approx(expected)
    assert compare("a", a, "b", b, reps=100).effect_size == pytest.approx(expected)
    assert hedges_g(b, a) == pytest.approx(-expected)


def test_power_matches_g_power_figures():
    assert t_test_power(0.5, 64, 64, alpha=0.05) == pytest.approx(0.80, abs=0.01)
    assert t_test_power(0.8, 26, 26, alpha=0.05) == pytest.approx(0.81, abs=0.01)
    assert seeds_for_power(0.5) == 64
    assert seeds_for_power(-0.5) == 64
    assert seeds_for_power(0.8) == 26
    assert seeds_for_power(0.0) is None
    assert seeds_for_power(1e-4) == 10_000  # capped
    assert t_test_power(0.0, 10, 10) == pytest.approx(0.05)  # no effect: rejects at the test's size


def test_power_matches_simulated_t_tests_with_unequal_groups():
    rng = np.random.default_rng(11)
    trials, n_a, n_b, d = 20_000, 10, 15, 0.9
    a = rng.normal(d, 1.0, size=(trials, n_a))
    b = rng.normal(0.0, 1.0, size=(trials, n_b))
    rejected = scipy.stats.ttest_ind(a, b, axis=1).pvalue < 0.05
    assert t_test_power(d, n_a, n_b) == pytest.approx(rejected.mean(), abs=0.015)


def test_probability_of_improvement_counts_pairs_with_ties_as_half():
    a, b = np.array([1.0, 2.0, 3.0, 4.0]), np.array([2.0, 2.0, 0.0])
    wins = sum(x > y for x in a for y in b)
    ties = sum(x == y for x in a for y in b)
    result = compare("a", a, "b", b, reps=300)
    assert result.prob_improvement == pytest.approx((wins + 0.5 * ties) / (a.size * b.size))
    assert 0.0 <= result.prob_improvement_low <= result.prob_improvement <= result.prob_improvement_high <= 1.0


def test_mann_whitney_u_counts_wins_and_half_ties():
    a, b = np.array([0.1, 2.0, 3.0, 5.0, 5.5]), np.array([2.0, 1.0, 0.0, 4.0])
    wins = sum(x > y for x in a for y in b) + 0.5 * sum(x == y for x in a for y in b)
    result = compare("a", a, "b", b, reps=100)
    assert result.mannwhitney_u == pytest.approx(wins)
    assert 0.0 < result.mannwhitney_p <= 1.0


def test_power_and_seeds_needed_follow_the_observed_effect_size():
    rng = np.random.default_rng(2)
    result = compare("a", rng.normal(0.6, 1.0, size=12), "b", rng.normal(0.0, 1.0, size=12), reps=100)
    assert result.power == pytest.approx(t_test_power(result.effect_size, 12, 12))
    assert result.seeds_needed == seeds_for_power(result.effect_size)


def test_three_seeds_with_a_modest_effect_are_too_few():
    result = compare("a", np.array([1.0, 1.5, 2.0]), "b", np.array([0.5, 1.0, 1.5]), reps=200)
    assert result.verdict.startswith("too few seeds: n=3 per variant")
    assert f"{result.seeds_needed} needed" in result.verdict
    assert result.seeds_needed > 3


def test_a_small_p_on_fewer_seeds_than_power_needs_is_not_called_significant():
    a, b = standardized(20, seed=0) + 0.75, standardized(20, seed=1)
    result = compare("a", a, "b", b, reps=200)
    assert result.welch_p < 0.05
    assert result.seeds_needed > 20
    assert result.verdict.startswith("too few seeds: n=20 per variant")


def test_thirty_seeds_of_clearly_separated_data_are_significant():
    rng = np.random.default_rng(3)
    result = compare("a", rng.normal(3.0, 1.0, size=30), "b", rng.normal(0.0, 1.0, size=30), reps=200)
    assert result.verdict.startswith("significant (Welch p=")
    assert result.welch_p < 1e-6
    assert result.prob_improvement > 0.9


def test_two_samples_of_one_distribution_are_not_called_different():
    rng = np.random.default_rng(4)
    result = compare("a", rng.normal(size=30), "b", rng.normal(size=30), reps=200)
    assert result.verdict.startswith(("no significant difference", "too few seeds"))
    assert not result.verdict.startswith("significant")


def test_unequal_group_sizes_are_named_in_the_verdict():
    result = compare("a", np.array([1.0, 2.0]), "b", np.array([0.0, 1.0, 0.5, 0.2]), reps=100)
    assert result.verdict.startswith("too few seeds: n=2/4 per variant")


# ---------------------------------------------------------------- correlations

def test_pearson_ci_matches_fishers_z():
    rng = np.random.default_rng(9)
    x = rng.normal(size=25)
    y = 0.5 * x + rng.normal(size=25)
    result = correlation(x, y, reps=300)
    r = float(np.corrcoef(x, y)[0, 1])
    half_width = 1.959964 / math.sqrt(25 - 3)
    assert result.pearson_r == pytest.approx(r)
    assert result.pearson_low == pytest.approx(math.tanh(math.atanh(r) - half_width), abs=1e-5)
    assert result.pearson_high == pytest.approx(math.tanh(math.atanh(r) + half_width), abs=1e-5)


def test_spearman_rho_and_its_bootstrap_interval():
    rng = np.random.default_rng(10)
    x = rng.normal(size=30)
    y = np.exp(x) + 0.3 * rng.normal(size=30)
    result = correlation(x, y, reps=400)
    assert result.spearman_rho == pytest.approx(scipy.stats.spearmanr(x, y).statistic)
    assert result.spearman_low <= result.spearman_rho <= result.spearman_high
    assert correlation(x, y, reps=400) == result


def test_spearman_interval_is_finite_when_some_resamples_are_constant():
    result = correlation(np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.0, 3.0, 2.0, 4.0]), reps=500)
    assert math.isfinite(result.spearman_low) and math.isfinite(result.spearman_high)


def test_correlation_verdicts():
    rng = np.random.default_rng(12)
    x = rng.normal(size=40)
    assert "excludes 0 (positive" in correlation(x, x + 0.3 * rng.normal(size=40), reps=200).verdict
    assert "excludes 0 (negative" in correlation(x, -x + 0.3 * rng.normal(size=40), reps=200).verdict
    assert "includes 0" in correlation(x, rng.normal(size=40), reps=200).verdict
    few = correlation(np.array([1.0, 2.0, 3.0]), np.array([2.0, 1.0, 3.0]))
    assert few.verdict.startswith("too few trials")
    assert math.isnan(few.pearson_low) and math.isnan(few.spearman_high)
    assert correlation(np.ones(6), x[:6], reps=100).verdict.startswith("correlation undefined")


# ---------------------------------------------------------------- performance profiles

def test_performance_profile_is_the_fraction_above_each_threshold():
    scores = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])
    taus = np.array([-1.0, 2.5, 5.0, 9.0])
    profile, low, high = performance_profile({"v": scores}, taus, reps=300)["v"]
    np.testing.assert_allclose(profile, [1.0, 0.7, 0.4, 0.0])
    assert profile.shape == low.shape == high.shape == (4,)
    assert np.all(low <= profile) and np.all(profile <= high)
    assert (low[0], high[0], low[-1], high[-1]) == (1.0, 1.0, 0.0, 0.0)


# ---------------------------------------------------------------- input checks

@pytest.mark.parametrize(
    "call",
    [
        lambda: interval_estimates({"v": np.array([1.0, np.nan])}),
        lambda: interval_estimates({"v": np.ones((3, 2))}),
        lambda: interval_estimates({"v": np.array([])}),
        lambda: interval_estimates({}),
        lambda: interval_estimates({"v": np.ones(3)}, confidence=1.5),
        lambda: compare("a", np.array([1.0, np.inf]), "b", np.ones(3)),
        lambda: compare("a", np.ones((2, 2)), "b", np.ones(3)),
        lambda: compare("a", np.array([1.0]), "b", np.ones(3)),
        lambda: compare("a", np.ones(3), "b", np.ones(3), alpha=0.0),
        lambda: correlation(np.ones(5), np.ones(4)),
        lambda: correlation(np.array([1.0, np.nan, 2.0]), np.ones(3)),
        lambda: correlation(np.ones((4, 1)), np.ones(4)),
        lambda: performance_profile({"v": np.ones(3)}, np.array([[0.0]])),
        lambda: performance_profile({"v": np.array([np.nan])}, np.array([0.0])),
        lambda: t_test_power(0.5, 1, 1),
    ],
)
def test_bad_input_raises_a_one_line_value_error(call):
    with pytest.raises(ValueError) as error:
        call()
    assert "\n" not in str(error.value)


# ---------------------------------------------------------------- ratios of means

def numpy_paired_bootstrap(num: np.ndarray, den: np.ndarray, reps: int, seed: int) -> tuple[float, float]:
    """Reference: the 2.5% and 97.5% percentiles of mean(num)/mean(den) over trials drawn with replacement."""
    index = np.random.default_rng(seed).integers(0, num.size, size=(reps, num.size))
    ratios = num[index].mean(axis=1) / den[index].mean(axis=1)
    return tuple(np.percentile(ratios, [2.5, 97.5]))


def test_the_ratio_is_the_ratio_of_the_means():
    num, den = np.array([1.0, 4.0, 2.5, 0.5]), np.array([2.0, 3.0, 6.0, 1.0])
    result = ratio_of_means(num, den, reps=200)
    assert result.ratio == pytest.approx(np.mean(num) / np.mean(den))
    assert result.n == 4 and result.note == ""
    assert result.low <= result.ratio <= result.high
    assert ratio_of_means(num, den, reps=200) == result  # the same seed gives the same interval


def test_the_ratio_interval_on_a_large_sample_is_narrow_and_contains_the_true_ratio():
    rng = np.random.default_rng(20)
    den = rng.uniform(50.0, 150.0, size=400)
    num = 0.5 * den + rng.normal(0.0, 5.0, size=400)
    result = ratio_of_means(num, den, reps=2000)
    assert result.low < 0.5 < result.high
    assert result.high - result.low < 0.02


def test_the_ratio_interval_agrees_with_a_numpy_paired_bootstrap():
    rng = np.random.default_rng(21)
    den = rng.uniform(1.0, 3.0, size=15)
    num = 0.7 * den + rng.normal(0.0, 0.3, size=15)  # paired: resampling num and den apart would be far wider
    result = ratio_of_means(num, den, reps=4000, seed=1)
    low, high = numpy_paired_bootstrap(num, den, reps=20_000, seed=2)
    assert result.low == pytest.approx(low, abs=0.02)
    assert result.high == pytest.approx(high, abs=0.02)


def test_a_denominator_mean_that_is_not_positive_gives_no_ratio():
    result = ratio_of_means(np.array([1.0, 2.0, 3.0]), np.array([1.0, -2.0, 0.5]))
    assert result.n == 3 and result.note == "not defined: the denominator's mean is not positive"
    assert math.isnan(result.ratio) and math.isnan(result.low) and math.isnan(result.high)


def test_a_resample_with_a_non_positive_denominator_mean_gives_no_interval():
    num, den = np.array([1.0, 2.0, 3.0, 1.0]), np.array([4.0, -1.0, 2.0, -1.0])  # mean 1, but [-1]*4 can be drawn
    result = ratio_of_means(num, den, reps=2000)
    assert result.ratio == pytest.approx(7.0 / 4.0)
    assert math.isnan(result.low) and math.isnan(result.high)
    assert result.note == "the denominator's mean is not positive in every resample: no interval"


def test_one_trial_gives_its_ratio_without_an_interval():
    result = ratio_of_means(np.array([3.0]), np.array([4.0]))
    assert (result.n, result.ratio, result.note) == (1, 0.75, "too few trials")
    assert math.isnan(result.low) and math.isnan(result.high)


@pytest.mark.parametrize("call", [
    lambda: ratio_of_means(np.ones(3), np.ones(4)),
    lambda: ratio_of_means(np.array([1.0, np.nan]), np.ones(2)),
    lambda: ratio_of_means(np.ones(3), np.ones(3), confidence=1.0),
])
def test_bad_ratio_input_raises_a_one_line_value_error(call):
    with pytest.raises(ValueError) as error:
        call()
    assert "\n" not in str(error.value)
