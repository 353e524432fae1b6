"""The late rise of evaluation curves (`rlfit.study.plateau`) against hand-computed quarters and t intervals, and
its section in a report built from hand-made trials (nothing is trained)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.stats

from rlfit.study import report
from rlfit.study.plateau import MIN_EVALUATIONS, late_rise, plateau_entries
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
