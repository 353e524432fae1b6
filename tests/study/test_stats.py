"""Experiment statistics against hand computations, textbook formulas, G*Power figures and simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats

from rlfit.study.stats import (
    compare,
    correlation,
    hedges_g,
    interval_estimates,
    performance_profile,
    comparison_verdict,
    ratio_of_means,
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


def test_a_single_seed_gives_its_value_and_no_interval_and_says_why():
    estimate = interval_estimates({"v": np.array([2.5])})["v"]
    assert (estimate.iqm, estimate.mean, estimate.n) == (2.5, 2.5, 1)
    assert all(math.isnan(v) for v in (estimate.iqm_low, estimate.iqm_high, estimate.mean_low, estimate.mean_high))
    assert estimate.note == "one seed: no interval (a spread needs 2 or more seeds)"


def test_bootstrap_intervals_are_reproducible_per_seed_and_leave_the_global_rng_alone():
    scores = {"a": np.random.default_rng(0).normal(size=12), "b": np.random.default_rng(1).normal(size=7)}
    np.random.seed(42)
    first = interval_estimates(scores, reps=200, seed=3, method="bca")
    after_first = np.random.random()
    np.random.seed(42)
    assert interval_estimates(scores, reps=200, seed=3, method="bca") == first
    assert np.random.random() == after_first
    other = interval_estimates(scores, reps=200, seed=4, method="bca")
    assert other["a"].mean == first["a"].mean and other["a"].mean_low != first["a"].mean_low
    assert first["a"].method == "bca" and interval_estimates(scores)["a"].method == "t"


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


def test_the_verdict_follows_the_adjusted_p_and_the_interval_never_power():
    # the mini study's final_eval_reward: Welch p 0.0126 on 8 seeds each, once labelled "too few seeds"
    a = np.array([593.5, 338.8, 523.4, 327.9, 263.7, 430.2, 494.9, 308.3])
    b = np.array([224.2, 225.3, 258.0, 263.3, 307.0, 353.2, 234.5, 304.1])
    result = compare("lr-1e-3", a, "lr-3e-4", b, reps=200)
    assert result.welch_p == pytest.approx(scipy.stats.ttest_ind(a, b, equal_var=False).pvalue)
    assert 0 < result.mean_diff_low < result.mean_diff < result.mean_diff_high
    assert comparison_verdict(result, result.welch_p) == "`lr-1e-3` scores higher than `lr-3e-4` (adjusted p = 0.013, n=8)"
    assert comparison_verdict(result, 0.06).startswith("not significant after correction at n=8 (adjusted p = 0.06)")
    same = compare("a", standardized(6, 0), "b", standardized(6, 1), reps=200)
    assert same.mean_diff_low < 0 < same.mean_diff_high
    assert comparison_verdict(same, 1.0).startswith("no difference detected at n=6 (adjusted p = 1)")
    assert comparison_verdict(compare("lr-3e-4", b, "lr-1e-3", a, reps=200), 0.01).startswith("`lr-1e-3` scores higher")


def test_the_probability_of_improvement_interval_is_reproducible_and_defined_at_separation():
    a, b = np.array([5.0, 6.0, 7.0, 8.0]), np.array([1.0, 2.0, 3.0])  # every a beats every b
    result = compare("a", a, "b", b, reps=300)
    assert (result.prob_improvement, result.prob_improvement_low, result.prob_improvement_high) == (1.0, 1.0, 1.0)
    rng = np.random.default_rng(5)
    x, y = rng.normal(0.5, 1.0, size=10), rng.normal(size=10)
    first = compare("x", x, "y", y, reps=500, seed=2)
    assert compare("x", x, "y", y, reps=500, seed=2) == first
    assert first.prob_improvement_low < first.prob_improvement < first.prob_improvement_high


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
        lambda: correlation(np.ones(5), np.ones(4)),
        lambda: correlation(np.array([1.0, np.nan, 2.0]), np.ones(3)),
        lambda: correlation(np.ones((4, 1)), np.ones(4)),
        lambda: performance_profile({"v": np.ones(3)}, np.array([[0.0]])),
        lambda: performance_profile({"v": np.array([np.nan])}, np.array([0.0])),
    ],
)
def test_bad_input_raises_a_one_line_value_error(call):
    with pytest.raises(ValueError) as error:
        call()
    assert "\n" not in str(error.value)


# ---------------------------------------------------------------- ratios of means

def numpy_paired_bootstrap(num: np.ndarray, den: np.ndarray, reps: int, seed: int) -> tuple[float, float]:
    """Reference: the 2.5% and 97.5% percentiles of mean(num)/mean(den) over trials drawn with replacement (on 15
    trials with little skew BCa's interval is close to this percentile one)."""
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


@pytest.mark.parametrize("numerator, denominator, which, smallest", [
    ([1.0, -2.0, 3.0], [1.0, 2.0, 0.5], "the numerator", "-2"),  # a return with step costs
    ([1.0, 2.0, 3.0], [1.0, 0.0, 0.5], "the denominator", "0"),
])
def test_a_ratio_off_a_ratio_scale_is_refused_in_one_line_naming_why(numerator, denominator, which, smallest):
    result = ratio_of_means(np.array(numerator), np.array(denominator))
    assert result.note == (f"refused: {which} has values <= 0 (smallest {smallest}); a ratio needs a ratio scale (a true "
                           "zero, positive values): compare differences instead")
    assert math.isnan(result.ratio) and math.isnan(result.low) and math.isnan(result.high)


def test_one_trial_gives_its_ratio_without_an_interval():
    result = ratio_of_means(np.array([3.0]), np.array([4.0]))
    assert (result.n, result.ratio, result.note) == (1, 0.75, "one trial: no interval (a spread needs 2 or more trials)")
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
