"""Evaluation: one episode per env with the mean action; returns summed until the episode ends."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from rlfit.envs.vec_env import VecEnv
from rlfit.algos.common.normalizer import init_stats
from rlfit.run.evaluate import make_evaluator
from tests.toy_env import make as make_toy


def constant_policy(mean_action: float):
    """logits = [mean, raw scale]: the mode is tanh(mean) whatever the observation."""
    def logits(params, obs):
        return jnp.broadcast_to(jnp.array([mean_action, 0.0]), obs.shape[:-1] + (2,))

    return logits


def test_standing_still_earns_one_minus_distance_each_step():
    toy = make_toy()
    env = VecEnv(toy, num_envs=16, episode_length=30)
    key = jax.random.PRNGKey(4)
    result = jax.jit(make_evaluator(env, constant_policy(0.0)))(None, init_stats(jnp.zeros(2)), key)
    start = np.asarray(env.reset(key).inner.obs)  # the same episodes the evaluator starts from
    expected = 30 * (1.0 - np.abs(start[:, 0] - start[:, 1]))
    assert abs(float(result.episode_reward) - expected.mean()) < 1e-3
    assert abs(float(result.episode_reward_std) - expected.std()) < 1e-3
    assert float(result.episode_length) == 30


def test_an_episode_that_ends_early_stops_counting():
    """Always pushing right leaves [-2, 2] after k = floor((2 - p) / 0.2) + 1 steps (terminal): only those count."""
    toy = make_toy()
    env = VecEnv(toy, num_envs=16, episode_length=40)
    key = jax.random.PRNGKey(5)
    result = jax.jit(make_evaluator(env, constant_policy(20.0)))(None, init_stats(jnp.zeros(2)), key)
    start = np.asarray(env.reset(key).inner.obs, np.float64)
    totals, lengths = [], []
    for position, target in start:
        total, steps = 0.0, 0
        while True:
            position += 0.2 * np.tanh(20.0)
            total += 1.0 - abs(position - target)
            steps += 1
            if abs(position) > 2.0:
                break
        totals.append(total)
        lengths.append(steps)
    assert max(lengths) < 40
    assert abs(float(result.episode_length) - np.mean(lengths)) < 1e-4
    assert abs(float(result.episode_reward) - np.mean(totals)) < 1e-3
