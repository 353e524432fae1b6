"""fp16 network compute, for every algorithm: the state stays fp32, dynamic loss scaling applies finite updates and
skips an overflowing one whole (nothing of it left in the parameters or the optimizer) while halving the scale."""

from __future__ import annotations

from typing import NamedTuple

import jax
import numpy as np
import pytest

from rlfit.config.schema import resolve
from rlfit.algos.common.loss_scale import INITIAL_SCALE, MAX_SCALE, init_loss_scale
from rlfit.planning.plan import make_plan
from rlfit.run.trainer import Trainer
from tests.algos.ppo.test_step import SIZES

TOY = "tests.toy_env:make"


class Case(NamedTuple):
    overrides: tuple[str, ...]
    updates: int
    """Gradient updates in one iteration."""
    one_update: tuple[str, ...]
    """Overrides for an iteration of as few updates as the algorithm allows (for the overflow check)."""
    one_update_count: int


CASES = {
    "ppo": Case((*SIZES, "ppo.max_grad_norm=1.0"), 2 * 4, (), 2 * 4),  # num_updates_per_batch * num_minibatches
    "sac": Case(("algo=sac",), 8, ("sac.policy_steps_per_iteration=1",), 1),  # smoke: 8 policy steps x 1 update
}


def fp16_trainer(algo: str, *changes: str) -> Trainer:
    config = resolve(TOY, "smoke", None, [*CASES[algo].overrides, "run.precision=fp16", *changes])
    return Trainer.build(config, make_plan(config))


def avals(tree):
    return [(leaf.shape, leaf.dtype, jax.typeof(leaf).weak_type) for leaf in jax.tree.leaves(tree)]


@pytest.mark.parametrize("algo", sorted(CASES))
def test_fp16_iteration_keeps_fp32_state_and_learns(algo):
    trainer = fp16_trainer(algo)
    state = trainer.init_state()
    assert float(state.loss_scale.scale) == INITIAL_SCALE
    policy0 = jax.tree.map(np.array, trainer.learner.acting(state)[0])  # the acting network's parameters
    iteration = jax.jit(trainer.train_iteration_fn(), donate_argnums=0)
    before = avals(state)
    state, metrics = iteration(state)
    assert avals(state) == before and iteration._cache_size() == 1
    skipped = int(metrics.skipped_updates)
    assert int(metrics.updates) + skipped == CASES[algo].updates and skipped < CASES[algo].updates  # most applied
    assert bool(metrics.all_finite)
    assert float(metrics.loss_scale) == INITIAL_SCALE / 2**skipped  # too few updates to grow the scale
    assert {leaf.dtype for leaf in jax.tree.leaves((state.params, state.opt_state, state.normalizer))} <= {
        np.dtype("float32"), np.dtype("int32")}
    policy = trainer.learner.acting(state)[0]
    assert all(not np.allclose(a, b) for a, b in zip(jax.tree.leaves(policy0), jax.tree.leaves(policy)))
    row = trainer.learner.metrics_row(jax.device_get(metrics))
    assert row["loss_scale"] == float(metrics.loss_scale) and row["skipped_updates"] == skipped


@pytest.mark.parametrize("algo", sorted(CASES))
def test_an_overflowing_update_is_skipped_whole_and_halves_the_scale(algo):
    trainer = fp16_trainer(algo, *CASES[algo].one_update)
    state = trainer.init_state()._replace(loss_scale=init_loss_scale(MAX_SCALE))  # fp16 tops out at 65504
    before = jax.tree.map(np.array, (state.params, state.opt_state))
    state, metrics = jax.jit(trainer.train_iteration_fn())(state)
    updates = CASES[algo].one_update_count
    assert (int(metrics.updates), int(metrics.skipped_updates)) == (0, updates)
    assert float(state.loss_scale.scale) == MAX_SCALE / 2**updates
    for old, new in zip(jax.tree.leaves(before), jax.tree.leaves((state.params, state.opt_state))):
        np.testing.assert_array_equal(old, new)  # nothing of a skipped update is left (SAC's target nets included)
    assert bool(metrics.all_finite)
