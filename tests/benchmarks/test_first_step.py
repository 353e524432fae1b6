"""benchmarks/first_step.py's arithmetic: Brax's first step from its callbacks, the overrides each case trains with."""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def first_step(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # the scripts import their neighbours (common, brax_compare)
    return importlib.import_module("first_step")


def brax_result() -> dict:
    """brax_child.py's figures of a made-up run: the process started 0.5 s before the script, imports 6 s, the
    environment 1 s, the train call at 7.25 s after the script's start; Brax's eval/walltime is cumulative."""
    return {
        "script_start_since_process_start_s": 0.5, "import_s": 6.0, "env_load_s": 1.0,
        "train_call_start_since_script_start_s": 7.25,
        "callbacks": [
            {"t_s": 30.0, "since_process_start_s": 37.75, "eval_walltime": 10.0, "brax_training_walltime": None},
            {"t_s": 58.0, "since_process_start_s": 65.75, "eval_walltime": 14.0, "brax_training_walltime": 23.0},
        ],
    }


def test_brax_first_step_ends_before_the_evaluation_that_follows_the_epoch(first_step):
    found = first_step.brax_first_step(brax_result())
    # callback 1 at 65.75 s from the process's start; the evaluation before it took 14 - 10 = 4 s
    assert found["time_to_first_step_s"] == pytest.approx(61.75)
    phases = found["phases"]
    assert phases["setup_in_train_s"] == pytest.approx(20.0)  # callback 0 at 30 s, of which 10 s its evaluation
    assert phases["step0_eval_s"] == pytest.approx(10.0)
    assert phases["other_before_train_call_s"] == pytest.approx(0.25)
    # 0.5 + 6 + 1 + 0.25 + 20 + 10 + 23 = 60.75: 1 s between the epoch's end and the step-0 evaluation's unaccounted
    assert phases["other_s"] == pytest.approx(1.0)
    assert sum(phases.values()) == pytest.approx(found["time_to_first_step_s"])


@pytest.mark.parametrize(("num_envs", "quick", "expected_extra"), [
    (None, False, []),
    ("auto", False, []),
    ("64", False, ["ppo.num_envs=64", "run.fit_to_device=false"]),
    (None, True, ["ppo.num_envs=16", "ppo.batch_size=16", "ppo.num_minibatches=2", "ppo.unroll_length=10",
                  "run.num_eval_envs=4"]),
])
def test_every_case_trains_one_iteration_with_the_sizes_asked_for(first_step, num_envs, quick, expected_extra):
    args = argparse.Namespace(num_envs=num_envs, quick=quick)
    assert first_step.overrides_for(args, "ppo") == ["run.num_timesteps=1", "run.eval_every=0", *expected_extra]
