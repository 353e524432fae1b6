"""The late rise of evaluation curves (`rlfit.study.plateau`) against hand-computed quarters and t intervals, and
its section in a report built from hand-made trials (nothing is trained)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import scipy.stats
import statsmodels.formula.api as smf

from rlfit.study import report
from rlfit.study.plateau import MIN_EVALUATIONS, late_rise, plateau_entries, pooled_late_rise
from tests.study.test_report import MANIFEST, finished_experiment

STEPS = np.arange(13) * 1000.0
"""13 evaluations: the starting one, then 12, whose quarters are 3 evaluations each."""


def test_the_late_rise_is_the_last_quarters_mean_minus_the_one_before_without_the_first_evaluation():
    rewards = np.array([[100.0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]])
    # after the first: 0..11; last quarter 9, 10, 11 (mean 10); the one before 6, 7, 8 (mean 7)
    assert late_rise(rewards).tolist() == [3.0]


def test_a_rising_variant_is_still_rising_and_a_flat_one_shows_no_rise():
    ramp = np.linspace(0.0, 1.2, 13)
    rising = np.stack([ramp + offset for offset in (0.0, 0.1, 0.2)])
    noise = np.array([[0, 0, 0, 0, 0, 0, 0, 0.05, 0.05, 0.05, 0.1, 0.1, 0.1],
                      [0, 0, 0, 0, 0, 0, 0, 0.1, 0.1, 0.1, 0.05, 0.05, 0.05],
                      [0, 0, 0, 0, 0, 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    entries = plateau_entries({"rising": (STEPS, rising), "flat": (STEPS, 0.8 + noise)})

    assert entries["rising"]["verdict"] == "still rising"
    assert entries["rising"]["mean"] == pytest.approx(0.3)  # 3 evaluations of 0.1 apart
    assert entries["rising"]["last_quarter_steps"] == [10000.0, 12000.0]
    assert entries["rising"]["quarter_before_steps"] == [7000.0, 9000.0]
    rises = np.array([0.05, -0.05, 0.0])
    low, high = scipy.stats.t.interval(0.95, 2, loc=rises.mean(), scale=scipy.stats.sem(rises))
    assert entries["flat"]["rise"] == pytest.approx(rises.tolist())
    assert (entries["flat"]["low"], entries["flat"]["high"]) == pytest.approx((low, high))
    assert entries["flat"]["verdict"] == "no rise detected"


def test_too_few_evaluations_or_one_seed_say_why():
    short = np.ones((3, MIN_EVALUATIONS))  # the first evaluation and MIN_EVALUATIONS - 1 more
    entries = plateau_entries({"short": (STEPS[:MIN_EVALUATIONS], short), "one": (STEPS, np.ones((1, 13)))})
    assert "needs" in entries["short"]["note"]
    assert entries["one"]["verdict"] == "one seed: no interval" and entries["one"]["low"] is None
    with pytest.raises(ValueError, match="needs"):
        late_rise(short)


def test_the_report_shows_each_variants_late_rise(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "BOOTSTRAP_REPS", 200)
    bits = {"a": [1.0, 2.0, 3.0], "b": [4.0, 5.0, 6.0]}
    experiment = finished_experiment(tmp_path / "exp", {**MANIFEST, "ratios": []}, bits)
    for trial in experiment.manifest.trials():
        slope = 0.1 if trial.variant == "a" else 0.0
        curve = [float(trial.seed) + slope * i for i in range(13)]
        rows = [{"kind": "eval", "env_steps": float(step), "eval/episode_reward": value}
                for step, value in zip(STEPS, curve)]
        (experiment.trial_dir(trial) / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    text = report.write_report(experiment).read_text()
    numbers = json.loads((experiment.report_dir / "results.json").read_text())

    assert numbers["plateau"]["a"]["mean"] == pytest.approx(0.3)
    assert numbers["plateau"]["a"]["verdict"] == "still rising"
    assert numbers["plateau"]["b"]["mean"] == pytest.approx(0.0)
    assert "## Has training plateaued?" in text
    assert "| a | 3 | 10,000-12,000 |" in text


# ---------------------------------------------------------------- issue 46: pooled, and on the headline measure

def test_the_pooled_late_rise_tests_every_trial_and_every_variant_mean_against_scipy():
    """Two variants, each seed rising a little: no single variant's 3 seeds show it, the 6 trials pooled do."""
    ramp = np.r_[0.0, np.zeros(9), np.ones(3)]  # a late rise of 1 in every seed before the noise
    noise = {"a": [0.4, -0.5, 0.3], "b": [-0.2, 0.9, -0.6]}
    curves = {v: (STEPS, np.stack([ramp * (1 + n) for n in noise[v]])) for v in noise}
    rises = np.concatenate([late_rise(curves[v][1]) for v in noise])
    pooled = pooled_late_rise(curves)

    reference = scipy.stats.ttest_1samp(rises, 0.0)
    low, high = reference.confidence_interval(0.95)
    over = pooled["over_trials"]
    assert (over["n"], over["mean"], over["t"], over["p_value"]) == pytest.approx(
        (6, rises.mean(), reference.statistic, reference.pvalue))
    assert (over["low"], over["high"]) == pytest.approx((low, high)) and over["verdict"] == "still rising"
    means = np.array([late_rise(curves[v][1]).mean() for v in noise])
    assert pooled["over_variant_means"]["p_value"] == pytest.approx(scipy.stats.ttest_1samp(means, 0.0).pvalue)
    assert pooled["rising_variants"] == 2 and pooled["variants"] == 2
    assert all(plateau_entries(curves)[v]["verdict"] == "no rise detected" for v in noise)
    assert "nothing to pool" in pooled_late_rise({"one": (STEPS, np.ones((1, 13)))})["note"]


def write_curves(experiment, slope_of, column="eval/episode_reward"):
    """metrics.jsonl eval rows for every trial: the return and `column`, each seed + slope x evaluation index."""
    for trial in experiment.manifest.trials():
        curve = [float(trial.seed) + slope_of(trial.variant) * i for i in range(13)]
        rows = [{"kind": "eval", "env_steps": float(step), "eval/episode_reward": value, column: 2 * value}
                for step, value in zip(STEPS, curve)]
        (experiment.trial_dir(trial) / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_the_plateau_runs_on_the_headline_measure_when_it_is_recorded_along_training(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "BOOTSTRAP_REPS", 200)
    raw = {**MANIFEST, "ratios": [], "measures": ["final_description_length_bits", "final_eval_reward"]}
    experiment = finished_experiment(tmp_path / "exp", raw, {"a": [1.0, 2.0, 3.0], "b": [4.0, 5.0, 6.0]})
    write_curves(experiment, lambda variant: 0.1 if variant == "a" else 0.0, column="eval/description_length_bits")

    text = report.write_report(experiment).read_text()
    headline = json.loads((experiment.report_dir / "results.json").read_text())["plateau_headline"]
    assert (headline["measure"], headline["column"]) == ("final_description_length_bits", "eval/description_length_bits")
    assert headline["variants"]["a"]["mean"] == pytest.approx(0.6)  # twice the return's rise
    assert headline["pooled"]["over_trials"]["mean"] == pytest.approx(0.3)
    assert "**On the headline measure** (`final_description_length_bits`): recorded along training" in text
    assert "Pooled late rise, with seeds as blocks (3 seeds shared between variants" in text
    assert "**over the 3 seeds (each the mean over its variants)" in text and "for reference only: 6 trials" in text


def test_a_headline_measured_on_the_final_policy_only_is_said_to_be_unchecked(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "BOOTSTRAP_REPS", 200)
    raw = {**MANIFEST, "ratios": [], "generalization": [
        {"ood": "suite/larger-grid", "in_distribution": "suite/in-distribution",
         "description": "final_description_length_bits"}]}
    experiment = finished_experiment(tmp_path / "exp", raw, {"a": [1.0, 2.0, 3.0], "b": [4.0, 5.0, 6.0]})
    write_curves(experiment, lambda variant: 0.0)

    text = report.write_report(experiment).read_text()
    numbers = json.loads((experiment.report_dir / "results.json").read_text())
    assert numbers["plateau_headline"]["measure"] == "suite/larger-grid"
    assert "measured on the final policy only" in numbers["plateau_headline"]["note"]
    assert "cannot be checked" in text
    assert numbers["plateau_pooled"]["over_trials"]["verdict"] == "no rise detected"


# ---------------------------------------------------------------- issue 62: seeds as blocks

def curves_with_rises(rises: dict[str, dict[int, float]]) -> tuple[dict, dict]:
    """(curves, seeds) whose late rise is rises[variant][seed] exactly: each row is 0 until its last quarter,
    then the rise; rows in the dict's seed order."""
    ramp = np.r_[0.0, np.zeros(9), np.ones(3)]
    curves = {v: (STEPS, np.stack([ramp * r for r in by_seed.values()])) for v, by_seed in rises.items()}
    return curves, {v: list(by_seed) for v, by_seed in rises.items()}


@pytest.mark.filterwarnings("ignore:The MLE may be on the boundary")  # statsmodels' check; its seed variance is asserted
def test_the_pooled_late_rise_blocks_by_seed_as_a_mixed_model_with_seed_effects():
    """4 variants x 5 seeds, a seed effect shared by every variant much larger than the trials' own noise: pooled
    over trials the rise looks certain, with seeds as blocks it has 5 units. The blocked mean, standard error and p
    equal statsmodels' MixedLM (variants as sum-coded fixed effects, a random intercept per seed, REML) with t on
    S - 1 = 4 degrees of freedom; rows are listed in a different seed order per variant."""
    rng = np.random.default_rng(7)
    seed_effect = {0: 0.06, 1: -0.03, 2: 0.02, 3: 0.05, 4: -0.04}
    variant_effect = {"a": 0.0, "b": 0.004, "c": -0.003, "d": 0.001}
    rises = {}
    for index, (variant, shift) in enumerate(variant_effect.items()):
        order = np.roll(np.arange(5), index)
        rises[variant] = {int(s): 0.01 + shift + seed_effect[int(s)] + float(rng.normal(0, 0.002)) for s in order}
    curves, seeds = curves_with_rises(rises)
    pooled = pooled_late_rise(curves, seeds)

    frame = pd.DataFrame([(v, s, r) for v, by_seed in rises.items() for s, r in by_seed.items()],
                         columns=["variant", "seed", "rise"])
    mixed = smf.mixedlm("rise ~ C(variant, Sum)", frame, groups=frame["seed"]).fit(reml=True)
    estimate, se = mixed.params["Intercept"], mixed.bse["Intercept"]
    assert float(mixed.cov_re.iloc[0, 0]) > 0.001  # the seed variance is well inside its space
    blocked = pooled["over_seeds"]
    assert pooled["headline"] == "over_seeds" and pooled["seeds"] == [0, 1, 2, 3, 4] and pooled["shared_seeds"] == 5
    assert blocked["n"] == 5 and blocked["mean"] == pytest.approx(estimate)
    half = scipy.stats.t.ppf(0.975, 4) * se
    assert (blocked["low"], blocked["high"]) == pytest.approx((estimate - half, estimate + half), rel=1e-3)
    assert blocked["t"] == pytest.approx(estimate / se, rel=1e-3)
    assert blocked["p_value"] == pytest.approx(2 * scipy.stats.t.sf(abs(estimate / se), 4), rel=1e-3)
    assert blocked["verdict"] == "no rise detected" and blocked["p_value"] > 0.05
    assert pooled["over_trials"]["p_value"] < 0.05  # the trials as independent units: the error this fixes


def test_without_shared_seeds_the_trials_are_the_units():
    rises = {"a": {0: 0.02, 1: 0.03, 2: 0.01}, "b": {3: 0.04, 4: 0.0, 5: 0.02}}
    pooled = pooled_late_rise(*curves_with_rises(rises))
    values = [0.02, 0.03, 0.01, 0.04, 0.0, 0.02]
    assert pooled["headline"] == "over_trials" and "over_seeds" not in pooled
    assert pooled["over_trials"]["p_value"] == pytest.approx(scipy.stats.ttest_1samp(values, 0.0).pvalue)


def test_a_seed_shared_by_some_trials_is_one_block_and_an_unshared_seed_its_own():
    """Seed 0 is shared by a and b, seeds 1 and 2 are a's alone: three units, seed 0's the mean of its two trials."""
    rises = {"a": {0: 0.01, 1: 0.05, 2: 0.03}, "b": {0: 0.03}}
    pooled = pooled_late_rise(*curves_with_rises(rises))
    units = np.array([0.02, 0.05, 0.03])
    reference = scipy.stats.ttest_1samp(units, 0.0)
    blocked = pooled["over_seeds"]
    assert pooled["shared_seeds"] == 1 and blocked["n"] == 3
    assert (blocked["mean"], blocked["t"], blocked["p_value"]) == pytest.approx(
        (units.mean(), reference.statistic, reference.pvalue))
    assert (blocked["low"], blocked["high"]) == pytest.approx(tuple(reference.confidence_interval(0.95)))
    one = pooled_late_rise(*curves_with_rises({"a": {0: 0.01}, "b": {0: 0.03}}))
    assert one["headline"] == "over_seeds" and one["over_seeds"]["low"] is None and "one seed" in one["over_seeds"]["verdict"]


def test_the_report_blocks_the_pooled_rise_by_each_trials_own_seed(tmp_path, monkeypatch):
    """Late rise 0.1 x seed, plus 0.05 in variant b, whose seed 2 recorded no evaluation: seed 0 and 1 are blocks of
    two trials, seed 2 of one; the interval over the three seed means by hand."""
    monkeypatch.setattr(report, "BOOTSTRAP_REPS", 200)
    experiment = finished_experiment(tmp_path / "exp", {**MANIFEST, "ratios": []}, {"a": [1.0, 2.0, 3.0], "b": [4.0, 5.0, 6.0]})
    for trial in experiment.manifest.trials():
        rise = 0.1 * trial.seed + (0.05 if trial.variant == "b" else 0.0)
        curve = np.r_[0.0, np.zeros(9), np.full(3, rise)]
        rows = [] if (trial.variant, trial.seed) == ("b", 2) else [
            {"kind": "eval", "env_steps": float(step), "eval/episode_reward": float(value)}
            for step, value in zip(STEPS, curve)]
        (experiment.trial_dir(trial) / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    report.write_report(experiment)
    pooled = json.loads((experiment.report_dir / "results.json").read_text())["plateau_pooled"]
    seed_means = np.array([(0.0 + 0.05) / 2, (0.1 + 0.15) / 2, 0.2])
    reference = scipy.stats.ttest_1samp(seed_means, 0.0)
    blocked = pooled["over_seeds"]
    assert pooled["trials"] == 5 and pooled["seeds"] == [0, 1, 2] and pooled["shared_seeds"] == 2
    assert (blocked["mean"], blocked["p_value"]) == pytest.approx((seed_means.mean(), reference.pvalue))
    assert (blocked["low"], blocked["high"]) == pytest.approx(tuple(reference.confidence_interval(0.95)))
