"""Checksums of arrays computed where their shards live, the same however an array is split over devices.

A checkpoint's arrays are written shard by shard by the processes that hold them (`rlfit.checkpoint`), so no
process sees a whole array to hash its bytes. Instead each array's checksum is a sum over its elements of a
hash of (element bits, element position), in two independent 32-bit lanes: an integer sum wraps exactly
whatever order it is added in, so the partial sums per device and the compiler's reduction across devices give
the same 64 bits as one device adding everything. Changing any element, or moving one, changes each lane
with probability 1 - 2**-32 (the hash is MurmurHash3's 32-bit finalizer, a bijection that spreads every input
bit over the output).

Shapes: a leaf [R, ...] of any dtype; `rows` counts how many of its first rows the checksum covers (the rows
a checkpoint stores), so one compiled program serves however many rows a growing replay buffer holds.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

LANE_SEEDS = (0x9E3779B9, 0x7F4A7C15)
"""Constants that make the two lanes independent hashes of the same element."""


def mix32(h: jax.Array) -> jax.Array:
    """MurmurHash3's finalizer on uint32: a bijection whose every output bit depends on every input bit."""
    h = h ^ (h >> 16)
    h = h * jnp.uint32(0x85EBCA6B)
    h = h ^ (h >> 13)
    h = h * jnp.uint32(0xC2B2AE35)
    return h ^ (h >> 16)


def as_words(leaf: jax.Array) -> jax.Array:
    """The leaf's bits as uint32 [*shape] (1-, 2- and 4-byte dtypes, bool) or [*shape, 2] (8-byte dtypes)."""
    if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
        leaf = jax.random.key_data(leaf)
    if leaf.dtype == jnp.bool_:
        return leaf.astype(jnp.uint32)
    size = np.dtype(leaf.dtype).itemsize
    unsigned = {1: jnp.uint8, 2: jnp.uint16, 4: jnp.uint32, 8: jnp.uint32}[size]
    return jax.lax.bitcast_convert_type(leaf, unsigned).astype(jnp.uint32)


def leaf_fingerprint(leaf: jax.Array, rows: jax.Array) -> jax.Array:
    """[2] uint32: per lane, sum over the leaf's elements in its first `rows` rows (all of a scalar) of
    mix32(mix32(position + seed) ^ bits)."""
    words = as_words(leaf)
    if words.size == 0:
        return jnp.zeros((2,), jnp.uint32)
    position = jax.lax.iota(jnp.uint32, words.size).reshape(words.shape)
    counted = (jax.lax.broadcasted_iota(jnp.int32, words.shape, 0) < rows) if leaf.ndim else True
    lanes = [jnp.sum(jnp.where(counted, mix32(mix32(position + jnp.uint32(seed)) ^ words), jnp.uint32(0)),
                     dtype=jnp.uint32) for seed in LANE_SEEDS]
    return jnp.stack(lanes)


@jax.jit
def _all_fingerprints(leaves: list[jax.Array], rows: jax.Array) -> jax.Array:
    """[L, 2] uint32, one row per leaf (one program per state structure; `rows` [L] is an argument)."""
    return jnp.stack([leaf_fingerprint(leaf, rows[index]) for index, leaf in enumerate(leaves)]) if leaves else \
        jnp.zeros((0, 2), jnp.uint32)


def fingerprints(leaves: list[Any], rows: list[int]) -> list[str]:
    """Each leaf's checksum over its first `rows[i]` rows, as 16 hex digits. Over several processes a collective:
    every process calls it with its shards of the same arrays."""
    from rlfit.distributed import host_copy

    values = host_copy(_all_fingerprints(list(leaves), np.asarray(rows, np.int32)))
    return [f"{int(a):08x}{int(b):08x}" for a, b in values]
