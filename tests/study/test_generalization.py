"""The generalization fits (ood ~ 1 + in-distribution + log2 description length, variant as the grouping factor)
against closed-form OLS and a sandwich estimator written out here, on synthetic data with known coefficients."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats

from rlfit.errors import UserError
from rlfit.study.generalization import CLUSTER_ROBUST, PREDICTORS, VARIANT_MEANS, fit_entry, fit_generalization


def synthetic(rng: np.random.Generator, groups: int, per_group: int, c: float):
    """Trials of `groups` variants: each variant its own description length (a decade apart) and a shared shock,
    ood = 0.1 + 0.8 * in_dist + c * log2(bits) + variant shock + noise."""
    labels = np.repeat([f"v{g}" for g in range(groups)], per_group)
    bits = np.repeat(np.logspace(0, 2, groups), per_group) * rng.uniform(0.8, 1.2, labels.size)
    in_dist = rng.uniform(0.2, 0.9, labels.size)
    shock = np.repeat(rng.normal(0, 0.05, groups), per_group)
    ood = 0.1 + 0.8 * in_dist + c * np.log2(bits) + shock + rng.normal(0, 0.03, labels.size)
    return ood, in_dist, bits, labels


def closed_form(ood, in_dist, bits, labels):
    """beta = (X'X)^-1 X'y and the CR1 sandwich (X'X)^-1 [sum_g X_g' u_g u_g' X_g] (X'X)^-1 * G/(G-1) * (n-1)/(n-k)."""
    x = np.column_stack([np.ones_like(ood), in_dist, np.log2(bits)])
    bread = np.linalg.inv(x.T @ x)
    beta = bread @ x.T @ ood
    residuals = ood - x @ beta
    meat = np.zeros((3, 3))
    names = sorted(set(labels))
    for name in names:
        score = x[labels == name].T @ residuals[labels == name]
        meat += np.outer(score, score)
    n, k, g = ood.size, 3, len(names)
    covariance = bread @ meat @ bread * g / (g - 1) * (n - 1) / (n - k)
    return beta, np.sqrt(np.diag(covariance)), g - 1


def variant_means_closed_form(ood, in_dist, bits, labels):
    """OLS on the variants' means: beta, classical standard errors sqrt(s^2 diag (X'X)^-1), G - 3 df."""
    names = sorted(set(labels))
    x = np.array([[1.0, in_dist[labels == n].mean(), np.log2(bits[labels == n]).mean()] for n in names])
    y = np.array([ood[labels == n].mean() for n in names])
    bread = np.linalg.inv(x.T @ x)
    beta = bread @ x.T @ y
    s2 = np.sum((y - x @ beta) ** 2) / (len(names) - 3)
    return beta, np.sqrt(s2 * np.diag(bread)), len(names) - 3


@pytest.mark.parametrize("method, reference", [(CLUSTER_ROBUST, closed_form),
                                               (VARIANT_MEANS, variant_means_closed_form)])
def test_each_fit_equals_its_closed_form_with_t_intervals(method, reference):
    data = synthetic(np.random.default_rng(0), groups=8, per_group=5, c=-0.02)
    fit = fit_generalization(*data, method=method)
    beta, se, df = reference(*data)
    assert (fit.n, fit.groups, fit.degrees_of_freedom) == (40, 8, df)
    quantile = stats.t.ppf(0.975, df)
    for i, name in enumerate(PREDICTORS):
        c = fit.coefficients[name]
        assert c.estimate == pytest.approx(beta[i], abs=1e-10)
        assert c.std_error == pytest.approx(se[i], rel=1e-8)
        assert (c.low, c.high) == pytest.approx((beta[i] - quantile * se[i], beta[i] + quantile * se[i]), rel=1e-8)
        assert c.p_value == pytest.approx(2 * stats.t.sf(abs(beta[i] / se[i]), df), rel=1e-6)


def test_the_headline_fit_covers_a_known_coefficient_at_its_nominal_rate():
    """200 simulated studies of 8 variants x 5 seeds with a per-variant shock: the variant-means interval covers the
    true c (0, then -0.05) in 91-99% of them (binomial SD 1.5%); and a strong effect (c = -0.05 per doubling,
    over 6.6 doublings) is detected (interval below 0) in most studies."""
    rng = np.random.default_rng(1)
    for c in (0.0, -0.05):
        fits = [fit_generalization(*synthetic(rng, 8, 5, c=c)).coefficients["log2_description_bits"]
                for _ in range(200)]
        coverage = np.mean([f.low <= c <= f.high for f in fits])
        assert 0.91 <= coverage <= 0.99, (c, coverage)
    assert np.mean([f.high < 0 for f in fits]) > 0.8


def test_the_report_entry_uses_trials_with_all_three_values_and_refuses_in_one_line():
    data = synthetic(np.random.default_rng(2), groups=4, per_group=3, c=-0.02)
    results = [SimpleNamespace(trial=SimpleNamespace(variant=v, seed=index % 3), values={"o": o, "i": i, "d": d})
               for index, (o, i, d, v) in enumerate(zip(*data))]
    results.append(SimpleNamespace(trial=SimpleNamespace(variant="v0", seed=3), values={"o": 0.5, "i": None, "d": 3.0}))
    entry = fit_entry(results, "o", "i", "d")
    assert entry["n"] == 12 and entry["groups"] == 4
    robust = entry["fits"][CLUSTER_ROBUST]["coefficients"]["in_distribution"]["estimate"]
    assert robust == pytest.approx(closed_form(*data)[0][1])
    means = entry["fits"][VARIANT_MEANS]["coefficients"]["log2_description_bits"]["estimate"]
    assert means == pytest.approx(variant_means_closed_form(*data)[0][2])
    three_variants = [r for r in results if r.trial.variant != "v3"]
    refused = fit_entry(three_variants, "o", "i", "d")["refused"]
    assert "needs 4 or more variants, got 3" in refused and "\n" not in refused


@pytest.mark.parametrize("bits, message", [([1.0, 0.0, 2.0, 4.0], "must be > 0 bits"),
                                           ([1.0, np.nan, 2.0, 4.0], "non-finite")])
def test_bad_description_lengths_are_refused(bits, message):
    with pytest.raises(UserError, match=message):
        fit_generalization([0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.7, 0.8], bits, ["a", "b", "c", "d"])


def test_an_unknown_fit_method_is_refused_in_one_line():
    with pytest.raises(UserError, match="unknown generalization fit 'mixed'; choose variant-means or cluster-robust"):
        fit_generalization([0.1] * 4, [0.5] * 4, [1.0] * 4, list("abcd"), method="mixed")
