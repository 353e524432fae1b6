"""The report from hand-made finished trials (summary.json, suites.json, config.yaml; nothing is trained): ratios
of measures per variant, and measures that some or all trials did not record."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
import scipy.stats
import yaml

from rlfit.study import report
from rlfit.study.experiment import Experiment
from rlfit.study.manifest import parse_manifest
from rlfit.study.stats import ratio_of_means

REPS = 200
MANIFEST = {
    "name": "ratios", "env": "CartpoleBalance", "preset": "quick",
    "variants": [{"name": "a", "set": {"ppo.learning_rate": 1e-3}}, {"name": "b", "set": {"ppo.learning_rate": 1e-4}}],
    "seeds": 3,
    "suites": {"in-distribution": {}, "larger-grid": {}},
    "measures": ["final_eval_reward", "final_description_length_bits"],
    "ratios": [{"numerator": "suite/larger-grid", "denominator": "suite/in-distribution"}],
}
IN_DISTRIBUTION = {"a": [10.0, 20.0, 30.0], "b": [40.0, 50.0, 60.0]}
LARGER_GRID = {"a": [5.0, 8.0, 17.0], "b": [30.0, None, None]}
"""b's seeds 1 and 2 were not evaluated on larger-grid: its ratio has one trial."""


def finished_experiment(path, raw, bits) -> Experiment:
    """An experiment directory whose every trial is finished; `bits[variant][seed]` is its description length."""
    manifest = parse_manifest(raw)
    experiment = Experiment(path, manifest)
    for trial in manifest.trials():
        run_dir = experiment.trial_dir(trial)
        run_dir.mkdir(parents=True)
        reward = IN_DISTRIBUTION[trial.variant][trial.seed] + 1.0
        (run_dir / "summary.json").write_text(json.dumps(
            {"stopped_by": None, "final_eval_reward": reward, "final_description_length_bits": bits[trial.variant][trial.seed]}))
        suites = {"in-distribution": IN_DISTRIBUTION[trial.variant][trial.seed],
                  "larger-grid": LARGER_GRID[trial.variant][trial.seed]}
        (run_dir / "suites.json").write_text(json.dumps(
            {name: {"episode_reward": value} for name, value in suites.items() if value is not None}))
        (run_dir / "config.yaml").write_text(yaml.safe_dump(
            {"ppo": {"learning_rate": manifest.variant(trial.variant).overrides["ppo.learning_rate"]}}))
    return experiment


@pytest.fixture(autouse=True)
def few_resamples(monkeypatch):
    monkeypatch.setattr(report, "BOOTSTRAP_REPS", REPS)


def test_the_report_holds_each_variants_ratio(tmp_path):
    bits = {"a": [3.0, 4.0, 5.0], "b": [None, None, None]}  # b's policies have no bottleneck
    experiment = finished_experiment(tmp_path, MANIFEST, bits)
    report.write_report(experiment)
    results = json.loads((tmp_path / "report" / "results.json").read_text())
    [ratio] = results["ratios"]
    assert (ratio["numerator"], ratio["denominator"]) == ("suite/larger-grid", "suite/in-distribution")
    a, b = ratio["per_variant"]["a"], ratio["per_variant"]["b"]
    assert a["n"] == 3 and a["ratio"] == pytest.approx(30.0 / 60.0) and a["note"] == ""
    expected = ratio_of_means(np.array([5.0, 8.0, 17.0]), np.array([10.0, 20.0, 30.0]), reps=REPS)
    assert (a["low"], a["high"]) == pytest.approx((expected.low, expected.high))
    assert a["low"] < 0.5 < a["high"]
    assert b == {"n": 1, "ratio": pytest.approx(0.75), "low": None, "high": None,
                 "note": "one trial: no interval (a spread needs 2 or more trials)"}
    assert results["measures"]["final_description_length_bits"]["values"] == {"a": [3.0, 4.0, 5.0]}
    assert results["measures_not_recorded"] == []
    text = (tmp_path / "report" / "report.md").read_text()
    assert "## Ratios" in text and "mean(numerator) / mean(denominator)" in text
    assert "### `suite/larger-grid` / `suite/in-distribution`" in text
    assert f"| a | 3 | 0.500 [{expected.low:.3f}, {expected.high:.3f}] |" in text
    assert "| b | 1 | 0.750 (one trial: no interval (a spread needs 2 or more trials)) |" in text


def test_a_measure_no_trial_recorded_is_left_out_and_said_so(tmp_path):
    raw = {**MANIFEST, "ratios": [{"numerator": "final_description_length_bits", "denominator": "final_eval_reward"}],
           "correlations": [{"x": "ppo.learning_rate", "y": "final_description_length_bits"}]}
    experiment = finished_experiment(tmp_path, raw, {"a": [None] * 3, "b": [None] * 3})
    report.write_report(experiment)
    results = json.loads((tmp_path / "report" / "results.json").read_text())
    assert "final_description_length_bits" not in results["measures"]
    assert results["measures_not_recorded"] == ["final_description_length_bits"]
    assert results["correlations"][0]["n"] == 0
    assert results["ratios"][0]["per_variant"]["a"] == {
        "n": 0, "ratio": None, "low": None, "high": None, "note": "no finished trial has both measures"}
    text = (tmp_path / "report" / "report.md").read_text()
    assert "- measure `final_description_length_bits` was not recorded (no finished trial has a value for it)" in text
    assert "## final_description_length_bits" not in text
    assert "| a | 0 | n/a (no finished trial has both measures) |" in text
    assert not math.isnan(results["measures"]["final_eval_reward"]["estimates"]["a"]["mean"])


# ---------------------------------------------------------------- issue 31: statistics a reviewer accepts

SPREAD = {"a": [(4.0, 64), (8.0, 64), (6.0, 64)], "b": [(2.0, 16), (2.0, 16), (2.0, 16)]}
"""Each trial's evaluation spread on in-distribution: (episode_reward_std, episodes)."""


def holm_reference(p_values):
    """Holm by its definition: the i-th smallest p times (m - i + 1), then the running maximum, capped at 1."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted, running = [0.0] * len(p_values), 0.0
    for rank, i in enumerate(order):
        running = max(running, (len(p_values) - rank) * p_values[i])
        adjusted[i] = min(running, 1.0)
    return adjusted


def test_the_reports_tests_are_holm_adjusted_as_one_family_with_raw_and_adjusted_p(tmp_path):
    raw = {**MANIFEST, "ratios": [], "correlations": [{"x": "ppo.learning_rate", "y": "final_eval_reward"}]}
    experiment = finished_experiment(tmp_path, raw, {"a": [3.0, 4.0, 5.0], "b": [6.0, 6.5, 9.0]})
    report.write_report(experiment)
    results = json.loads((tmp_path / "report" / "results.json").read_text())
    # both variants finished seeds 0-2, which share their keys and episodes: paired t on the per-seed differences
    welch = {m: scipy.stats.ttest_rel(np.array(e["values"]["a"]), np.array(e["values"]["b"])).pvalue
             for m, e in results["measures"].items() if all(len(v) >= 2 for v in e["values"].values())}
    final = [v + 1.0 for v in IN_DISTRIBUTION["a"] + IN_DISTRIBUTION["b"]]
    pearson = scipy.stats.pearsonr([1e-3] * 3 + [1e-4] * 3, final).pvalue
    family = list(welch.values()) + [pearson]
    assert results["family_size"] == len(family) == 4  # final reward, bits, in-distribution; larger-grid has one b
    expected = dict(zip(list(welch) + ["correlation"], holm_reference(family)))
    for measure, p in welch.items():
        [c] = results["measures"][measure]["comparisons"]
        assert (c["test"], c["p_value"], c["p_adjusted"]) == ("paired t", pytest.approx(p), pytest.approx(expected[measure]))
    assert results["correlations"][0]["pearson_p_adjusted"] == pytest.approx(expected["correlation"])
    text = (tmp_path / "report" / "report.md").read_text()
    c = results["measures"]["final_description_length_bits"]["comparisons"][0]
    assert f"p = {c['paired_p']:.2g}, Holm-adjusted p = {c['p_adjusted']:.2g}" in text
    assert "family of 4 tests, adjusted with Holm's step-down correction" in text
    assert "power" not in text.replace("80% power", "").replace("rlfit.study.power", "")  # no observed-power verdicts


def test_a_ratio_of_values_that_can_be_negative_is_refused_in_one_line(tmp_path):
    raw = {**MANIFEST, "ratios": [{"numerator": "final_description_length_bits", "denominator": "suite/in-distribution"}]}
    experiment = finished_experiment(tmp_path, raw, {"a": [-1.0, 4.0, 5.0], "b": [1.0, 2.0, 3.0]})
    report.write_report(experiment)
    [ratio] = json.loads((tmp_path / "report" / "results.json").read_text())["ratios"]
    why = ("`final_description_length_bits` has values <= 0 (smallest -1): not a ratio scale, so no ratio; compare "
           "differences instead")
    assert (ratio["refused"], ratio["per_variant"]) == (why, {})  # b's values are positive: refused all the same
    text = (tmp_path / "report" / "report.md").read_text()
    assert f"### `final_description_length_bits` / `suite/in-distribution`\n\nRefused: {why}.\n" in text


def test_a_ratio_of_returns_under_different_rewards_is_refused(tmp_path):
    suites = {"in-distribution": {}, "larger-grid": {"set": {"env.overrides": {"goal_reward": 0.5, "step_cost": 0.02}}}}
    experiment = finished_experiment(tmp_path, {**MANIFEST, "suites": suites}, {"a": [3.0, 4.0, 5.0], "b": [1.0, 2.0, 3.0]})
    report.write_report(experiment)
    [ratio] = json.loads((tmp_path / "report" / "results.json").read_text())["ratios"]
    assert ratio["refused"] == ("`suite/larger-grid` changes the reward (goal_reward=0.5, step_cost=0.02): its returns "
                                "are in other units, so no ratio")


def test_a_single_seed_shows_no_interval_and_says_why(tmp_path):
    experiment = finished_experiment(tmp_path, {**MANIFEST, "ratios": []}, {"a": [3.0, 4.0, 5.0], "b": [7.0, None, None]})
    report.write_report(experiment)
    text = (tmp_path / "report" / "report.md").read_text()
    assert "| b | 1 | 7.00 (one seed: no interval (a spread needs 2 or more seeds)) |" in text
    estimate = json.loads((tmp_path / "report" / "results.json").read_text())[
        "measures"]["final_description_length_bits"]["estimates"]["b"]
    assert (estimate["mean"], estimate["mean_low"], estimate["mean_high"]) == (7.0, None, None)


def test_numbers_in_an_interval_share_their_decimals(tmp_path):
    experiment = finished_experiment(tmp_path, {**MANIFEST, "ratios": []}, {"a": [3.0, 4.0, 5.0], "b": [6.0, 6.5, 9.0]})
    report.write_report(experiment)
    text = (tmp_path / "report" / "report.md").read_text()
    intervals = re.findall(r"(-?\d+(?:\.(\d+))?) \[(-?\d+(?:\.(\d+))?), (-?\d+(?:\.(\d+))?)\]", text)
    assert len(intervals) > 10
    for point, point_places, low, low_places, high, high_places in intervals:
        assert len(point_places) == len(low_places) == len(high_places), (point, low, high)


def test_the_evaluation_noise_is_reported_beside_the_spread_between_seeds(tmp_path):
    experiment = finished_experiment(tmp_path, {**MANIFEST, "ratios": []}, {"a": [3.0, 4.0, 5.0], "b": [6.0, 6.5, 9.0]})
    for trial in experiment.manifest.trials():
        path = experiment.trial_dir(trial) / "suites.json"
        suites = json.loads(path.read_text())
        std, episodes = SPREAD[trial.variant][trial.seed]
        suites["in-distribution"].update(episode_reward_std=std, episodes=episodes)
        path.write_text(json.dumps(suites))
    report.write_report(experiment)
    noise = json.loads((tmp_path / "report" / "results.json").read_text())["measures"]["suite/in-distribution"][
        "evaluation_noise"]
    se_a = math.sqrt(np.mean([(4.0 / math.sqrt(63)) ** 2, (8.0 / math.sqrt(63)) ** 2, (6.0 / math.sqrt(63)) ** 2]))
    assert noise["a"]["eval_se"] == pytest.approx(se_a)
    assert noise["a"]["seed_sd"] == pytest.approx(np.std(IN_DISTRIBUTION["a"], ddof=1))
    assert noise["b"]["eval_se"] == pytest.approx(2.0 / math.sqrt(15))
    assert noise["a"]["ratio"] == pytest.approx(se_a / 10.0)
    text = (tmp_path / "report" / "report.md").read_text()
    episodes_for_a_third = math.ceil(64 * (se_a / (10.0 / 3)) ** 2)  # SE falls as 1 / sqrt(episodes)
    assert f"| a | 64 | {se_a:.3f} | 10.0 | 0.08 | {episodes_for_a_third} |" in text


def test_a_profile_only_for_a_score(tmp_path):
    experiment = finished_experiment(tmp_path, {**MANIFEST, "ratios": []}, {"a": [3.0, 4.0, 5.0], "b": [6.0, 6.5, 9.0]})
    report.write_report(experiment)
    figures = json.loads((tmp_path / "report" / "results.json").read_text())["figures"]
    assert "final_eval_reward/profile" in figures
    assert "final_description_length_bits/profile" not in figures
    assert not (tmp_path / "report" / "final_description_length_bits-profile.png").exists()
    text = (tmp_path / "report" / "report.md").read_text()
    assert "| `final_description_length_bits` |" in text and "| bits per observation |" in text
    assert "Unit: return (sum of rewards over an episode)." in text


def test_a_recorded_success_rate_and_the_policy_a_suite_names_are_reported_with_units(tmp_path):
    experiment = finished_experiment(tmp_path, {**MANIFEST, "ratios": []}, {"a": [3.0, 4.0, 5.0], "b": [6.0, 6.5, 9.0]})
    rates = {"a": [0.5, 0.75, 0.625], "b": [0.25, 0.5, 0.375]}
    for trial in experiment.manifest.trials():
        path = experiment.trial_dir(trial) / "suites.json"
        suites = json.loads(path.read_text())
        suites["in-distribution"].update(success_rate=rates[trial.variant][trial.seed], policy="sampled actions")
        path.write_text(json.dumps(suites))
    report.write_report(experiment)
    results = json.loads((tmp_path / "report" / "results.json").read_text())
    entry = results["measures"]["suite/in-distribution/success_rate"]
    assert entry["values"] == rates and entry["unit"] == "fraction of episodes"
    assert entry["estimates"]["a"]["mean"] == pytest.approx(np.mean(rates["a"]))
    text = (tmp_path / "report" / "report.md").read_text()
    assert ("| `suite/in-distribution/success_rate` | fraction of the suite's episodes that reached the goal (suite "
            "`in-distribution`) | fraction of episodes | sampled actions |") in text
    assert "| `suite/larger-grid` | mean return of the final policy on suite `larger-grid`" in text
    assert "suite/larger-grid/success_rate" not in results["measures"]  # not recorded: not invented


def test_returns_are_also_shown_divided_by_the_manifests_reference_return(tmp_path):
    experiment = finished_experiment(tmp_path, {**MANIFEST, "ratios": [], "reference_return": 100},
                                     {"a": [3.0, 4.0, 5.0], "b": [6.0, 6.5, 9.0]})
    report.write_report(experiment)
    results = json.loads((tmp_path / "report" / "results.json").read_text())
    e = results["measures"]["suite/in-distribution"]["estimates"]["a"]
    text = (tmp_path / "report" / "report.md").read_text()
    scaled = f"{e['mean'] / 100:.3f} [{e['mean_low'] / 100:.3f}, {e['mean_high'] / 100:.3f}]"
    assert e["mean"] == pytest.approx(20.0) and f"| {scaled} |" in text
    assert "Normalized return: a return divided by the manifest's reference return, 100." in text
    bits = text.split("## final_description_length_bits")[1].split("##")[0]
    assert "mean / reference" not in bits  # bits are not a return


def generalization_experiment(path, more_fits: tuple[dict, ...] = ()) -> Experiment:
    """Four variants x 3 seeds with success rates in and out of distribution and a description length per trial;
    `more_fits`: generalization entries after the first."""
    rng = np.random.default_rng(4)
    raw = {"name": "gen", "env": "CartpoleBalance", "preset": "quick", "seeds": 3,
           "variants": [{"name": n, "set": {"ppo.learning_rate": lr}}
                        for n, lr in zip("abcd", (1e-3, 3e-4, 1e-4, 3e-5))],
           "suites": {"own": {"episodes": 100}, "shifted": {"episodes": 100}}, "measures": ["final_eval_reward"],
           "generalization": [{"ood": "suite/shifted/success_rate", "in_distribution": "suite/own/success_rate",
                               "description": "suite/own/description_length_bits"}, *more_fits]}
    experiment = Experiment(path, parse_manifest(raw))
    for index, trial in enumerate(experiment.manifest.trials()):
        run_dir = experiment.trial_dir(trial)
        run_dir.mkdir(parents=True)
        own = float(rng.uniform(0.5, 0.9))
        bits = 2.0 ** ("abcd".index(trial.variant) * 2 + rng.uniform(0, 0.5))
        shifted = own * 0.8 - 0.01 * math.log2(bits) + float(rng.normal(0, 0.02))
        (run_dir / "summary.json").write_text(json.dumps({"stopped_by": None, "final_eval_reward": own}))
        (run_dir / "suites.json").write_text(json.dumps({
            "own": {"episode_reward": own, "success_rate": own, "description_length_bits": bits, "episodes": 100},
            "shifted": {"episode_reward": shifted, "success_rate": shifted, "episodes": 100}}))
        (run_dir / "config.yaml").write_text(yaml.safe_dump({"ppo": {"learning_rate": 1e-3}}))
    return experiment


def test_the_generalization_fit_is_reported_with_both_methods_and_a_figure(tmp_path):
    from rlfit.study.generalization import CLUSTER_ROBUST, VARIANT_MEANS, fit_generalization

    experiment = generalization_experiment(tmp_path)
    report.write_report(experiment)
    entry = json.loads((tmp_path / "report" / "results.json").read_text())["generalization"][0]
    rows = [(json.loads((experiment.trial_dir(t) / "suites.json").read_text()), t.variant)
            for t in experiment.manifest.trials()]
    columns = ([r["shifted"]["success_rate"] for r, _ in rows], [r["own"]["success_rate"] for r, _ in rows],
               [r["own"]["description_length_bits"] for r, _ in rows], [v for _, v in rows])
    for method in (VARIANT_MEANS, CLUSTER_ROBUST):
        expected = fit_generalization(*columns, method=method).coefficients["log2_description_bits"]
        got = entry["fits"][method]["coefficients"]["log2_description_bits"]
        assert (got["estimate"], got["low"], got["high"]) == pytest.approx((expected.estimate, expected.low,
                                                                            expected.high))
    assert entry["n"] == 12 and entry["groups"] == 4 and (tmp_path / "report" / entry["figure"]).is_file()
    text = (tmp_path / "report" / "report.md").read_text()
    assert "## Learned worse or generalized worse?" in text and "12 trials in 4 variants" in text


def test_a_success_rates_evaluation_noise_is_binomial(tmp_path):
    experiment = generalization_experiment(tmp_path)
    report.write_report(experiment)
    numbers = json.loads((tmp_path / "report" / "results.json").read_text())
    noise = numbers["measures"]["suite/own/success_rate"]["evaluation_noise"]["a"]
    rates = numbers["measures"]["suite/own/success_rate"]["values"]["a"]
    expected = math.sqrt(np.mean([p * (1 - p) / 99 for p in rates]))
    assert noise["eval_se"] == pytest.approx(expected) and noise["episodes"] == 100


def test_a_measure_every_seed_scores_the_same_is_reported_untested_not_a_crash(tmp_path):
    """A pipeline-check stage can leave a success rate of 0 in every trial: Welch's t is undefined there, so the
    comparison says so and stays out of the Holm family instead of stopping the report."""
    experiment = finished_experiment(tmp_path, {**MANIFEST, "ratios": []}, {"a": [3.0, 4.0, 5.0], "b": [6.0, 6.5, 9.0]})
    for trial in experiment.manifest.trials():
        path = experiment.trial_dir(trial) / "suites.json"
        suites = json.loads(path.read_text())
        suites["in-distribution"].update(success_rate=0.0)
        path.write_text(json.dumps(suites))
    report.write_report(experiment)
    numbers = json.loads((tmp_path / "report" / "results.json").read_text())
    comparison = numbers["measures"]["suite/in-distribution/success_rate"]["comparisons"][0]
    assert comparison["p_adjusted"] is None and comparison["verdict"].startswith("not tested")
    tested = sum(1 for m in numbers["measures"].values() for c in m["comparisons"] if c["p_value"] is not None)
    assert numbers["family_size"] == tested + sum(1 for c in numbers["correlations"] if c.get("pearson_p") is not None)


# ---------------------------------------------------------------- issue 46: seeds as blocks

def test_variants_that_share_their_seeds_are_compared_paired_and_others_unpaired_with_the_reason(tmp_path):
    """A blocked design: each seed moves both variants alike (seed effects 0, 10, 20), a beats b by about 1 in
    every seed. Welch's t cannot see it through the seeds' spread; the paired t on per-seed differences does."""
    raw = {**MANIFEST, "ratios": []}
    bits = {"a": [1.1, 11.0, 20.9], "b": [0.0, 10.1, 20.0]}
    experiment = finished_experiment(tmp_path, raw, bits)
    report.write_report(experiment)
    numbers = json.loads((tmp_path / "report" / "results.json").read_text())
    [c] = numbers["measures"]["final_description_length_bits"]["comparisons"]
    a, b = np.array(bits["a"]), np.array(bits["b"])
    reference = scipy.stats.ttest_rel(a, b)
    low, high = reference.confidence_interval(0.95)
    assert c["paired"] and c["test"] == "paired t"
    assert (c["paired_t"], c["paired_p"], c["p_value"]) == pytest.approx((reference.statistic, reference.pvalue,
                                                                         reference.pvalue))
    assert (c["mean_diff_low"], c["mean_diff_high"]) == pytest.approx((low, high))
    assert c["wilcoxon_p"] == pytest.approx(scipy.stats.wilcoxon(a - b).pvalue)
    assert c["paired_p"] < 0.01 and c["welch_p"] > 0.5  # the blocks hide the difference from the unpaired test
    text = (tmp_path / "report" / "report.md").read_text()
    assert "seeds are blocks" in text and "seeds paired: mean of the per-seed differences" in text

    # b's seed 2 did not finish: the variants no longer finished the same seeds, so the comparison is unpaired and says why
    (experiment.trial_dir(experiment.manifest.trials()[-1]) / "summary.json").unlink()
    report.write_report(experiment)
    numbers = json.loads((tmp_path / "report" / "results.json").read_text())
    [c] = numbers["measures"]["final_description_length_bits"]["comparisons"]
    assert not c["paired"] and c["test"] == "Welch's t"
    assert c["p_value"] == pytest.approx(scipy.stats.ttest_ind(a, b[:2], equal_var=False).pvalue)
    assert "did not finish the same seeds" in c["pairing"]
