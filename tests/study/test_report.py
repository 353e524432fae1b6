"""The report from hand-made finished trials (summary.json, suites.json, config.yaml; nothing is trained): ratios
of measures per variant, and measures that some or all trials did not record."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
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
