"""Dynamic loss scaling for fp16 network compute: keep small gradients from underflowing, skip overflows.

The loss is multiplied by `scale` before differentiation, so the fp16 backward pass carries gradients that
would otherwise round to zero; the fp32 gradients are divided by `scale` again before the optimizer sees
them. An update whose gradients are not all finite (fp16 overflowed) is skipped and the scale halved; after
`GROWTH_INTERVAL` finite updates in a row the scale doubles. All functions are pure and run inside `jit`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

INITIAL_SCALE = 2.0**15
GROWTH_INTERVAL = 200
MIN_SCALE = 1.0
MAX_SCALE = 2.0**24


class LossScale(NamedTuple):
    """The current scale and how many finite updates in a row it has seen."""

    scale: jax.Array
    """[] float32."""
    finite_steps: jax.Array
    """[] int32, finite updates since the scale last changed."""


def init_loss_scale(scale: float = INITIAL_SCALE) -> LossScale:
    return LossScale(jnp.asarray(scale, jnp.float32), jnp.asarray(0, jnp.int32))


def unscale(grads: Any, loss_scale: LossScale) -> Any:
    """Gradients of the scaled loss divided back to the loss's own scale (same tree, same dtypes)."""
    return jax.tree.map(lambda g: g / loss_scale.scale.astype(g.dtype), grads)


def all_finite(tree: Any) -> jax.Array:
    """[] bool: True when no leaf holds a NaN or infinity."""
    return jnp.all(jnp.array([jnp.all(jnp.isfinite(leaf)) for leaf in jax.tree.leaves(tree)]))


def adjust(loss_scale: LossScale, finite: jax.Array) -> LossScale:
    """The scale after one update: halved after an overflow, doubled after GROWTH_INTERVAL finite updates."""
    grown = loss_scale.finite_steps + 1 >= GROWTH_INTERVAL
    scale = jnp.where(finite, jnp.where(grown, loss_scale.scale * 2.0, loss_scale.scale), loss_scale.scale * 0.5)
    steps = jnp.where(finite & ~grown, loss_scale.finite_steps + 1, 0)
    return LossScale(jnp.clip(scale, MIN_SCALE, MAX_SCALE).astype(jnp.float32), steps.astype(jnp.int32))


def select(finite: jax.Array, updated: Any, kept: Any) -> Any:
    """`updated` where `finite`, else `kept` (leaf by leaf; the skipped update leaves no trace)."""
    return jax.tree.map(lambda new, old: jnp.where(finite, new, old), updated, kept)
