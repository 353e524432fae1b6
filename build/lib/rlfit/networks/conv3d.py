"""A 3D convolution with two ways to compute it: XLA's native 3D convolution, or a sum of 2D convolutions.

XLA's CPU backend runs 3D convolutions far slower than 2D ones (on 2 cores, a Conv3d 16->32 3x3x3 stride (1, 2, 2)
over [2, 8, 32, 32, 16]: gradient 0.29 s native, 0.011 s as taps). "taps" writes the same convolution as
    y[t] = sum_i conv2d(x_padded[t * st + i], kernel[i])   for i in 0..kT-1,
one batched 2D convolution per temporal tap (rlfit.networks.conv2d's, fast inside loops too), which XLA's CPU
backend runs at 2D speed. The parameters are the same either way (`kernel` [kT, kH, kW, I, O], `bias` [O]), so
weights move freely between the two; `choose_impl` picks "taps" on a CPU and "native" on an accelerator (cuDNN's
3D convolutions are good).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from rlfit.networks.conv2d import IMPLS, choose_impl, conv2d

__all__ = ["IMPLS", "Conv3D", "choose_impl", "conv3d"]
Padding = str | Sequence[tuple[int, int]]


def conv3d(x: jax.Array, kernel: jax.Array, strides: Sequence[int], padding: Sequence[tuple[int, int]],
           impl: str) -> jax.Array:
    """x [B, T, H, W, I], kernel [kT, kH, kW, I, O], explicit (low, high) padding per axis -> [B, T', H', W', O]."""
    strides, padding = tuple(strides), tuple(tuple(p) for p in padding)
    if impl == "native":
        return jax.lax.conv_general_dilated(x, kernel, strides, padding,
                                            dimension_numbers=("NDHWC", "DHWIO", "NDHWC"))
    if impl != "taps":
        raise ValueError(f"unknown 3D convolution impl {impl!r}; one of {IMPLS}")
    x = jnp.pad(x, ((0, 0), padding[0], (0, 0), (0, 0), (0, 0)))
    batch, time, height, width, channels = x.shape
    taps, stride = kernel.shape[0], strides[0]
    out_time = (time - taps) // stride + 1
    out = None
    for tap in range(taps):
        frames = x[:, tap:tap + (out_time - 1) * stride + 1:stride].reshape(batch * out_time, height, width, channels)
        y = conv2d(frames, kernel[tap], strides[1:], padding[1:], "taps")
        out = y if out is None else out + y
    return out.reshape(batch, out_time, *out.shape[1:])


class Conv3D(nn.Module):
    """nn.Conv for [B, T, H, W, C] with a choice of computation; the same `kernel`/`bias` parameters as nn.Conv."""

    features: int
    kernel_size: tuple[int, int, int]
    strides: tuple[int, int, int] = (1, 1, 1)
    padding: Padding = "SAME"
    use_bias: bool = True
    impl: str = "native"
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        kernel = self.param("kernel", nn.initializers.lecun_normal(),
                            (*self.kernel_size, x.shape[-1], self.features), jnp.float32)
        padding = self.padding
        if isinstance(padding, str):
            padding = jax.lax.padtype_to_pads(x.shape[1:4], self.kernel_size, self.strides, padding)
        y = conv3d(x.astype(self.dtype), kernel.astype(self.dtype), self.strides, padding, self.impl)
        if self.use_bias:
            y = y + self.param("bias", nn.initializers.zeros, (self.features,), jnp.float32).astype(self.dtype)
        return y
