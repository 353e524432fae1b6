"""A short run on the toy point-reaching env learns: its eval reward ends far above the initial policy's."""

from __future__ import annotations

import json

import jax
import pytest

from rlfit.config.schema import resolve
from rlfit.planning.plan import make_plan
from rlfit.run.evaluate import eval_key
from rlfit.run.trainer import Trainer

EPISODE_ENV_STEPS = 100  # env.episode_length in TOY_TRAIN_OVERRIDES (50 decisions, action repeat 2)
STANDING_STILL = EPISODE_ENV_STEPS * (1 - 2 / 3)
"""Expected return without moving: reward 1 - |p - t| per env step, p and t uniform on [-1, 1], E|p - t| = 2/3."""


@pytest.fixture(scope="module")
def initial_eval_reward(toy_env_name, toy_train_overrides, toy_run):
    """The eval reward of the run's initial parameters, on the same evaluation episodes as its final eval."""
    result = toy_run(0)
    config = resolve(toy_env_name, "smoke", None, [*toy_train_overrides, "run.seed=0"])
    trainer = Trainer.build(config, make_plan(config))
    state = trainer.init_state()
    compiled = trainer.compile(state)
    key = eval_key(config.run.seed, result.progress.iteration)
    return float(jax.device_get(compiled.evaluate(state.params.policy, state.normalizer, key)).episode_reward)


def test_final_eval_reward_far_above_the_initial_policy(toy_run, initial_eval_reward):
    final = toy_run(0).summary["final_eval_reward"]
    assert final >= 80, f"final eval reward {final:.1f} of at most {EPISODE_ENV_STEPS}"
    assert final >= max(initial_eval_reward, STANDING_STILL) + 30, (final, initial_eval_reward)


def test_training_episode_return_improves(toy_run):
    rows = [json.loads(line) for line in toy_run(0).run_dir.metrics.read_text().splitlines()]
    returns = [row["episode/return"] for row in rows if "episode/return" in row]
    assert len(returns) > 10
    first, last = sum(returns[:3]) / 3, sum(returns[-3:]) / 3
    assert last > first + 20, (first, last)
