"""Checksums of arrays computed where their shards live, the same however an array is split over devices.

A checkpoint's arrays are written shard by shard by the processes that hold them (`rlfit.checkpoints.format`), so no
process sees a whole array to hash its bytes. Instead each array's checksum is a sum over its elements of a
hash of (element bits, element position), in two independent 32-bit lanes: an integer sum wraps exactly
whatever order it is added in, so the partial sums per device and the compiler's reduction across devices give
the same 64 bits as one device adding everything. The hash is MurmurHash3's 32-bit finalizer, a bijection that
spreads every input bit over the output: one changed element changes both lanes for certain, and any other
change (several elements, moved ones) leaves a lane unchanged with probability about 2**-32.

Shapes: a leaf [R, ...] of any dtype; `rows` counts how many of its first rows the checksum covers (the rows
a checkpoint stores), so one compiled program serves however many rows a growing replay buffer holds.
"""

from __future__ import annotations

import functools
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
    if jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key):
        leaf = jax.random.key_data(leaf)
    if leaf.dtype == jnp.bool_:
        return leaf.astype(jnp.uint32)
    size = np.dtype(leaf.dtype).itemsize
    unsigned = {1: jnp.uint8, 2: jnp.uint16, 4: jnp.uint32, 8: jnp.uint32}[size]
    return jax.lax.bitcast_convert_type(leaf, unsigned).astype(jnp.uint32)


SEPARATE_WORDS = 1 << 22
"""Leaves of at least this many 32-bit words, and leaves split over devices, are hashed each in a pass of its
own, where their shards live; the other (small, whole on every device) ones together in one pass over their
concatenation (a state has hundreds of small leaves, and a program with one reduction per leaf takes seconds to
compile; this one takes a fraction of that)."""


def element_hashes(words: jax.Array, position: jax.Array, counted: jax.Array | bool) -> jax.Array:
    """[*words.shape, 2] uint32: per lane, mix32(mix32(position + seed) ^ bits) where `counted` (bool, broadcast
    against `words`; True: every element), else 0."""
    lanes = [jnp.where(counted, mix32(mix32(position + jnp.uint32(seed)) ^ words), jnp.uint32(0))
             for seed in LANE_SEEDS]
    return jnp.stack(lanes, axis=-1)


def leaf_fingerprint(leaf: jax.Array, rows: jax.Array) -> jax.Array:
    """[2] uint32: per lane, the sum of `element_hashes` over the leaf's elements in its first `rows` rows (all of
    a scalar), positions counted in C order."""
    words = as_words(leaf)
    if words.size == 0:
        return jnp.zeros((2,), jnp.uint32)
    position = jax.lax.iota(jnp.uint32, words.size).reshape(words.shape)
    counted = (jax.lax.broadcasted_iota(jnp.int32, words.shape, 0) < rows) if leaf.ndim else True
    return jnp.sum(element_hashes(words, position, counted), axis=tuple(range(words.ndim)), dtype=jnp.uint32)


def joint_fingerprints(leaves: list[jax.Array], rows: jax.Array) -> jax.Array:
    """[L, 2] uint32: `leaf_fingerprint` of each leaf, computed in one pass over the leaves' words laid end to end
    (each word's leaf found by a running count of leaf starts, its position and row within that leaf from it)."""
    words = [as_words(leaf).reshape(-1) for leaf in leaves]
    sizes = np.array([w.size for w in words], np.int64)
    if not sizes.sum():
        return jnp.zeros((len(leaves), 2), jnp.uint32)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    per_row = np.array([max(1, w.size // leaf.shape[0]) if leaf.ndim and leaf.shape[0] else 1
                        for w, leaf in zip(words, leaves)], np.uint32)
    scalar = np.array([leaf.ndim == 0 for leaf in leaves])
    flat = jnp.concatenate(words)
    # built from the leaves' shapes alone, so XLA would fold it while compiling (slowly): the barrier keeps it a
    # computation
    marks = jax.lax.optimization_barrier(jnp.zeros(flat.shape, jnp.int32)).at[starts[1:]].add(1, mode="drop")
    leaf_of = jnp.cumsum(marks)
    position = jax.lax.iota(jnp.uint32, flat.size) - jnp.asarray(starts, jnp.uint32)[leaf_of]
    row = (position // jnp.asarray(per_row)[leaf_of]).astype(jnp.int32)
    counted = jnp.asarray(scalar)[leaf_of] | (row < rows[leaf_of])
    return jax.ops.segment_sum(element_hashes(flat, position, counted), leaf_of, num_segments=len(leaves))


@functools.partial(jax.jit, static_argnames="separate")
def _all_fingerprints(leaves: list[jax.Array], rows: jax.Array, separate: tuple[int, ...]) -> jax.Array:
    """[L, 2] uint32, one row per leaf: the `separate` leaves each in its own pass, the rest in one (one program
    per state structure; `rows` [L] is an argument)."""
    joint = [i for i in range(len(leaves)) if i not in separate]
    result = jnp.zeros((len(leaves), 2), jnp.uint32)
    if joint:
        picked = np.array(joint)
        result = result.at[picked].set(joint_fingerprints([leaves[i] for i in joint], rows[picked]))
    for i in separate:
        result = result.at[i].set(leaf_fingerprint(leaves[i], rows[i]))
    return result


def hashed_apart(leaf: Any) -> bool:
    """Whether a leaf gets a pass of its own: a large one, or one split over devices (laid end to end with the
    others, its shards would be moved between devices first)."""
    sharding = getattr(leaf, "sharding", None)
    split = sharding is not None and not sharding.is_fully_replicated
    words_per_element = max(1, getattr(leaf.dtype, "itemsize", 4) // 4)
    return split or int(np.prod(np.shape(leaf))) * words_per_element >= SEPARATE_WORDS


def fingerprints(leaves: list[Any], rows: list[int]) -> list[str]:
    """Each leaf's checksum over its first `rows[i]` rows, as 16 hex digits. Over several processes a collective:
    every process calls it with its shards of the same arrays."""
    from rlfit.parallel.distributed import host_copy

    separate = tuple(i for i, leaf in enumerate(leaves) if hashed_apart(leaf))
    values = host_copy(_all_fingerprints(list(leaves), np.asarray(rows, np.int32), separate))
    return [f"{int(a):08x}{int(b):08x}" for a, b in values]
