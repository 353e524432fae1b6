"""FastTD3 after an out-of-memory back-off (as `rlfit.run.loop` does it: the next smaller sizes, a Trainer rebuilt at
them, `Learner.resize`): half the environments, each with its own noise std, a new prefilled buffer laid out for
them, the parameters and optimizer states kept, and a training step that runs at the new sizes."""

from __future__ import annotations

import jax
import numpy as np

from rlfit.algos.registry import algorithm
from rlfit.config.schema import resolve
from rlfit.planning.plan import make_plan
from rlfit.run.trainer import Trainer


def test_resize_halves_the_environments_and_keeps_what_was_learned():
    config = resolve("tests.toy_env:make", "smoke", overrides=["algo=fasttd3", "env.episode_length=50"])
    old = Trainer.build(config, make_plan(config))
    state = old.init_state()
    sizes = algorithm("fasttd3").smaller_sizes(old.plan.sizes, "step")
    assert sizes.num_envs == 4 and sizes.max_replay_size == old.plan.sizes.max_replay_size
    plan = old.plan.with_sizes(sizes, config, (0, 0), "test")
    new = Trainer.build(config, plan, env=old.env)
    learned = jax.device_get((state.params, state.opt_state))  # resize donates the state's buffers
    resized = new.learner.resize(state, jax.random.PRNGKey(3))

    assert resized.noise_std.shape == (4,) and resized.replay.reward.shape[1] == 4
    assert int(resized.replay.size) == 40 // 4  # prefilled again: min_replay_size 40 in policy steps of 4
    kept = jax.device_get((resized.params, resized.opt_state))
    assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(kept), jax.tree.leaves(learned)))
    stepped, metrics = jax.jit(new.learner.step)(resized)
    assert bool(metrics.all_finite) and int(metrics.updates) == 2 * 8
