"""What a run compiles and when: the starting state as one program, the evaluation in the background while training
starts, each program's cache lookup read in its own thread."""

from __future__ import annotations

import subprocess
import sys
import threading

import jax
import numpy as np
import pytest

import rlfit
from rlfit.run import loop as runner
from rlfit.config.schema import resolve
from rlfit.planning.plan import make_plan
from rlfit.run.evaluate import eval_key
from rlfit.run.trainer import Trainer


@pytest.fixture(scope="module")
def toy_trainer(toy_env_name, toy_train_overrides):
    def build(seed: int) -> Trainer:
        config = resolve(toy_env_name, "smoke", None, [*toy_train_overrides, f"run.seed={seed}"])
        return Trainer.build(config, make_plan(config))

    return build


@pytest.mark.parametrize("seed", [3, 2**31 + 3])  # the seed an argument of the program; past int32, a constant
def test_the_starting_state_program_makes_the_state_the_learners_init_makes(toy_trainer, seed):
    trainer = toy_trainer(seed)
    state, record = trainer.starting_state()
    reference = trainer.learner.init(seed)  # run operation by operation, as before the program existed
    assert jax.tree.structure(state) == jax.tree.structure(reference)
    for ours, theirs in zip(jax.tree.leaves(state), jax.tree.leaves(reference), strict=True):
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    assert record.name == "starting state" and record.compile_s > 0


def test_the_first_training_step_does_not_wait_for_the_evaluation_to_compile(tmp_path, monkeypatch,
                                                                             toy_env_name, toy_train_overrides):
    """The evaluation's compile is held until the first training step has run: a runner that waited for it before
    stepping would never step (the hold times out and the test fails). The evaluation it then runs gives what an
    evaluation compiled on its own gives for the same parameters and key."""
    stepped = threading.Event()
    order = []
    real_step, real_compile_evaluator = runner.Runner._step, Trainer.compile_evaluator

    def step(self, compiled, state):
        out = real_step(self, compiled, state)
        order.append("training step")
        stepped.set()
        return out

    def compile_evaluator(self, state=None):
        order.append("evaluation compile held" if stepped.wait(timeout=60) else "evaluation compile timed out")
        return real_compile_evaluator(self, state)

    monkeypatch.setattr(runner.Runner, "_step", step)
    monkeypatch.setattr(Trainer, "compile_evaluator", compile_evaluator)
    overrides = [o for o in toy_train_overrides if not o.startswith("run.num_timesteps")] + ["run.num_timesteps=2560"]
    result = rlfit.train(toy_env_name, "smoke", overrides=overrides, run_dir=tmp_path / "run")
    assert order == ["training step", "evaluation compile held"]
    assert [p["name"] for p in result.summary["programs"]] == ["training step", "evaluation", "starting state"]

    config = resolve(toy_env_name, "smoke", None, overrides)
    trainer = Trainer.build(config, make_plan(config))
    evaluate = real_compile_evaluator(trainer, result.state)
    policy_params, stats = trainer.learner.acting(result.state)
    alone = jax.device_get(evaluate(policy_params, stats, eval_key(config.run.seed, result.progress.iteration)))
    assert result.summary["final_eval_reward"] == float(alone.episode_reward)


CONCURRENT = """
import threading, jax, jax.numpy as jnp
jax.config.update('jax_compilation_cache_dir', {cache!r})
jax.config.update('jax_persistent_cache_min_compile_time_secs', 0)
jax.config.update('jax_persistent_cache_min_entry_size_bytes', 0)
from rlfit.hardware.compile_log import timed_compile
cached = lambda: jax.jit(lambda x: jnp.sin(x) @ x.T).lower(jnp.ones((8, 8))).compile()
fresh = lambda: jax.jit(lambda x: jnp.cos(x) @ x).lower(jnp.ones(({n}, {n}))).compile()
if {first}:
    cached()
else:
    other_done, records = threading.Event(), {{}}
    def other():
        with timed_compile('fresh') as timing:
            fresh()
        records['fresh'] = timing.record.from_cache
        other_done.set()
    with timed_compile('cached') as timing:
        cached()  # found in the cache; the other thread's miss comes while this block is still open
        threading.Thread(target=other).start()
        other_done.wait()
    records['cached'] = timing.record.from_cache
    print(records['cached'], records['fresh'])
"""


def test_programs_compiled_at_once_in_two_threads_each_read_their_own_lookup(tmp_path):
    def run(first: bool) -> list[str]:
        code = CONCURRENT.format(cache=str(tmp_path), n=5, first=first)
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()

    run(True)  # writes the first program to the cache
    assert run(False) == ["True", "False"]
