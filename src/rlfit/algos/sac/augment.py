"""Random-shift augmentation of camera frames (DrQ, arXiv:2004.13649): pad 4 pixels by repeating the border,
crop back to the original size at a random offset, one offset per sample shared by its T frames.

Shapes: frames [B, T, H, W, C] (any dtype; uint8 stays uint8).
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp

from rlfit.algos.offpolicy.replay import Batch
from rlfit.envs.pixels import PIXELS_KEY

PAD = 4


def random_shift(frames: jax.Array, key: jax.Array, pad: int = PAD) -> jax.Array:
    """[B, T, H, W, C] frames each shifted by up to `pad` pixels in x and y (border pixels repeated)."""
    batch, _, height, width, _ = frames.shape
    padded = jnp.pad(frames, ((0, 0), (0, 0), (pad, pad), (pad, pad), (0, 0)), mode="edge")
    offsets = jax.random.randint(key, (batch, 2), 0, 2 * pad + 1)

    def crop(clip: jax.Array, offset: jax.Array) -> jax.Array:
        return jax.lax.dynamic_slice(clip, (0, offset[0], offset[1], 0), (clip.shape[0], height, width, clip.shape[3]))

    return jax.vmap(crop)(padded, offsets)


def augment_batch(batch: Batch, key: jax.Array) -> Batch:
    """The batch with its observations' and next observations' frames shifted independently."""
    obs_key, next_key = jax.random.split(key)
    assert isinstance(batch.obs, Mapping) and isinstance(batch.next_obs, Mapping), "camera frames come in a dict"
    obs = {**batch.obs, PIXELS_KEY: random_shift(batch.obs[PIXELS_KEY], obs_key)}
    next_obs = {**batch.next_obs, PIXELS_KEY: random_shift(batch.next_obs[PIXELS_KEY], next_key)}
    return batch._replace(obs=obs, next_obs=next_obs)
