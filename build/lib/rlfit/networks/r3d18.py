"""R3D-18, the 18-layer 3D ResNet of torchvision's `torchvision.models.video.r3d_18`, in Flax.

The same layers, shapes and arithmetic as torchvision (Tran et al. 2018, "A Closer Look at Spatiotemporal
Convolutions"), so its Kinetics-400 weights load by name (`rlfit.networks.convert`):

    stem    Conv3d(3, 64, (3, 7, 7), stride (1, 2, 2), padding (1, 3, 3), no bias) + norm + ReLU
    layer1  2 BasicBlocks,  64 channels, stride 1
    layer2  2 BasicBlocks, 128 channels, the first with stride (2, 2, 2) and a shortcut Conv3d 1x1x1 stride 2 + norm
    layer3  2 BasicBlocks, 256 channels, likewise
    layer4  2 BasicBlocks, 512 channels, likewise
    AdaptiveAvgPool3d(1) -> [B, 512]

A BasicBlock is relu(norm(conv(relu(norm(conv(x))))) + shortcut(x)), each conv 3x3x3, padding 1, no bias.
Padding is written out (PyTorch pads symmetrically), so every shape is torchvision's: a 16x112x112 clip leaves the
stem as 16x56x56 and layer4 as 2x7x7. 33,166,272 parameters (torchvision's 33,371,472 less the 400-class fc).

rlfit's additions: (1) the torchvision classifier `fc` is dropped; when `features` != 512 a Dense layer named
`projection` maps the pooled 512 to `features` (it is never pretrained); with features == 512 the pooled vector is
the output. (2) `norm` picks the normalization:

- "frozen_bn": BatchNorm that always uses its stored statistics (`use_running_average=True`). The statistics live
  in the `batch_stats` collection and are never updated (RL batches are correlated and small per clip, so
  batch statistics would change what the network computes from one update to the next); pretrained weights bring
  Kinetics' statistics, and without them they are mean 0, variance 1, a learned scale and shift. torchvision's
  eval mode computes exactly this. eps 1e-5 as torch.
- "group": GroupNorm with 32 groups (eps 1e-5), for training from scratch, where there are no statistics to freeze.

The default (`default_norm`) is "frozen_bn" when pretrained weights are given, "group" otherwise.
(3) `conv_impl`: the 3D convolutions run natively or, on a CPU, as sums of 2D convolutions (rlfit.networks.conv3d);
the parameters are the same.

Parameter names (torchvision -> here): `stem.0` -> `stem_conv`, `stem.1` -> `stem_norm`, `layerS.B.conv1.0` ->
`layerS_B/conv1`, `layerS.B.conv1.1` -> `layerS_B/norm1`, `conv2.0`/`conv2.1` -> `conv2`/`norm2`,
`downsample.0`/`downsample.1` -> `downsample_conv`/`downsample_norm`.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from rlfit.networks.conv3d import Conv3D
from rlfit.networks.frame_encoder import FrameEncoder

NORMS = ("frozen_bn", "group")
STAGES = ((64, 1), (128, 2), (256, 2), (512, 2))
"""(channels, stride) of layer1..layer4; each has two BasicBlocks and the stride applies to its first block."""
BLOCKS_PER_STAGE = 2
WIDTH = 512
"""Channels of the pooled output of layer4."""
BN_EPS = 1e-5


def default_norm(pretrained: bool) -> str:
    """'frozen_bn' with pretrained weights (keep the statistics they were trained with), else 'group'."""
    return "frozen_bn" if pretrained else "group"


def _norm(kind: str, dtype: Any, name: str) -> nn.Module:
    if kind == "frozen_bn":
        return nn.BatchNorm(use_running_average=True, momentum=0.9, epsilon=BN_EPS, dtype=dtype,
                            param_dtype=jnp.float32, name=name)
    if kind == "group":
        return nn.GroupNorm(num_groups=32, epsilon=BN_EPS, dtype=dtype, param_dtype=jnp.float32, name=name)
    raise ValueError(f"unknown norm {kind!r}; one of {NORMS}")


def _conv(features: int, kernel: tuple[int, int, int], stride: int | tuple[int, int, int],
          padding: tuple[int, int, int], impl: str, dtype: Any, name: str) -> Conv3D:
    strides = (stride,) * 3 if isinstance(stride, int) else stride
    return Conv3D(features, kernel, strides=strides, padding=tuple((p, p) for p in padding), use_bias=False,
                  impl=impl, dtype=dtype, name=name)


class BasicBlock(nn.Module):
    """torchvision's video BasicBlock: [B, T, H, W, Cin] -> [B, T/s, H/s, W/s, channels]."""

    channels: int
    stride: int
    norm: str
    conv_impl: str = "native"
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        out = _conv(self.channels, (3, 3, 3), self.stride, (1, 1, 1), self.conv_impl, self.dtype, "conv1")(x)
        out = nn.relu(_norm(self.norm, self.dtype, "norm1")(out))
        out = _conv(self.channels, (3, 3, 3), 1, (1, 1, 1), self.conv_impl, self.dtype, "conv2")(out)
        out = _norm(self.norm, self.dtype, "norm2")(out)
        shortcut = x
        if self.stride != 1 or x.shape[-1] != self.channels:
            shortcut = _conv(self.channels, (1, 1, 1), self.stride, (0, 0, 0), self.conv_impl, self.dtype,
                             "downsample_conv")(x)
            shortcut = _norm(self.norm, self.dtype, "downsample_norm")(shortcut)
        return nn.relu(out + shortcut)


class R3D18(FrameEncoder):
    """[B, T, H, W, 3] uint8 or float -> [B, features] (the pooled 512, projected when features != 512). The
    fields every encoder has, the input scaling and the head: `FrameEncoder`."""

    features: int = WIDTH
    norm: str = "group"

    @nn.compact
    def __call__(self, frames: jax.Array) -> jax.Array:
        x = self.prepare(frames)
        x = _conv(64, (3, 7, 7), (1, 2, 2), (1, 3, 3), self.conv_impl, self.dtype, "stem_conv")(x)
        x = nn.relu(_norm(self.norm, self.dtype, "stem_norm")(x))
        for stage, (channels, stride) in enumerate(STAGES, start=1):
            for block in range(BLOCKS_PER_STAGE):
                x = BasicBlock(channels, stride if block == 0 else 1, self.norm, self.conv_impl, self.dtype,
                               name=f"layer{stage}_{block}")(x)
        return self.projection_head(x.astype(jnp.float32).mean(axis=(1, 2, 3)))  # AdaptiveAvgPool3d(1): [B, 512]
