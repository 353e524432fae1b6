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


def compile_stages(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("compile_stages")


LOG = """WARNING:jax._src.pjit:Finished tracing reset for jit in 2.5 sec
WARNING:jax._src.pjit:Finished tracing starting_state for jit in 10.25 sec
WARNING:jax._src.interpreters.pxla:Finished jaxpr to MLIR module conversion jit(starting_state) in 6.5 sec
WARNING:jax._src.pjit:Finished tracing train_iteration for jit in 20.0 sec
WARNING:jax._src.dispatch:Finished XLA compilation of jit(starting_state) in 40.125 sec
WARNING:jax._src.pjit:Finished tracing starting_state for jit in 0.25 sec
WARNING:jax._src.interpreters.pxla:Finished jaxpr to MLIR module conversion jit(train_iteration) in 9.0 sec
WARNING:jax._src.dispatch:Finished XLA compilation of jit(train_iteration) in 90.0 sec
WARNING:jax._src.dispatch:Finished XLA compilation of jit(convert_element_type) in 0.01 sec
rlfit: compiled 3 of 3: starting state in 57.1s
"""


def test_the_starting_states_compile_is_split_into_tracing_lowering_and_xlas_compile(monkeypatch):
    stages = compile_stages(monkeypatch)
    found = stages.jax_stages(stages.stages_in_log(LOG))
    assert set(found) == {"reset", "starting_state", "train_iteration"}  # convert_element_type: under 0.5 s
    state = found["starting_state"]
    assert (state["tracing_s"], state["tracing_count"]) == (10.5, 2)
    assert (state["lowering_s"], state["xla_compile_s"], state["xla_compile_count"]) == (6.5, 40.125, 1)
    assert found["reset"]["tracing_s"] == 2.5 and found["reset"]["xla_compile_count"] == 0  # nested: traced only
    programs = [{"name": "training step", "compile_s": 120.0, "from_cache": False, "from_store": False},
                {"name": "starting state", "compile_s": 57.1, "from_cache": False, "from_store": False}]
    record = stages.starting_state_record(found, programs)
    assert record["program_compile_s"] == 57.1 and record["xla_compile_s"] == 40.125
    assert record["training_step_compile_s"] == 120.0
    assert record["training_step_xla_compile_ended_since_process_start_s"] is None  # a log file carries no times


def test_a_stage_ending_at_a_time_gives_the_steps_end(monkeypatch):
    stages = compile_stages(monkeypatch)
    items = [{"stage": "xla_compile", "name": "train_iteration", "seconds": 5.0, "end_since_process_start_s": 80.0},
             {"stage": "xla_compile", "name": "starting_state", "seconds": 3.0, "end_since_process_start_s": 50.0}]
    found = stages.jax_stages(items)
    record = stages.starting_state_record(found, [])
    assert record["xla_compile_ended_since_process_start_s"] == 50.0
    assert record["training_step_xla_compile_ended_since_process_start_s"] == 80.0
    assert record["program_compile_s"] is None
