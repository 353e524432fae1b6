"""PPO with fp16 network compute: an iteration keeps fp32 state, applies finite updates and skips overflowing ones."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from rlfit.config.schema import resolve
from rlfit.algos.common.loss_scale import INITIAL_SCALE, MAX_SCALE, init_loss_scale
from rlfit.planning.plan import make_plan
from rlfit.run.build import Trainer

from tests.algos.ppo.test_iteration import SIZES, avals


@pytest.fixture(scope="module")
def fp16_trainer(toy_env_name):
    config = resolve(toy_env_name, "smoke", None, SIZES + ["run.precision=fp16", "ppo.max_grad_norm=1.0"])
    return Trainer.build(config, make_plan(config))


def test_fp16_iteration_keeps_fp32_state_and_learns(fp16_trainer):
    state = fp16_trainer.init_state()
    assert float(state.loss_scale.scale) == INITIAL_SCALE
    params0 = jax.tree.map(np.array, state.params)
    iteration = jax.jit(fp16_trainer.train_iteration_fn(), donate_argnums=0)
    before = avals(state)
    skipped = 0
    for _ in range(2):
        state, metrics = iteration(state)
        skipped += int(metrics.skipped_updates)
        assert bool(metrics.all_finite) and int(metrics.skipped_updates) < 2 * 4  # most updates applied
    assert avals(state) == before and iteration._cache_size() == 1
    assert float(metrics.loss_scale) == INITIAL_SCALE / 2**skipped  # 16 updates: too few to grow the scale
    assert {leaf.dtype for leaf in jax.tree.leaves((state.params, state.opt_state, state.normalizer))} <= {
        np.dtype("float32"), np.dtype("int32")}
    changed = [not np.allclose(a, b) for a, b in zip(jax.tree.leaves(params0), jax.tree.leaves(state.params))]
    assert all(changed)


def test_fp16_overflow_skips_the_update_and_halves_the_scale(fp16_trainer):
    updates = 2 * 4  # num_updates_per_batch * num_minibatches
    state = fp16_trainer.init_state()._replace(loss_scale=init_loss_scale(MAX_SCALE))  # fp16 tops out at 65504
    params0 = jax.tree.map(np.array, state.params)
    state, metrics = jax.jit(fp16_trainer.train_iteration_fn())(state)
    assert int(metrics.skipped_updates) == updates
    assert float(state.loss_scale.scale) == MAX_SCALE / 2**updates
    for before, after in zip(jax.tree.leaves(params0), jax.tree.leaves(state.params)):
        np.testing.assert_array_equal(before, after)  # no skipped update left a trace
    assert bool(metrics.all_finite) and float(metrics.grad_norm) == 0.0
