"""run.precision=bf16 (the g1 preset's, as FastTD3's AMP): the networks compute in bf16 while parameters, both
AdamW states, the normalizer and the replay buffer stay fp32; the step keeps every leaf's shape and dtype."""

from __future__ import annotations

import jax
import numpy as np

from rlfit.config.schema import resolve
from rlfit.planning.plan import make_plan
from rlfit.run.trainer import Trainer
from tests.conftest import TOY_ENV


def avals(tree):
    return [(leaf.shape, leaf.dtype, jax.typeof(leaf).weak_type) for leaf in jax.tree.leaves(tree)]


def test_bf16_compute_keeps_fp32_state():
    config = resolve(TOY_ENV, "smoke", None, ["algo=fasttd3", "run.precision=bf16"])
    trainer = Trainer.build(config, make_plan(config))
    state = trainer.init_state()
    before = avals(state)
    iteration = jax.jit(trainer.train_iteration_fn(), donate_argnums=0)
    for _ in range(2):
        state, metrics = iteration(state)
    assert avals(state) == before and iteration._cache_size() == 1
    assert bool(metrics.all_finite) and int(state.grad_steps) > 0
    kept = (state.params, state.opt_state, state.normalizer, state.replay.reward)
    assert {leaf.dtype for leaf in jax.tree.leaves(kept)} <= {np.dtype("float32"), np.dtype("int32")}
