"""The checks of a fit across variants against independent references on hand-built data sets whose answer is
known: a fit driven by one variant (leverage and Cook's distance from the hat matrix written out here, refits by
numpy's least squares), a step against a graded trend (the permutation p from a plain loop over every
permutation), and a blocked design whose variant means fit more tightly than the seeds' noise allows (statsmodels'
formula API with C(seed))."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import scipy.stats
import statsmodels.formula.api as smf

from rlfit.study.dose_response import step_against_graded
from rlfit.study.generalization import BLOCKED, VARIANT_MEANS, fit_entry
from rlfit.study.generalization import adjust_headlines
from rlfit.study.influence import influence_check, verdict_changes
from rlfit.study.report_fits import influence_lines


def test_a_fit_driven_by_one_variant_is_flagged_and_said_to_rest_on_it():
    """Seven variants with no trend in x (0..6) and an eighth far out (x = 30) that alone makes the slope."""
    rng = np.random.default_rng(0)
    x = np.array([0, 1, 2, 3, 4, 5, 6, 30.0])
    covariate = rng.normal(0, 1, 8)
    y = 0.2 * covariate + rng.normal(0, 0.05, 8)
    y[-1] += 1.0
    design = np.column_stack([np.ones(8), covariate, x])
    names = [f"v{i}" for i in range(8)]
    check = influence_check(design, y, names, column=2)

    hat = design @ np.linalg.inv(design.T @ design) @ design.T
    leverage = np.diag(hat)
    residuals = y - hat @ y
    s2 = residuals @ residuals / (8 - 3)
    cooks = residuals ** 2 / (3 * s2) * leverage / (1 - leverage) ** 2
    assert list(check["leverage"].values()) == pytest.approx(leverage.tolist())
    assert list(check["cooks_distance"].values()) == pytest.approx(cooks.tolist())
    assert "v7" in check["flagged"] and check["leverage"]["v7"] > check["leverage_limit"] == pytest.approx(6 / 8)
    assert check["rests_on"] == ["v7"]
    without = check["without"]["v7"]
    slope = np.linalg.lstsq(design[:-1], y[:-1], rcond=None)[0][2]
    assert without["estimate"] == pytest.approx(slope)
    assert without["low"] <= 0 <= without["high"] and without["degrees_of_freedom"] == 4


def brute_force_step_p(covariates, graded, y, min_side=2):
    """The step-beyond-graded permutation p by its definition: every permutation of the graded fit's residuals
    added to its fitted values, the best split's F recomputed each time, loops and numpy's lstsq only."""
    def rss(design, outcome):
        coefficients = np.linalg.lstsq(design, outcome, rcond=None)[0]
        return float(np.sum((outcome - design @ coefficients) ** 2))

    order = np.argsort(graded)
    steps = []
    for k in range(min_side, y.size - min_side + 1):
        step = np.zeros(y.size)
        step[order[k:]] = 1.0
        steps.append(step)
    graded_design = np.column_stack([covariates, graded])
    coefficients = np.linalg.lstsq(graded_design, y, rcond=None)[0]
    fitted, residuals = graded_design @ coefficients, y - graded_design @ coefficients

    def sup_f(outcome):
        base = rss(graded_design, outcome)
        values = []
        for step in steps:
            full = rss(np.column_stack([graded_design, step]), outcome)
            values.append((base - full) / (full / (y.size - graded_design.shape[1] - 1)))
        return max(values)

    observed = sup_f(y)
    null = [sup_f(fitted + residuals[list(p)]) for p in itertools.permutations(range(y.size))]
    return observed, np.mean(np.array(null) >= observed * (1 - 1e-9))


def test_a_step_is_told_from_a_graded_trend_with_its_split_chosen_in_every_permutation():
    rng = np.random.default_rng(1)
    graded = np.arange(6.0)
    covariates = np.column_stack([np.ones(6), rng.normal(0, 1, 6)])
    noise = rng.normal(0, 0.01, 6)
    names = [f"v{i}" for i in range(6)]

    step = np.where(graded >= 3, 0.0, 1.0) + noise  # a jump between v2 and v3, flat on either side
    entry = step_against_graded(covariates, graded, step, names)
    assert (entry["split_after"], entry["split_before"]) == ("v2", "v3") and entry["exact"]
    assert entry["permutations"] == 720
    observed, p = brute_force_step_p(covariates, graded, step)
    assert entry["step_beyond_graded"]["sup_f"] == pytest.approx(observed)
    assert entry["step_beyond_graded"]["p_value"] == pytest.approx(p)
    assert entry["step_beyond_graded"]["p_value"] < 0.05 <= entry["graded_beyond_step"]["p_value"]
    assert entry["verdict"].startswith("the data favour a step between `v2` and `v3`")

    trend = -0.1 * graded + noise
    entry = step_against_graded(covariates, graded, trend, names)
    observed, p = brute_force_step_p(covariates, graded, trend)
    assert entry["step_beyond_graded"]["p_value"] == pytest.approx(p) and p >= 0.05
    assert entry["graded_beyond_step"]["p_value"] < 0.05
    assert entry["verdict"].startswith("the data favour a graded trend")
    assert entry["graded_with_step"]["high"] < 0
    assert "needs 6 or more" in step_against_graded(covariates[:5], graded[:5], trend[:5], names[:5])["note"]


def blocked_design(rng):
    """6 variants x 4 seeds: ood = 0.5 - 0.01 log2(bits) + a seed effect shared by every variant + noise whose mean
    over each variant's seeds is 0, so the variant means lie exactly on the model although the seeds are noisy."""
    variants, seeds = 6, 4
    bits = np.repeat(2.0 ** np.arange(variants), seeds)
    seed = np.tile(np.arange(seeds), variants)
    in_dist = 0.9 + rng.normal(0, 0.01, bits.size)
    noise = rng.normal(0, 0.02, (variants, seeds))
    noise -= noise.mean(axis=1, keepdims=True)
    ood = 0.5 - 0.01 * np.log2(bits) + 0.3 * in_dist + np.array([0.0, 0.05, -0.04, 0.02])[seed] + noise.ravel()
    labels = np.repeat([f"v{v}" for v in range(variants)], seeds)
    return ood, in_dist, bits, labels, seed


def test_a_means_fit_tighter_than_the_seeds_noise_hands_its_headline_to_the_blocked_trial_fit():
    ood, in_dist, bits, labels, seed = blocked_design(np.random.default_rng(2))
    results = [SimpleNamespace(trial=SimpleNamespace(variant=v, seed=int(s)), values={"o": o, "i": i, "d": d})
               for o, i, d, v, s in zip(ood, in_dist, bits, labels, seed)]
    entry = fit_entry(results, "o", "i", "d")

    trials = pd.DataFrame({"y": ood, "i": in_dist, "g": np.log2(bits), "variant": labels, "seed": seed})
    within = smf.ols("y ~ C(variant) + C(seed)", trials).fit()
    means = smf.ols("y ~ i + g", trials.groupby("variant")[["y", "i", "g"]].mean()).fit()
    expected = within.scale / 4
    noise = entry["noise"]
    assert noise["expected_sd"] == pytest.approx(np.sqrt(expected))
    assert noise["residual_sd"] == pytest.approx(np.sqrt(means.scale))
    assert noise["f"] == pytest.approx(means.scale / expected) and noise["f"] < 1
    assert noise["p_lower"] == pytest.approx(scipy.stats.f.cdf(means.scale / expected, 3, within.df_resid))
    assert noise["seeds_as_blocks"] and noise["df"] == [3, 15]
    assert entry["headline"] == BLOCKED and "narrower than the noise allows" in entry["headline_reason"]

    blocked = smf.ols("y ~ i + g + C(seed)", trials).fit()
    c = entry["fits"][BLOCKED]["coefficients"]["log2_description_bits"]
    assert c["estimate"] == pytest.approx(blocked.params["g"])
    assert (c["low"], c["high"]) == pytest.approx(tuple(blocked.conf_int().loc["g"]))
    assert entry["fits"][BLOCKED]["degrees_of_freedom"] == blocked.df_resid == 24 - 3 - 3
    width = lambda fit: fit["coefficients"]["log2_description_bits"]["high"] - fit["coefficients"]["log2_description_bits"]["low"]  # noqa: E731
    assert width(entry["fits"][BLOCKED]) > width(entry["fits"][VARIANT_MEANS])

    # the headline fit without each variant's trials, against statsmodels' formula on the trials left
    influence = entry["headline_influence"]
    assert sorted(influence["without"]) == [f"v{v}" for v in range(6)]
    for name, refit in influence["without"].items():
        left = smf.ols("y ~ i + g + C(seed)", trials[trials["variant"] != name]).fit()
        assert (refit["estimate"], refit["low"], refit["high"]) == pytest.approx(
            (left.params["g"], *left.conf_int().loc["g"]))
        assert refit["degrees_of_freedom"] == left.df_resid == 20 - 3 - 3
    assert influence["full"]["estimate"] == pytest.approx(blocked.params["g"])


def test_a_means_fit_that_carries_the_noise_keeps_its_headline():
    rng = np.random.default_rng(3)
    ood, in_dist, bits, labels, seed = blocked_design(rng)
    ood = ood + np.repeat(rng.normal(0, 0.05, 6), 4)  # a shock per variant: the means scatter beyond the seeds' noise
    results = [SimpleNamespace(trial=SimpleNamespace(variant=v, seed=int(s)), values={"o": o, "i": i, "d": d})
               for o, i, d, v, s in zip(ood, in_dist, bits, labels, seed)]
    entry = fit_entry(results, "o", "i", "d")
    assert entry["noise"]["f"] > 1 and entry["headline"] == VARIANT_MEANS and "headline_reason" not in entry


# ---------------------------------------------------------------- issue 62: influence both ways, adjusted headlines

def t_interval_by_hand(design, y, column):
    """The OLS coefficient's 95% t interval from the normal equations written out (numpy and scipy's t only)."""
    inverse = np.linalg.inv(design.T @ design)
    beta = inverse @ design.T @ y
    residuals = y - design @ beta
    df = y.size - design.shape[1]
    se = np.sqrt(residuals @ residuals / df * inverse[column, column])
    half = scipy.stats.t.ppf(0.975, df) * se
    return beta[column] - half, beta[column] + half


def test_a_null_result_made_by_one_variant_is_reported_as_moved_off_zero_without_it():
    """Seven variants on a clear downward trend in x and an eighth far out (x = 30) that sits at 0, far above the trend: with it
    the slope's interval covers 0, without it the interval lies below 0."""
    rng = np.random.default_rng(5)
    x = np.array([0, 1, 2, 3, 4, 5, 6, 30.0])
    covariate = rng.normal(0, 1, 8)
    y = 0.1 * covariate - 0.05 * x + rng.normal(0, 0.01, 8)
    y[-1] = 0.0
    design = np.column_stack([np.ones(8), covariate, x])
    names = [f"v{i}" for i in range(8)]
    check = influence_check(design, y, names, column=2)

    low, high = t_interval_by_hand(design, y, 2)
    assert low <= 0 <= high and (check["full"]["low"], check["full"]["high"]) == pytest.approx((low, high))
    without = t_interval_by_hand(design[:-1], y[:-1], 2)
    assert without[1] < 0 and (check["without"]["v7"]["low"], check["without"]["v7"]["high"]) == pytest.approx(without)
    assert check["moves_off_zero"] == ["v7"] and check["rests_on"] == [] and check["flips_sign"] == []
    text = " ".join(influence_lines(check))
    assert "Leaving out `v7` moves the interval off 0" in text and "keeps the interval" not in text


def test_a_verdict_changes_either_way_and_an_unmoved_interval_is_no_change():
    full_covers, full_below = {"low": -1.0, "high": 1.0}, {"low": -2.0, "high": -1.0}
    refits = {"a": {"low": -3.0, "high": -0.5}, "b": {"low": 0.5, "high": 2.0}, "c": {"low": -0.5, "high": 0.5}}
    assert verdict_changes(full_covers, refits) == {"rests_on": [], "moves_off_zero": ["a", "b"], "flips_sign": []}
    assert verdict_changes(full_below, refits) == {"rests_on": ["c"], "moves_off_zero": [], "flips_sign": ["b"]}


def test_the_headline_p_of_each_fit_is_holm_adjusted_over_the_reports_fits():
    """Five fitted entries (and a refused one that is not in the family), headline p by hand: sorted 1e-10, 3e-05,
    0.0122, 0.0123, 0.5 times 5, 4, 3, 2, 1, then a running maximum."""
    def entry(p, headline=VARIANT_MEANS):
        other = BLOCKED if headline == VARIANT_MEANS else VARIANT_MEANS
        coefficients = lambda q: {"coefficients": {"log2_description_bits": {"p_value": q}}}  # noqa: E731
        return {"headline": headline, "fits": {headline: coefficients(p), other: coefficients(0.9)}}

    entries = [entry(0.0123), entry(1e-10, BLOCKED), entry(0.0122), entry(3e-5, BLOCKED), entry(0.5, BLOCKED),
               {"refused": "too few variants"}]
    adjust_headlines(entries)
    expected = [max(0.0122 * 3, 0.0123 * 2), 1e-10 * 5, 0.0122 * 3, 3e-5 * 4, 0.5]
    assert [e["headline_p_adjusted"] for e in entries[:5]] == pytest.approx(expected)
    assert [e["headline_p"] for e in entries[:5]] == [0.0123, 1e-10, 0.0122, 3e-5, 0.5]
    assert all(e["headline_family"] == 5 for e in entries[:5]) and "headline_p_adjusted" not in entries[5]


def test_the_report_says_each_headline_p_adjusted_over_its_fits(tmp_path, monkeypatch):
    """Two generalization entries (success rate, then return, out of distribution): each headline p Holm-adjusted
    over the two, by hand: the smaller p doubled, the larger the maximum of itself and that."""
    import json

    from rlfit.study import report
    from tests.study.test_report import generalization_experiment

    monkeypatch.setattr(report, "BOOTSTRAP_REPS", 200)
    experiment = generalization_experiment(tmp_path, ({"ood": "suite/shifted", "in_distribution": "suite/own/success_rate",
                                                       "description": "suite/own/description_length_bits"},))
    report.write_report(experiment)
    entries = json.loads((tmp_path / "report" / "results.json").read_text())["generalization"]
    p = [e["fits"][e["headline"]]["coefficients"]["log2_description_bits"]["p_value"] for e in entries]
    low, high = sorted(p)
    expected = {low: min(1.0, 2 * low), high: max(min(1.0, 2 * low), high)}
    assert [e["headline_p_adjusted"] for e in entries] == pytest.approx([expected[v] for v in p])
    text = (tmp_path / "report" / "report.md").read_text()
    assert text.count("adjusted over the report's 2 generalization fits (Holm)") == 2


def test_the_headline_fits_refits_are_said_in_words():
    from rlfit.study.report_fits import headline_influence_lines

    full = {"estimate": -0.2, "low": -0.6, "high": 0.2, "p_value": 0.3}
    without = {"a": {"estimate": -0.5, "low": -0.9, "high": -0.1, "p_value": 0.02},
               "b": {"estimate": 0.1, "low": -0.3, "high": 0.5, "p_value": 0.6}}
    [text, _] = headline_influence_lines({"full": full, "without": without, **verdict_changes(full, without)})
    assert text.startswith("Without each variant's trials, the headline fit (seeds as blocks) gives c from -0.5 to +0.1.")
    assert "Leaving out `a` moves the interval off 0: without it c = -0.500 [-0.900, -0.100] (p 0.02)" in text
    assert "`b`" not in text
