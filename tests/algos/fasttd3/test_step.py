"""FastTD3's training step on the toy environment: the state keeps every leaf's shape and dtype; the actor is
updated only on every `policy_delay`-th critic update; the target critics follow by `tau`; each environment
keeps its exploration std until its episode ends."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlfit.algos.fasttd3.config import FastTD3Config
from rlfit.algos.fasttd3.networks import make_fasttd3_networks
from rlfit.algos.fasttd3.step import init_fasttd3_state, make_train_step
from rlfit.algos.fasttd3.update import make_optimizers
from rlfit.algos.offpolicy.collect import make_prefill
from rlfit.envs.vec_env import VecEnv
from rlfit.networks.heads import DETERMINISTIC_TANH
from tests.toy_env import make as make_toy

CONFIG = FastTD3Config(n_step=3, num_envs=4, batch_size=16, grad_updates_per_step=1, policy_delay=2, min_replay_size=32,
                       max_replay_size=400, actor_hidden=(16,), critic_hidden=(16,), num_atoms=11, v_min=-10.0,
                       v_max=60.0, tau=0.25, std_min=0.1, std_max=0.3)


def setup(config=CONFIG):
    env = VecEnv(make_toy(), config.num_envs, 10)
    networks = make_fasttd3_networks(jnp.zeros(2), env.action_size, config)
    optimizers = make_optimizers(config)
    state = jax.jit(make_prefill(env, config))(init_fasttd3_state(env, networks, optimizers, config, 0))
    return env, state, jax.jit(make_train_step(env, networks, optimizers, config, steps=1))


def changed(a, b) -> bool:
    return any(not np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def test_delayed_actor_updates_and_the_target_average():
    _, state, step = setup()
    first, metrics = step(state)
    assert int(metrics.updates) == 1 and int(metrics.actor_updates) == 0
    assert changed(first.params.q, state.params.q) and not changed(first.params.policy, state.params.policy)
    for target, before, online in zip(*(jax.tree.leaves(t) for t in (first.params.target_q, state.params.target_q,
                                                                       first.params.q))):
        np.testing.assert_allclose(target, 0.75 * before + 0.25 * online, rtol=1e-5, atol=1e-7)
    second, metrics = step(first)
    assert int(metrics.actor_updates) == 1 and changed(second.params.policy, first.params.policy)
    assert jax.tree.map(lambda x: (x.shape, x.dtype), second) == jax.tree.map(lambda x: (x.shape, x.dtype), state)


def test_each_environment_keeps_its_noise_std_until_its_episode_ends():
    env, state, step = setup()
    std = np.asarray(state.noise_std)
    assert std.shape == (4,) and np.all((0.1 <= std) & (std <= 0.3)) and len(set(std.tolist())) == 4
    for _ in range(25):
        steps_before = np.asarray(state.env_state.step_count)
        state, _ = step(state)
        new_std = np.asarray(state.noise_std)
        ended = np.asarray(state.env_state.step_count) <= steps_before  # reset: the count started again
        np.testing.assert_array_equal(new_std[~ended], std[~ended])
        assert np.all(new_std[ended] != std[ended]) and np.all((0.1 <= new_std) & (new_std <= 0.3))
        std = new_std


@pytest.mark.slow
def test_fasttd3_learns_the_toy_env():
    """The deterministic eval return after 600 policy steps of 16 envs ends at SAC's threshold for the same env
    (tests/algos/sac/test_learning.py), far above a random policy's 11.8 and standing still's 16.7 (the best
    possible is about 48)."""
    from rlfit.run.evaluate import make_evaluator

    config = FastTD3Config(n_step=3, num_envs=16, batch_size=128, grad_updates_per_step=2, min_replay_size=256,
                           max_replay_size=20_000, actor_hidden=(32, 32), critic_hidden=(64, 64), num_atoms=51,
                           v_min=-10.0, v_max=60.0, tau=0.05, discounting=0.95, std_min=0.05, std_max=0.4,
                           policy_noise=0.2, learning_rate=1e-3, actor_learning_rate=1e-3)
    env = VecEnv(make_toy(), config.num_envs, 50)
    networks = make_fasttd3_networks(jnp.zeros(2), env.action_size, config)
    optimizers = make_optimizers(config)
    state = jax.jit(make_prefill(env, config))(init_fasttd3_state(env, networks, optimizers, config, 0))
    step = jax.jit(make_train_step(env, networks, optimizers, config, steps=50), donate_argnums=0)
    for _ in range(12):
        state, metrics = step(state)
        assert bool(metrics.all_finite)
    evaluate = jax.jit(make_evaluator(VecEnv(make_toy(), 128, 50), networks.policy_logits,
                                      head=DETERMINISTIC_TANH))
    final = float(evaluate(state.params.policy, state.normalizer, jax.random.PRNGKey(7)).episode_reward)
    assert final >= 38.0, f"eval return {final:.1f} of at most 50"
