"""SAC with fp16 network compute: fp32 state, dynamic loss scaling, overflowing updates skipped whole."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from rlfit.config.schema import resolve
from rlfit.algos.common.loss_scale import INITIAL_SCALE, MAX_SCALE, init_loss_scale
from rlfit.planning.plan import make_plan
from rlfit.run.build import Trainer

TOY = "tests.toy_env:make"


@pytest.fixture(scope="module")
def trainer():
    config = resolve(TOY, "smoke", overrides=["algo=sac", "run.precision=fp16"])
    return Trainer.build(config, make_plan(config))


def test_fp16_step_keeps_fp32_state_and_learns(trainer):
    state = trainer.init_state()
    assert float(state.loss_scale.scale) == INITIAL_SCALE
    params0 = jax.tree.map(np.array, state.params)
    step = jax.jit(trainer.train_iteration_fn(), donate_argnums=0)
    state, metrics = step(state)
    updates = int(metrics.updates) + int(metrics.skipped_updates)
    assert updates == 8 and int(metrics.updates) > 0  # 8 policy steps x 1 update, most applied
    assert bool(metrics.all_finite)
    assert float(metrics.loss_scale) == INITIAL_SCALE / 2 ** int(metrics.skipped_updates)
    assert int(state.grad_steps) == int(metrics.updates)
    assert {leaf.dtype for leaf in jax.tree.leaves((state.params, state.opt_state))} <= {
        np.dtype("float32"), np.dtype("int32")}
    changed = [not np.allclose(a, b) for a, b in zip(jax.tree.leaves(params0.policy), jax.tree.leaves(state.params.policy))]
    assert all(changed)
    row = trainer.learner.metrics_row(jax.device_get(metrics))
    assert row["loss_scale"] == float(metrics.loss_scale) and row["skipped_updates"] == int(metrics.skipped_updates)


def test_an_overflowing_update_is_skipped_whole_and_halves_the_scale(trainer):
    state = trainer.init_state()._replace(loss_scale=init_loss_scale(MAX_SCALE))  # fp16 tops out at 65504
    params0 = jax.tree.map(np.array, state.params)
    opt0 = jax.tree.map(np.array, state.opt_state)
    one_step = trainer.config.replace(sac={"policy_steps_per_iteration": 1})
    state, metrics = jax.jit(Trainer.build(one_step, make_plan(one_step)).train_iteration_fn())(state)
    assert (int(metrics.updates), int(metrics.skipped_updates)) == (0, 1)
    assert float(state.loss_scale.scale) == MAX_SCALE / 2
    for before, after in zip(jax.tree.leaves((params0, opt0)), jax.tree.leaves((state.params, state.opt_state))):
        np.testing.assert_array_equal(before, after)  # nothing of the skipped update is left, the target nets included
    assert bool(metrics.all_finite) and int(state.grad_steps) == 0
