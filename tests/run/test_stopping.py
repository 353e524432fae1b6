"""Stopping rules: durations and rewards parsed up front, the rules' arithmetic, and runs that stop by them
with a checkpoint, `stopped_by` in summary.json, and a resume that continues past the rule."""

from __future__ import annotations

import json

import pytest

from rlfit.errors import UserError
from rlfit.config.values import parse_duration, parse_reward
from rlfit.run.stopping import TIME_BUDGET_SAFETY, StopRules


@pytest.mark.parametrize("text, seconds", [("20m", 1200), ("11h30m", 41400), ("90s", 90), ("1.5h", 5400),
                                           ("1h 2m 3s", 3723), ("", None)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["abc", "20", "5x", "m20"])
def test_bad_durations_name_the_key(text):
    with pytest.raises(UserError, match="run.time_budget must be a duration such as 20m"):
        parse_duration(text, "run.time_budget")
    with pytest.raises(UserError, match="run.time_budget must be longer than 0"):
        parse_duration("0m", "run.time_budget")


def test_rewards():
    assert parse_reward("900") == 900.0 and parse_reward("-1.5") == -1.5 and parse_reward("") is None
    for bad in ("high", "inf", "nan"):
        with pytest.raises(UserError, match="run.target_reward must be a number"):
            parse_reward(bad, "run.target_reward")


def test_improvement_count():
    count = StopRules.evals_without_improvement
    assert count(5, 10.0, None, 0.0) == 0  # the first evaluation is an improvement
    assert count(2, 10.5, 10.0, 1.0) == 3  # better, but not by more than min_delta
    assert count(2, 11.5, 10.0, 1.0) == 0
    assert count(0, 9.0, 10.0, 0.0) == 1


def test_rules():
    rules = StopRules(time_budget_s=100.0, patience=3, min_delta=0.0, target_reward=900.0)
    assert rules.after_eval(900.0, 0) == "target_reward"
    assert rules.after_eval(899.0, 2) is None
    assert rules.after_eval(899.0, 3) == "early_stop"
    assert StopRules(patience=0).after_eval(0.0, 99) is None
    slowest = 10.0
    assert rules.before_next(100.0 - TIME_BUDGET_SAFETY * slowest - 0.1, slowest) is None
    assert rules.before_next(100.0 - TIME_BUDGET_SAFETY * slowest + 0.1, slowest) == "time_budget"
    assert StopRules().before_next(1e9, 1e9) is None


def test_config_refuses_a_bad_budget_before_anything_runs(run_cli, toy_env_name, tmp_path):
    result = run_cli("train", toy_env_name, "--preset", "smoke", "--set", "run.time_budget=soon",
                     "--run-dir", str(tmp_path / "run"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].endswith("run.time_budget must be a duration such as 20m, "
                                                           "11h30m or 90s, got 'soon'")
    assert "Traceback" not in result.stderr and not (tmp_path / "run").exists()


def _train(tmp_path, *overrides):
    import rlfit
    from tests.conftest import TOY_ENV, TOY_TRAIN_OVERRIDES

    return rlfit.train(TOY_ENV, "smoke", overrides=[*TOY_TRAIN_OVERRIDES, *overrides], run_dir=tmp_path / "run",
                       quiet=True)


def _checkpoint_steps(run_dir):
    return sorted(int(p.name) for p in (run_dir / "checkpoints").iterdir() if p.name.isdigit())


def test_target_reward_stops_at_the_first_evaluation_that_reaches_it(tmp_path):
    result = _train(tmp_path, "run.target_reward=-1000")  # any evaluation reaches it: the first one, at 5
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["stopped_by"] == "target_reward" and summary["iterations"] == 5 == result.progress.iteration
    assert 5 in _checkpoint_steps(tmp_path / "run")


def test_early_stop_after_patience_evaluations_without_improvement(tmp_path):
    # min_delta so large that no evaluation after the first counts as an improvement: patience 2 -> 5, 10, 15
    result = _train(tmp_path, "run.early_stop_patience=2", "run.early_stop_min_delta=1e9")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["stopped_by"] == "early_stop" and summary["iterations"] == 15
    assert result.progress.evals_without_improvement == 2
    assert 15 in _checkpoint_steps(tmp_path / "run")


def test_time_budget_stops_with_a_checkpoint_and_resume_continues_past_it(tmp_path):
    from rlfit.run.resume import resume

    # A budget shorter than any iteration: the first iteration runs (a run always makes one), then no further one
    # fits. (At 1 s the test counted on the compile taking longer: with the program in the session's compile cache,
    # seven iterations fit on 2026-12-07.)
    _train(tmp_path, "run.time_budget=0.001s")
    run_dir = tmp_path / "run"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stopped_by"] == "time_budget" and summary["iterations"] == 1
    assert 1 in _checkpoint_steps(run_dir)
    resumed = resume(run_dir, overrides={"run": {"time_budget": ""}}, quiet=True)
    assert resumed.progress.iteration == 32 and resumed.summary["stopped_by"] is None
