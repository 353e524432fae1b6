"""A 2D convolution whose gradient XLA's CPU backend runs fast inside loops (`lax.scan`, `fori_loop`).

Training steps are loops: SAC scans policy steps and gradient updates, PPO its epochs and minibatches. Inside a
loop body XLA's CPU backend leaves the two convolutions of a convolution's gradient in the shapes autodiff writes
them (feature and batch axes swapped), which it then runs with a naive loop nest (jax issue 12868): on 2 cores
a simple2dcnn forward+backward of 32 clips took 0.100 s alone and 1.340 s a step inside a 3-step `lax.scan`
(`benchmarks/cpu_compile_options.py`, XLA's defaults; 0.055 s a step in the scan with this module and rlfit's CPU options).
`conv2d` computes the same convolution and gradients with a custom VJP whose backward pass
is written in the layout XLA runs fast anywhere:

    dx = conv(dy dilated by the stride and padded by k - 1, the kernel rotated 180 degrees with I and O swapped)
    dW[i, j] = x_tap(i, j)^T @ dy     (one matrix product per kernel tap, contracted over batch and positions)

It is the "taps" computation (rlfit.networks.conv3d's name for the CPU's way, which `choose_impl` picks on a CPU);
on an accelerator XLA's own ("native") is left alone. The parameters are the same either way; `flax_conv` gives
Flax's `nn.Conv` the chosen function.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp

IMPLS = ("native", "taps")
"""How rlfit's encoders compute their convolutions: XLA's own, or the CPU's way (this module; 3D as 2D taps)."""
DIMENSIONS = ("NHWC", "HWIO", "NHWC")


def choose_impl(platform: str) -> str:
    """'taps' on a CPU, 'native' on an accelerator (cuDNN's convolutions and their gradients are good)."""
    return "taps" if platform == "cpu" else "native"


def explicit_padding(x_shape: Sequence[int], kernel_shape: Sequence[int], strides: Sequence[int],
                     padding: str | Sequence[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """(low, high) padding of H and W for a padding string (VALID, SAME, ...) or explicit pairs."""
    if isinstance(padding, str):
        return tuple(jax.lax.padtype_to_pads(tuple(x_shape[1:3]), tuple(kernel_shape[:2]), tuple(strides), padding))
    return tuple((int(low), int(high)) for low, high in padding)


def _native(x: jax.Array, kernel: jax.Array, strides: tuple[int, ...], padding: tuple[tuple[int, int], ...]):
    return jax.lax.conv_general_dilated(x, kernel, strides, padding, dimension_numbers=DIMENSIONS)


@partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def _taps(x: jax.Array, kernel: jax.Array, strides: tuple[int, ...], padding: tuple[tuple[int, int], ...]):
    return _native(x, kernel, strides, padding)


def _forward(x, kernel, strides, padding):
    return _native(x, kernel, strides, padding), (x, kernel)


def _backward(strides, padding, residuals, dy):
    x, kernel = residuals
    taps_h, taps_w, in_channels, out_channels = kernel.shape
    padded = jnp.pad(x, ((0, 0), padding[0], padding[1], (0, 0)))
    _, out_h, out_w, _ = dy.shape
    (stride_h, stride_w) = strides

    def tap(i: int, j: int) -> jax.Array:  # [B, out_h, out_w, I]: the inputs kernel tap (i, j) multiplies
        return padded[:, i:i + stride_h * (out_h - 1) + 1:stride_h, j:j + stride_w * (out_w - 1) + 1:stride_w]

    if strides == (1, 1):  # a convolution over the batch: channels as the batch, the batch as the features
        d_kernel = jax.lax.conv_general_dilated(padded.transpose(3, 1, 2, 0), dy.transpose(1, 2, 0, 3), (1, 1),
                                                "VALID", dimension_numbers=DIMENSIONS)
        d_kernel = d_kernel[:, :taps_h, :taps_w].transpose(1, 2, 0, 3).astype(kernel.dtype)
    else:
        flat_dy = dy.reshape(-1, out_channels)
        d_kernel = jnp.stack([jnp.stack([tap(i, j).reshape(-1, in_channels).T @ flat_dy for j in range(taps_w)])
                              for i in range(taps_h)]).astype(kernel.dtype)
    # rows/columns of the padded input no output reads (a stride that does not divide evenly)
    unused_h = padded.shape[1] - (stride_h * (out_h - 1) + taps_h)
    unused_w = padded.shape[2] - (stride_w * (out_w - 1) + taps_w)
    spread = jax.lax.pad(dy, jnp.zeros((), dy.dtype), ((0, 0, 0), (taps_h - 1, taps_h - 1 + unused_h, stride_h - 1),
                                                        (taps_w - 1, taps_w - 1 + unused_w, stride_w - 1), (0, 0, 0)))
    rotated = kernel[::-1, ::-1].swapaxes(2, 3)
    d_padded = jax.lax.conv_general_dilated(spread, rotated, (1, 1), "VALID", dimension_numbers=DIMENSIONS)
    d_x = d_padded[:, padding[0][0]:padding[0][0] + x.shape[1], padding[1][0]:padding[1][0] + x.shape[2]]
    return d_x.astype(x.dtype), d_kernel


_taps.defvjp(_forward, _backward)


def conv2d(x: jax.Array, kernel: jax.Array, strides: Sequence[int], padding: str | Sequence[tuple[int, int]],
           impl: str) -> jax.Array:
    """x [B, H, W, I], kernel [kH, kW, I, O] -> [B, H', W', O] (padding a string or (low, high) per axis)."""
    if impl not in IMPLS:
        raise ValueError(f"unknown 2D convolution impl {impl!r}; one of {IMPLS}")
    strides = tuple(int(s) for s in strides)
    pads = explicit_padding(x.shape, kernel.shape, strides, padding)
    return (_taps if impl == "taps" else _native)(x, kernel, strides, pads)


def flax_conv(impl: str) -> Callable[..., Any]:
    """A `conv_general_dilated` for Flax's `nn.Conv(..., conv_general_dilated=...)` computing with `impl`
    (NHWC inputs, no dilation, no feature groups: what rlfit's encoders use)."""
    if impl == "native":
        return jax.lax.conv_general_dilated

    def conv(lhs, rhs, window_strides, padding, lhs_dilation=None, rhs_dilation=None, dimension_numbers=None,
             feature_group_count=1, precision=None, **_):
        dilated = any(d != 1 for d in (lhs_dilation or ()) + (rhs_dilation or ()))
        if lhs.ndim != 4 or dilated or feature_group_count != 1:
            raise ValueError("the taps convolution takes 2D NHWC convolutions without dilation or groups")
        return conv2d(lhs, rhs, window_strides, padding, impl)

    return conv
