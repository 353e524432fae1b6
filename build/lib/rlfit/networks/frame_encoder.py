"""What the four camera-frame encoders share: their settings, how they take frames, and their two output heads.

`FrameEncoder` is the base of Simple2DCNN, Simple3DCNN, R3D18 and TimeSformer: the fields every one has
(`features`, the per-channel input `mean` and `std`, `conv_impl`, `dtype`), `prepare` (frames [B, T, H, W, C]
uint8 or float -> `dtype`, normalized; `rlfit.networks.frames`) and the heads:

- `tanh_head` (the DrQ CNNs): Dense(features) named `dense` -> LayerNorm named `norm` -> tanh, as float32;
- `projection_head` (the pretrained networks): their own output, or a Dense(features) named `projection` when
  `features` differs from its width (the projection is never pretrained).

The heads create their layers under the encoder's own scope with those names, so the parameter trees are the
ones each encoder always had.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from rlfit.networks.frames import prepare_frames


class FrameEncoder(nn.Module):
    """The base of the camera-frame encoders: [B, T, H, W, C] uint8 or float -> [B, features].

    Subclasses set their own default `features`, add their fields after these, and build with keywords."""

    features: int = 50
    """Width of the output [B, features]."""
    mean: Sequence[float] | None = None
    """Per-channel input mean (C numbers) subtracted after scaling to [0, 1]; None: no normalization."""
    std: Sequence[float] | None = None
    """Per-channel input standard deviation (C numbers); with `mean`."""
    conv_impl: str = "native"
    """How the convolutions are computed (rlfit.networks.conv2d, conv3d): 'native' or 'taps' (fast on a CPU); the
    same parameters either way."""
    dtype: Any = jnp.float32
    """The compute dtype; parameters stay float32."""

    def prepare(self, frames: jax.Array) -> jax.Array:
        """frames [B, T, H, W, C] -> [B, T, H, W, C] `dtype`, scaled to [0, 1] and normalized by `mean`, `std`."""
        return prepare_frames(frames, self.mean, self.std, self.dtype)

    def tanh_head(self, x: jax.Array) -> jax.Array:
        """[B, D] -> Dense(features) `dense` -> LayerNorm `norm` -> tanh -> [B, features] float32 in (-1, 1)."""
        x = nn.Dense(self.features, dtype=self.dtype, param_dtype=jnp.float32, name="dense")(x)
        x = nn.LayerNorm(dtype=self.dtype, param_dtype=jnp.float32, name="norm")(x)
        return jnp.tanh(x).astype(jnp.float32)

    def projection_head(self, x: jax.Array) -> jax.Array:
        """[B, D] -> itself when D == features, else Dense(features) `projection` (float32) -> [B, features]."""
        if self.features != x.shape[-1]:
            x = nn.Dense(self.features, param_dtype=jnp.float32, name="projection")(x)
        return x
