"""Frames as every encoder takes them: uint8 or float [B, T, H, W, C] -> float, normalized per channel."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp


def prepare_frames(frames: jax.Array, mean: Sequence[float] | None, std: Sequence[float] | None,
                   dtype: Any = jnp.float32) -> jax.Array:
    """[B, T, H, W, C] uint8 (0..255) or float -> [B, T, H, W, C] `dtype`.

    uint8 is scaled to [0, 1]; a float input is taken as already in [0, 1]. With `mean` and `std` (one number per
    channel, C each) the result is `(x - mean) / std`, as torchvision and Hugging Face normalize their inputs.
    """
    if frames.ndim != 5:
        raise ValueError(f"an encoder takes frames [B, T, H, W, C], got shape {frames.shape}")
    x = frames.astype(jnp.float32)
    if frames.dtype == jnp.uint8:
        x = x / 255.0
    if mean is not None and std is not None:
        x = (x - jnp.asarray(mean, jnp.float32)) / jnp.asarray(std, jnp.float32)
    return x.astype(dtype)
