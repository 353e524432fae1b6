"""Evaluation: one episode per env with the mean action; returns summed until the episode ends."""

from __future__ import annotations

import jax
import pytest
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


def pushed_right_episodes(start: np.ndarray, speed: float) -> tuple[list[float], list[int]]:
    """Independent reference, in plain Python: each (position, target) of `start` moved right by speed * tanh(20)
    a step until it leaves [-2, 2] (terminal); each episode's return and length."""
    totals, lengths = [], []
    for position, target in start:
        total, steps = 0.0, 0
        while True:
            position += speed * np.tanh(20.0)
            total += 1.0 - abs(position - target)
            steps += 1
            if abs(position) > 2.0:
                break
        totals.append(total)
        lengths.append(steps)
    return totals, lengths


def test_an_episode_that_ends_early_stops_counting():
    """Always pushing right leaves [-2, 2] after k = floor((2 - p) / 0.2) + 1 steps (terminal): only those count."""
    toy = make_toy()
    env = VecEnv(toy, num_envs=16, episode_length=40)
    key = jax.random.PRNGKey(5)
    result = jax.jit(make_evaluator(env, constant_policy(20.0)))(None, init_stats(jnp.zeros(2)), key)
    start = np.asarray(env.reset(key).inner.obs, np.float64)
    totals, lengths = pushed_right_episodes(start, 0.2)
    assert max(lengths) < 40
    assert abs(float(result.episode_length) - np.mean(lengths)) < 1e-4
    assert abs(float(result.episode_reward) - np.mean(totals)) < 1e-3


def auto_reset_evaluation(env: VecEnv, logits, key):
    """Independent reference: the evaluation as it was written before it left out the reset (each step resets the
    environments whose episode ended, and the masks multiply), in plain jax."""
    def step(carry, _):
        state, alive, total, length = carry
        action = jnp.tanh(logits(None, state.inner.obs)[..., :1])
        state, out = env.step(state, action)
        total = total + out.reward * alive
        length = length + alive
        alive = alive * (1.0 - jnp.maximum(out.termination, out.truncation))
        return (state, alive, total, length), None

    ones, zeros = jnp.ones(env.num_envs), jnp.zeros(env.num_envs)
    (_, _, total, length), _ = jax.lax.scan(step, (env.reset(key), ones, zeros, zeros), None,
                                             length=env.episode_length)
    return jnp.mean(total), jnp.std(total), jnp.mean(length)


def test_the_evaluation_gives_what_the_auto_reset_evaluation_gave_bit_for_bit():
    """Episodes that end at different steps (and some that run to the time limit): the same mean, spread and
    length, to the bit, as the evaluation that reset ended environments in each step."""
    env = VecEnv(make_toy(), num_envs=64, episode_length=15)  # 0.143 a step from [-1, 1]: 7 to 21 steps to leave
    key = jax.random.PRNGKey(11)
    logits = constant_policy(0.9)
    result = jax.jit(make_evaluator(env, logits))(None, init_stats(jnp.zeros(2)), key)
    reference = jax.jit(lambda k: auto_reset_evaluation(env, logits, k))(key)
    assert 7 <= float(reference[2]) < 15  # some episodes ended early, some ran to the limit
    for got, expected in zip(result[:3], reference, strict=True):
        assert np.asarray(got).tobytes() == np.asarray(expected).tobytes()


def test_the_evaluation_program_holds_no_reset_but_the_episodes_start():
    """The environment's reset is traced once (the episodes' starts), not again inside the step: a program smaller
    by a reset. (Training's step keeps its reset of ended environments.)"""
    toy = make_toy()
    traced = {"resets": 0}
    original = toy.reset

    def counting_reset(rng):
        traced["resets"] += 1
        return original(rng)

    toy.reset = counting_reset
    env = VecEnv(toy, num_envs=4, episode_length=10)
    jax.make_jaxpr(make_evaluator(env, constant_policy(0.0)))(None, init_stats(jnp.zeros(2)), jax.random.PRNGKey(0))
    assert traced["resets"] == 1
    traced["resets"] = 0
    jax.make_jaxpr(lambda s, a: env.step(s, a))(env.reset(jax.random.PRNGKey(0)), jnp.zeros((4, 1)))
    assert traced["resets"] == 2  # the reset above, and the step's own


def test_what_an_ended_episode_computes_after_its_end_is_not_read():
    """An environment stepped on past its end may compute anything (here: NaN rewards from step 3 of an episode on,
    after the episodes ended at step 2 or 3): the evaluation reads only the steps up to each episode's end."""
    toy = make_toy(speed=1.5, nan_after_steps=4)  # from |p| <= 1, leaves [-2, 2] at step 2 or 3
    env = VecEnv(toy, num_envs=16, episode_length=12)
    key = jax.random.PRNGKey(7)
    result = jax.jit(make_evaluator(env, constant_policy(20.0)))(None, init_stats(jnp.zeros(2)), key)
    start = np.asarray(env.reset(key).inner.obs, np.float64)
    totals, lengths = pushed_right_episodes(start, 1.5)
    assert max(lengths) < 4 and np.isfinite(float(result.episode_reward))
    assert abs(float(result.episode_length) - np.mean(lengths)) < 1e-5
    assert abs(float(result.episode_reward) - np.mean(totals)) < 1e-3


def weighted_envs(num_envs: int, episode_length: int) -> tuple[VecEnv, VecEnv]:
    """(the weighted toy's N environments on its nominal model, N that draw their models with the tests' randomizer)."""
    from tests.envs.randomizers import scaled_masses
    from tests.toy_env import make_weighted

    toy = make_weighted()
    return (VecEnv(toy, num_envs, episode_length),
            VecEnv(toy, num_envs, episode_length, randomizer=scaled_masses))


def observed_position(params, obs):
    """A policy rate of one bit per unit of |position|: differs per state, so a rate over the wrong states shows."""
    return jnp.abs(obs[..., 0])


def test_the_paired_evaluation_gives_what_the_two_evaluations_give_apart():
    """One rollout of nominal and randomized environments together: the nominal figures (and the policy's rate)
    equal the nominal evaluation's from the key, the randomized ones the randomized evaluation's from the key with
    RANDOMIZED_EVAL_STREAM folded in: each rolled out alone, as before the pairing (to float32 rounding)."""
    from rlfit.run.evaluate import RANDOMIZED_EVAL_STREAM, make_paired_evaluator

    nominal_env, randomized_env = weighted_envs(16, 20)
    key, stats, logits = jax.random.PRNGKey(3), init_stats(jnp.zeros(2)), constant_policy(0.4)
    paired = jax.jit(make_paired_evaluator(nominal_env, randomized_env, logits, observed_position))(None, stats, key)
    nominal = jax.jit(make_evaluator(nominal_env, logits, observed_position))(None, stats, key)
    randomized = jax.jit(make_evaluator(randomized_env, logits))(None, stats,
                                                                 jax.random.fold_in(key, RANDOMIZED_EVAL_STREAM))
    for got, expected in ((paired, nominal), (paired.randomized, randomized)):
        np.testing.assert_allclose([got.episode_reward, got.episode_reward_std, got.episode_length],
                                   [expected.episode_reward, expected.episode_reward_std, expected.episode_length],
                                   rtol=1e-6)
    np.testing.assert_allclose(paired.rate_bits, nominal.rate_bits, rtol=1e-6)
    assert paired.randomized.rate_bits is None
    assert abs(float(paired.episode_reward) - float(paired.randomized.episode_reward)) > 1.0  # other models


def traced_in_paired_program(method: str) -> int:
    """How many times tracing the paired evaluation (4 + 4 environments) calls the environment's `method`."""
    from rlfit.run.evaluate import make_paired_evaluator

    nominal_env, randomized_env = weighted_envs(4, 5)
    calls = {"count": 0}
    original = getattr(type(nominal_env.env), method)

    def counting(self, *args):
        calls["count"] += 1
        return original(self, *args)

    setattr(type(nominal_env.env), method, counting)
    try:
        jax.make_jaxpr(make_paired_evaluator(nominal_env, randomized_env, constant_policy(0.0)))(
            None, init_stats(jnp.zeros(2)), jax.random.PRNGKey(0))
    finally:
        setattr(type(nominal_env.env), method, original)
    return calls["count"]


def test_the_paired_evaluation_traces_the_environments_step_once():
    """The program holds one copy of the environment's step for both sides (two rollouts held two)."""
    assert traced_in_paired_program("step") == 1


def test_the_paired_evaluation_traces_the_environments_reset_once():
    """One reset of the 2N environments for both sides (a reset per side held two copies of it)."""
    assert traced_in_paired_program("reset") == 1


def test_the_paired_evaluation_needs_a_randomized_environment_of_the_same_size():
    from rlfit.run.evaluate import make_paired_evaluator

    nominal_env, randomized_env = weighted_envs(4, 5)
    with pytest.raises(ValueError, match="randomized environment"):
        make_paired_evaluator(nominal_env, nominal_env, constant_policy(0.0))
    with pytest.raises(ValueError, match="of the nominal one's size"):
        make_paired_evaluator(VecEnv(nominal_env.env, 8, 5), randomized_env, constant_policy(0.0))
