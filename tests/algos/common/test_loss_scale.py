"""Dynamic loss scaling (fp16): the scale follows a plain-Python reference, overflowing updates are skipped.
(Every algorithm's fp16 step: tests/algos/test_fp16.py.)"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from rlfit.algos.common.loss_scale import (
    GROWTH_INTERVAL,
    INITIAL_SCALE,
    MAX_SCALE,
    MIN_SCALE,
    adjust,
    all_finite,
    init_loss_scale,
    select,
    unscale,
)


def reference_scales(flags, scale=INITIAL_SCALE):
    """The scale after each update, written out in plain Python."""
    steps, out = 0, []
    for finite in flags:
        if not finite:
            scale, steps = scale / 2, 0
        elif steps + 1 >= GROWTH_INTERVAL:
            scale, steps = scale * 2, 0
        else:
            steps += 1
        scale = min(max(scale, MIN_SCALE), MAX_SCALE)
        out.append((scale, steps))
    return out


def test_scale_follows_the_reference():
    rng = np.random.default_rng(0)
    flags = list(rng.random(1000) > 0.002) + [True] * 450 + [False] * 40  # growth, overflow, and the floor
    loss_scale = init_loss_scale()
    step = jax.jit(adjust)
    got = []
    for finite in flags:
        loss_scale = step(loss_scale, jnp.asarray(finite))
        got.append((float(loss_scale.scale), int(loss_scale.finite_steps)))
    assert got == reference_scales(flags)
    assert any(s > INITIAL_SCALE for s, _ in got) and got[-1][0] == MIN_SCALE


def test_unscale_select_and_finiteness():
    grads = {"w": jnp.array([2.0, -4.0], jnp.float32), "b": jnp.array(8.0, jnp.float32)}
    unscaled = unscale(grads, init_loss_scale(4.0))
    np.testing.assert_allclose(unscaled["w"], [0.5, -1.0])
    np.testing.assert_allclose(unscaled["b"], 2.0)
    assert bool(all_finite(grads)) and not bool(all_finite({**grads, "b": jnp.array(jnp.inf)}))
    kept = select(jnp.asarray(False), grads, unscaled)
    np.testing.assert_array_equal(kept["w"], unscaled["w"])
    np.testing.assert_array_equal(select(jnp.asarray(True), grads, unscaled)["w"], grads["w"])
