"""The DrQ image encoder: frames stacked on channels, four 3x3 convolutions, a dense layer, LayerNorm, tanh.

As in DrQ (Kostrikov et al. 2020) and SAC-AE (Yarats et al. 2019): 32 filters 3x3, the first with stride 2 and the
other three with stride 1, VALID padding, ReLU; flatten; Dense(features); LayerNorm; tanh. At 84x84 the flattened
convolution output is 35 * 35 * 32 = 39,200 wide; at 64x64, 25 * 25 * 32 = 20,000.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from rlfit.networks.conv2d import flax_conv
from rlfit.networks.frame_encoder import FrameEncoder


class Simple2DCNN(FrameEncoder):
    """[B, T, H, W, C] uint8 or float -> [B, features] in (-1, 1); the T frames become T * C input channels.
    The fields every encoder has, the input scaling and the head: `FrameEncoder`."""

    features: int = 50
    filters: int = 32

    @nn.compact
    def __call__(self, frames: jax.Array) -> jax.Array:
        x = self.prepare(frames)
        batch, time, height, width, channels = x.shape
        x = x.transpose(0, 2, 3, 1, 4).reshape(batch, height, width, time * channels)  # [B, H, W, T*C]
        for index, stride in enumerate((2, 1, 1, 1)):
            x = nn.Conv(self.filters, (3, 3), strides=(stride, stride), padding="VALID", dtype=self.dtype,
                        param_dtype=jnp.float32, conv_general_dilated=flax_conv(self.conv_impl),
                        name=f"conv_{index}")(x)
            x = nn.relu(x)
        return self.tanh_head(x.reshape(batch, -1))
