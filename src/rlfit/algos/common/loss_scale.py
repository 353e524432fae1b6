"""Dynamic loss scaling for fp16 network compute: keep small gradients from underflowing, skip overflows.

The loss is multiplied by `scale` before differentiation, so the fp16 backward pass carries gradients that
would otherwise round to zero; the fp32 gradients are divided by `scale` again before the optimizer sees
them. An update whose gradients are not all finite (fp16 overflowed) is skipped and the scale halved; after
`GROWTH_INTERVAL` finite updates in a row the scale doubles. All functions are pure and run inside `jit`;
every algorithm trains fp16 through `gradients_with` and `select`/`adjust`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Concatenate, NamedTuple, ParamSpec, Protocol, TypeVar

import jax
import jax.numpy as jnp

from rlfit.algos.contract import PyTree, TreeT

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


def unscale(grads: TreeT, loss_scale: LossScale) -> TreeT:
    """Gradients of the scaled loss divided back to the loss's own scale (same tree, same dtypes)."""
    unscaled: TreeT = jax.tree.map(lambda g: g / loss_scale.scale.astype(g.dtype), grads)
    return unscaled


def all_finite(tree: PyTree) -> jax.Array:
    """[] bool: True when no leaf holds a NaN or infinity."""
    return jnp.all(jnp.array([jnp.all(jnp.isfinite(leaf)) for leaf in jax.tree.leaves(tree)]))


def adjust(loss_scale: LossScale, finite: jax.Array) -> LossScale:
    """The scale after one update: halved after an overflow, doubled after GROWTH_INTERVAL finite updates."""
    grown = loss_scale.finite_steps + 1 >= GROWTH_INTERVAL
    scale = jnp.where(finite, jnp.where(grown, loss_scale.scale * 2.0, loss_scale.scale), loss_scale.scale * 0.5)
    steps = jnp.where(finite & ~grown, loss_scale.finite_steps + 1, 0)
    return LossScale(jnp.clip(scale, MIN_SCALE, MAX_SCALE).astype(jnp.float32), steps.astype(jnp.int32))


def select(finite: jax.Array, updated: TreeT, kept: TreeT) -> TreeT:
    """`updated` where `finite`, else `kept` (leaf by leaf; the skipped update leaves no trace)."""
    selected: TreeT = jax.tree.map(lambda new, old: jnp.where(finite, new, old), updated, kept)
    return selected


ParamsT = TypeVar("ParamsT", bound=PyTree)
AuxT = TypeVar("AuxT")
LossArgs = ParamSpec("LossArgs")


def gradients_with(loss_fn: Callable[Concatenate[ParamsT, LossArgs], tuple[jax.Array, AuxT]], loss_scale: LossScale | None
                   ) -> Callable[Concatenate[ParamsT, LossArgs], tuple[ParamsT, jax.Array, AuxT, jax.Array]]:
    """`args -> (gradients with respect to the first argument, loss, aux, [] bool: finite)` for
    `loss_fn(*args) -> (loss, aux)`: through the loss scale when there is one (the loss scaled before
    differentiation, the gradients unscaled after; finite: no gradient overflowed), directly otherwise (finite
    is then True and the NaN guard judges)."""

    def gradients(params: ParamsT, /, *args: LossArgs.args, **kwargs: LossArgs.kwargs
                  ) -> tuple[ParamsT, jax.Array, AuxT, jax.Array]:
        grads: ParamsT
        loss: jax.Array
        aux: AuxT
        if loss_scale is None:
            (loss, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, *args, **kwargs)
            return grads, loss, aux, jnp.asarray(True)

        def scaled(inner: ParamsT, /, *more: LossArgs.args, **named: LossArgs.kwargs
                   ) -> tuple[jax.Array, tuple[jax.Array, AuxT]]:
            loss, aux = loss_fn(inner, *more, **named)
            return loss * loss_scale.scale, (loss, aux)

        grads, (loss, aux) = jax.grad(scaled, has_aux=True)(params, *args, **kwargs)
        grads = unscale(grads, loss_scale)
        return grads, loss, aux, all_finite(grads)

    return gradients


class LossScaleMetrics(Protocol):
    """What `loss_scale_row` reads of an iteration's metrics."""

    @property
    def loss_scale(self) -> jax.Array:
        """[] the scale at the iteration's end (0 without fp16)."""

    @property
    def skipped_updates(self) -> jax.Array:
        """[] updates skipped for an overflow."""


def loss_scale_row(metrics: LossScaleMetrics) -> dict[str, float | int]:
    """The metrics.jsonl fields of an iteration's `loss_scale` and `skipped_updates` ({} without fp16)."""
    if float(metrics.loss_scale) <= 0:
        return {}
    return {"loss_scale": float(metrics.loss_scale), "skipped_updates": int(metrics.skipped_updates)}
