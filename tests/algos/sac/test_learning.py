"""SAC, built as the runner builds it (`ALGORITHM.build` through `Trainer.build`), learns the toy point-reaching env
in a few seconds of CPU: its deterministic eval return ends far above a uniform random policy's and standing still's."""

from __future__ import annotations

import jax
import pytest

from rlfit.config.schema import resolve
from rlfit.planning.plan import make_plan
from rlfit.run.trainer import Trainer

EPISODE_LENGTH = 50
RANDOM_POLICY_RETURN = 11.8
"""Mean return of uniform random actions over 1024 episodes (measured; per-episode std 23.7)."""
STANDING_STILL = EPISODE_LENGTH * (1 - 2 / 3)
"""Return without moving: reward 1 - |p - t| per step, p and t uniform on [-1, 1], E|p - t| = 2/3."""
THRESHOLD = 38.0
"""Seeds 0-3 reached 44.6-46.0 after the same 20 x 50 policy steps (the best possible is about 48)."""

OVERRIDES = ("algo=sac", f"env.episode_length={EPISODE_LENGTH}", "sac.num_envs=16", "sac.batch_size=128",
             "sac.min_replay_size=256", "sac.max_replay_size=20000", "sac.learning_rate=1e-3",
             "sac.policy_hidden=[32,32]", "sac.q_hidden=[32,32]", "sac.policy_steps_per_iteration=50",
             "run.num_eval_envs=128")


@pytest.mark.slow
def test_sac_learns_the_toy_env():
    config = resolve("tests.toy_env:make", "default", overrides=OVERRIDES)
    trainer = Trainer.build(config, make_plan(config))
    state = trainer.init_state()  # the Learner's init: fresh parameters and a prefilled replay buffer
    train_step = jax.jit(trainer.learner.step, donate_argnums=0)
    for _ in range(20):
        state, metrics = train_step(state)
        assert bool(metrics.all_finite)
    evaluate = trainer.compile_evaluator(state)  # the runner's evaluator: the mean action on 128 fresh episodes
    final = float(evaluate(*trainer.learner.acting(state), jax.random.PRNGKey(7)).episode_reward)
    assert final >= THRESHOLD, f"eval return {final:.1f} of at most {EPISODE_LENGTH}"
    assert final >= max(RANDOM_POLICY_RETURN, STANDING_STILL) + 20
    assert 0.0 < float(metrics.alpha) < 1.0, "the temperature falls from 1 toward the target entropy"
