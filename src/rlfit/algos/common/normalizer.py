"""Running mean/variance of observations (Chan et al. parallel update), as pure functions on pytrees.

Integer leaves (uint8 camera frames) are not normalized: their statistics are a placeholder [] and they pass
through unchanged (an encoder scales them).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from rlfit.algos.contract import Observation, PyTree

STD_MIN, STD_MAX = 1e-6, 1e6


class RunningStats(NamedTuple):
    """Statistics of every observation leaf seen so far."""

    count: jax.Array  # type: ignore[assignment]  # shadows tuple.count; the name is in every checkpoint and policy file
    """[] float32 number of observations."""
    mean: PyTree
    """Pytree like one observation: per-feature mean."""
    sum_sq_dev: PyTree
    """Pytree like one observation: per-feature sum of squared deviations (M2)."""


def init_stats(obs_example: Observation) -> RunningStats:
    """Empty statistics for observations shaped like `obs_example` (one unbatched observation)."""
    zeros = jax.tree.map(lambda x: jnp.zeros(() if is_integer(x) else jnp.shape(x), jnp.float32), obs_example)
    return RunningStats(jnp.zeros((), jnp.float32), zeros, zeros)


def is_integer(x: ArrayLike) -> bool:
    """True for integer leaves (camera frames), which are neither counted nor normalized."""
    return bool(jnp.issubdtype(jnp.result_type(x), jnp.integer))


def update_stats(stats: RunningStats, batch: Observation) -> RunningStats:
    """Adds a batch [..., *obs_shape] (any number of leading axes) to `stats`."""
    leaf_ndim = jax.tree.map(jnp.ndim, stats.mean)
    flat = jax.tree.map(lambda x, nd: None if is_integer(x) else x.reshape((-1,) + x.shape[x.ndim - nd:]).astype(
        jnp.float32), batch, leaf_ndim)
    counted = jax.tree.leaves(flat)
    if not counted:
        return stats
    batch_count = jnp.asarray(counted[0].shape[0], jnp.float32)
    total = stats.count + batch_count

    def merge_mean(mean: jax.Array, x: jax.Array | None) -> jax.Array:
        if x is None:
            return mean
        return mean + (jnp.mean(x, axis=0) - mean) * (batch_count / total)

    def merge_m2(m2: jax.Array, mean: jax.Array, x: jax.Array | None) -> jax.Array:
        if x is None:
            return m2
        batch_mean = jnp.mean(x, axis=0)
        batch_m2 = jnp.sum((x - batch_mean) ** 2, axis=0)
        delta = batch_mean - mean
        return m2 + batch_m2 + delta**2 * stats.count * batch_count / total

    mean = jax.tree.map(merge_mean, stats.mean, flat, is_leaf=lambda x: x is None)
    m2 = jax.tree.map(merge_m2, stats.sum_sq_dev, stats.mean, flat, is_leaf=lambda x: x is None)
    return RunningStats(total, mean, m2)


def std(stats: RunningStats) -> PyTree:
    """Per-feature standard deviation, clipped to [1e-6, 1e6]."""
    count = jnp.maximum(stats.count, 1.0)
    deviations: PyTree = jax.tree.map(lambda m2: jnp.clip(jnp.sqrt(m2 / count), STD_MIN, STD_MAX), stats.sum_sq_dev)
    return deviations


def normalize(stats: RunningStats, obs: Observation) -> Observation:
    """(obs - mean) / std, leaf by leaf; identity while no observation has been seen."""
    seen = stats.count > 0
    normalized: Observation = jax.tree.map(lambda x, m, s: x if is_integer(x) else jnp.where(seen, (x - m) / s, x),
                                           obs, stats.mean, std(stats))
    return normalized
