"""SAC learns the toy point-reaching env in a few seconds of CPU: its deterministic eval return ends far above
a uniform random policy's and standing still's."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from rlfit.algos.sac.config import SACConfig
from rlfit.algos.sac.networks import make_sac_networks
from rlfit.algos.sac.step import init_sac_state, make_prefill, make_train_step
from rlfit.algos.sac.update import make_optimizers
from rlfit.envs.vec_env import VecEnv
from rlfit.run.evaluate import make_evaluator
from tests.toy_env import make as make_toy

EPISODE_LENGTH = 50
RANDOM_POLICY_RETURN = 11.8
"""Mean return of uniform random actions over 1024 episodes (measured; per-episode std 23.7)."""
STANDING_STILL = EPISODE_LENGTH * (1 - 2 / 3)
"""Return without moving: reward 1 - |p - t| per step, p and t uniform on [-1, 1], E|p - t| = 2/3."""
THRESHOLD = 38.0
"""Seeds 0-3 reached 44.6-46.0 after the same 20 x 50 policy steps (the best possible is about 48)."""

CONFIG = SACConfig(num_envs=16, batch_size=128, min_replay_size=256, max_replay_size=20_000, learning_rate=1e-3,
                   policy_hidden=(32, 32), q_hidden=(32, 32))


@pytest.mark.slow
def test_sac_learns_the_toy_env():
    env = VecEnv(make_toy(), CONFIG.num_envs, EPISODE_LENGTH)
    networks = make_sac_networks(jnp.zeros(2), env.action_size, CONFIG)
    optimizers = make_optimizers(CONFIG)
    # rlfit's evaluator: the mean action on 128 fresh episodes
    evaluate = jax.jit(make_evaluator(VecEnv(make_toy(), 128, EPISODE_LENGTH), networks.policy_logits))
    state = jax.jit(make_prefill(env, CONFIG), donate_argnums=0)(init_sac_state(env, networks, optimizers, CONFIG, 0))
    train_step = jax.jit(make_train_step(env, networks, optimizers, CONFIG, steps=50), donate_argnums=0)
    for _ in range(20):
        state, metrics = train_step(state)
        assert bool(metrics.all_finite)
    final = float(evaluate(state.params.policy, state.normalizer, jax.random.PRNGKey(7)).episode_reward)
    assert final >= THRESHOLD, f"eval return {final:.1f} of at most {EPISODE_LENGTH}"
    assert final >= max(RANDOM_POLICY_RETURN, STANDING_STILL) + 20
    assert 0.0 < float(metrics.alpha) < 1.0, "the temperature falls from 1 toward the target entropy"
