"""rliable's aggregate statistics (rlfit.study.stratified) against hand computations: a plain-Python IQM, the
Mann-Whitney U by counting pairs and by scipy, and the stratified bootstrap's resampling within environments."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats

from rlfit.study import stratified


def plain_iqm(values: list[float]) -> float:
    """Sort, cut floor(n / 4) from each end, average the rest."""
    ordered = sorted(values)
    cut = len(ordered) // 4
    kept = ordered[cut:len(ordered) - cut]
    return sum(kept) / len(kept)


def pairs_improvement(x: list[float], y: list[float]) -> float:
    """P(X > Y) by counting every pair, ties one half."""
    wins = sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in x for b in y)
    return wins / (len(x) * len(y))


STRATA_X = [np.array([1.0, 2.0, 3.0]), np.array([10.0, 4.0]), np.array([7.0, 8.0, 5.0, 0.5, 6.0])]
STRATA_Y = [np.array([2.0, 2.0, 0.0, 1.0]), np.array([4.0, 11.0, 3.0]), np.array([6.0, 5.5])]


def test_the_pooled_iqm_is_the_trimmed_mean_of_every_run_of_every_environment():
    pooled = [float(v) for s in STRATA_X for v in s]
    assert stratified.pooled_iqm(STRATA_X) == pytest.approx(plain_iqm(pooled))
    assert plain_iqm([1, 2, 3, 4, 5, 7, 8, 10]) == 4.75  # the hand rule itself: 2 cut from each end of 8
    assert stratified.pooled_iqm([np.array([1.0, 2.0, 3.0]), np.array([10.0, 4.0, 7.0, 8.0, 5.0])]) == 4.75


def test_probability_of_improvement_is_the_mean_over_environments_of_u_over_nm():
    by_pairs = np.mean([pairs_improvement(list(x), list(y)) for x, y in zip(STRATA_X, STRATA_Y, strict=True)])
    by_scipy = np.mean([scipy.stats.mannwhitneyu(x, y).statistic / (x.size * y.size)
                        for x, y in zip(STRATA_X, STRATA_Y, strict=True)])
    assert by_pairs == pytest.approx(by_scipy)
    assert stratified.mean_probability_of_improvement(STRATA_X, STRATA_Y) == pytest.approx(by_pairs)
    # ties count one half: identical sides give exactly 0.5 in every environment
    assert stratified.mean_probability_of_improvement(STRATA_X, STRATA_X) == 0.5


def test_resamples_draw_each_environment_from_its_own_runs_only():
    strata = [np.array([0.0, 1.0, 2.0]), np.array([100.0, 101.0]), np.array([-5.0])]
    resamples = stratified.stratified_resamples(strata, 500, np.random.default_rng(3))
    assert [r.shape for r in resamples] == [(500, 3), (500, 2), (500, 1)]
    for stratum, drawn in zip(strata, resamples, strict=True):
        assert set(np.unique(drawn)) <= set(stratum)
    assert set(np.unique(resamples[0])) == {0.0, 1.0, 2.0}  # with replacement: every value appears somewhere
    assert any(len(set(row)) < 3 for row in resamples[0])  # and some rows repeat a value


def test_a_stratified_iqm_interval_does_not_move_where_every_environment_is_constant():
    """Two environments of 4 runs, one all 0 and one all 1: every stratified resample holds four 0s and four 1s
    (IQM 0.5), where a bootstrap over the pooled runs would mix the environments' shares and spread."""
    strata = [np.zeros(4), np.ones(4)]
    interval = stratified.iqm_interval(strata, reps=2000, seed=0)
    assert (interval.point, interval.low, interval.high) == (0.5, 0.5, 0.5)
    pooled = np.concatenate(strata)
    unstratified = [stratified.pooled_iqm([pooled[np.random.default_rng(i).integers(0, 8, 8)]]) for i in range(200)]
    assert np.ptp(unstratified) > 0.2  # the contrast: resampling across environments would not give a point


def test_probability_of_improvement_interval_is_one_where_x_beats_y_in_every_run():
    x = [np.array([5.0, 6.0, 7.0]), np.array([900.0, 950.0])]
    y = [np.array([1.0, 2.0]), np.array([10.0, 20.0, 30.0])]
    interval = stratified.improvement_interval(x, y, reps=1000)
    assert (interval.point, interval.low, interval.high) == (1.0, 1.0, 1.0)


def test_the_bootstrap_interval_of_a_mean_difference_has_the_plug_in_standard_error():
    """One environment, y constant: the bootstrap distribution of mean(x*) has sd sqrt(sum (x - mean)^2 / n) /
    sqrt(n) (the plug-in standard error), so the 95% percentile interval is close to mean +- 1.96 of it."""
    x = np.random.default_rng(7).normal(10.0, 2.0, size=60)
    se = np.sqrt(np.mean((x - x.mean()) ** 2) / x.size)
    interval = stratified.mean_difference_interval(x, np.array([4.0, 4.0]), reps=20_000, seed=1)
    assert interval.point == pytest.approx(x.mean() - 4.0)
    assert interval.low == pytest.approx(x.mean() - 4.0 - 1.96 * se, abs=0.1 * se)
    assert interval.high == pytest.approx(x.mean() - 4.0 + 1.96 * se, abs=0.1 * se)


def test_the_iqm_difference_is_the_difference_of_pooled_iqms_and_the_same_seed_repeats():
    first = stratified.iqm_difference_interval(STRATA_X, STRATA_Y, reps=3000, seed=0)
    assert first.point == pytest.approx(plain_iqm([float(v) for s in STRATA_X for v in s])
                                        - plain_iqm([float(v) for s in STRATA_Y for v in s]))
    assert first.low < first.point < first.high
    assert stratified.iqm_difference_interval(STRATA_X, STRATA_Y, reps=3000, seed=0) == first
    assert stratified.iqm_difference_interval(STRATA_X, STRATA_Y, reps=3000, seed=1) != first


@pytest.mark.parametrize(("strata", "message"), [
    ([np.array([])], "at least one run"),
    ([np.array([1.0, np.nan])], "NaN"),
])
def test_bad_strata_are_one_line_errors(strata, message):
    with pytest.raises(ValueError, match=message):
        stratified.iqm_interval(strata, reps=10)


def test_the_two_sides_must_have_the_same_environments():
    with pytest.raises(ValueError, match="same environments"):
        stratified.improvement_interval(STRATA_X, STRATA_Y[:2], reps=10)
