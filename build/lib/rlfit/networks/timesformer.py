"""TimeSformer with divided space-time attention, as Hugging Face's `TimesformerModel` computes it, in Flax.

Bertasius et al. 2021, "Is Space-Time Attention All You Need for Video Understanding?". Per clip [B, T, H, W, C]:

1. Embeddings: each frame cut into P x P patches by Conv2d(C, D, P, stride P) -> N = (S / P)^2 tokens per frame
   (row-major over the patch grid); a CLS token is put in front of every frame's tokens and position embeddings
   [1, N + 1, D] added; then the CLS token is taken once and the patch tokens get time embeddings [1, T, D].
   Tokens: [B, 1 + N * T, D], CLS first, the rest patch-major (token 1 + n * T + t is patch n of frame t).
2. `depth` layers, each:
   - temporal: per patch, attention over its T frames: temporal_layernorm -> attention (qkv, output) ->
     temporal_dense, added to the patch tokens (the CLS token is left alone);
   - spatial: per frame, attention over that frame's N patches plus a copy of the CLS token: layernorm_before ->
     attention (qkv, output); the T CLS results are averaged back into one; added to all tokens;
   - MLP: layernorm_after -> Dense(4 D) -> GELU (exact erf form, not the tanh approximation) -> Dense(D); added.
3. A final LayerNorm; the output is the CLS token, [B, D]. Every LayerNorm has eps 1e-6. Attention is
   softmax(q k^T / sqrt(D / heads)) v with q, k, v from one Dense(3 D) split as [3, heads, D / heads].

No dropout or drop-path (HF's defaults are 0). As in HF, the frame count and image size are fixed by the
parameters (time and position embeddings); HF would interpolate other sizes, here they are an error.
rlfit's addition: when `features` != D a Dense named `projection` maps the CLS token to `features` (never pretrained).

Parameter names (Hugging Face `TimesformerModel` state dict -> Flax params here; Linear weights transposed,
the patch Conv2d weight [D, C, P, P] -> [P, P, C, D], LayerNorm weight -> scale):

    embeddings.patch_embeddings.projection.{weight,bias}   embeddings/patch_projection/{kernel,bias}
    embeddings.cls_token                                    embeddings/cls_token             [1, 1, D]
    embeddings.position_embeddings                          embeddings/position_embeddings   [1, N + 1, D]
    embeddings.time_embeddings                              embeddings/time_embeddings       [1, T, D]
    encoder.layer.{i}.temporal_layernorm                    layer_{i}/temporal_layernorm
    encoder.layer.{i}.temporal_attention.attention.qkv      layer_{i}/temporal_attention/qkv
    encoder.layer.{i}.temporal_attention.output.dense       layer_{i}/temporal_attention/output
    encoder.layer.{i}.temporal_dense                        layer_{i}/temporal_dense
    encoder.layer.{i}.layernorm_before                      layer_{i}/layernorm_before
    encoder.layer.{i}.attention.attention.qkv               layer_{i}/attention/qkv
    encoder.layer.{i}.attention.output.dense                layer_{i}/attention/output
    encoder.layer.{i}.layernorm_after                       layer_{i}/layernorm_after
    encoder.layer.{i}.intermediate.dense                    layer_{i}/intermediate
    encoder.layer.{i}.output.dense                          layer_{i}/output
    layernorm                                               layernorm

A `TimesformerForVideoClassification` checkpoint has the same names under `timesformer.` plus a `classifier`,
which the converter drops.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from rlfit.networks.conv2d import flax_conv
from rlfit.networks.frame_encoder import FrameEncoder

LN_EPS = 1e-6


class Preset(NamedTuple):
    """The width and depth of a TimeSformer; frames and image size come from the encoder spec."""

    patch_size: int
    hidden: int
    depth: int
    heads: int
    mlp_ratio: int = 4


PRESETS = {
    "small": Preset(patch_size=8, hidden=128, depth=4, heads=4),
    "base": Preset(patch_size=16, hidden=768, depth=12, heads=12),
}
"""small: trains on a CPU (64 px clips: 64 patches a frame); base: facebook/timesformer-base (224 px, 8 frames)."""


def _dense(features: int, dtype: Any, name: str, use_bias: bool = True) -> nn.Dense:
    return nn.Dense(features, use_bias=use_bias, dtype=dtype, param_dtype=jnp.float32, name=name)


def _layer_norm(dtype: Any, name: str) -> nn.LayerNorm:
    return nn.LayerNorm(epsilon=LN_EPS, dtype=dtype, param_dtype=jnp.float32, name=name)


class Attention(nn.Module):
    """HF's TimeSformerAttention: [L, S, D] -> [L, S, D], multi-head self-attention over the S axis."""

    heads: int
    qkv_bias: bool = True
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        length, size, width = x.shape
        head_dim = width // self.heads
        qkv = _dense(3 * width, self.dtype, "qkv", self.qkv_bias)(x).reshape(length, size, 3, self.heads, head_dim)
        query, key, value = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]  # [L, S, heads, head_dim]
        logits = jnp.einsum("lqhd,lkhd->lhqk", query, key).astype(jnp.float32) * head_dim ** -0.5
        weights = jax.nn.softmax(logits, axis=-1).astype(self.dtype)
        context = jnp.einsum("lhqk,lkhd->lqhd", weights, value).reshape(length, size, width)
        return _dense(width, self.dtype, "output")(context)


class Embeddings(nn.Module):
    """[B, T, S, S, C] -> tokens [B, 1 + N * T, D] (CLS first, then patch-major)."""

    patch_size: int
    hidden: int
    frames: int
    num_patches: int
    conv_impl: str = "native"
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        batch, time, height, width, channels = x.shape
        p = self.patch_size
        patches = nn.Conv(self.hidden, (p, p), strides=(p, p), padding="VALID", dtype=self.dtype,
                          param_dtype=jnp.float32, conv_general_dilated=flax_conv(self.conv_impl),
                          name="patch_projection")(x.reshape(batch * time, height, width,
                                                                                     channels))
        patches = patches.reshape(batch, time, -1, self.hidden)  # [B, T, N, D], N row-major over the patch grid
        normal = nn.initializers.truncated_normal(0.02)
        cls = self.param("cls_token", normal, (1, 1, self.hidden), jnp.float32)
        position = self.param("position_embeddings", normal, (1, self.num_patches + 1, self.hidden), jnp.float32)
        time_embeddings = self.param("time_embeddings", normal, (1, self.frames, self.hidden), jnp.float32)
        cls = (cls + position[:, :1]).astype(self.dtype)  # [1, 1, D]
        patches = patches + position[:, None, 1:].astype(self.dtype)  # per frame
        patches = patches.transpose(0, 2, 1, 3) + time_embeddings[:, None].astype(self.dtype)  # [B, N, T, D]
        patches = patches.reshape(batch, self.num_patches * time, self.hidden)
        return jnp.concatenate([jnp.broadcast_to(cls, (batch, 1, self.hidden)), patches], axis=1)


class Layer(nn.Module):
    """One divided space-time layer: tokens [B, 1 + N * T, D] -> [B, 1 + N * T, D]."""

    heads: int
    frames: int
    mlp_ratio: int = 4
    qkv_bias: bool = True
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, tokens: jax.Array) -> jax.Array:
        batch, length, width = tokens.shape
        time = self.frames
        patches = (length - 1) // time
        cls, x = tokens[:, :1], tokens[:, 1:]  # [B, 1, D], [B, N*T, D]

        # temporal: each patch attends over its T frames
        temporal = x.reshape(batch * patches, time, width)
        temporal = Attention(self.heads, self.qkv_bias, self.dtype, name="temporal_attention")(
            _layer_norm(self.dtype, "temporal_layernorm")(temporal))
        x = x + _dense(width, self.dtype, "temporal_dense")(temporal.reshape(batch, patches * time, width))

        # spatial: each frame attends over its N patches and its copy of the CLS token
        spatial = x.reshape(batch, patches, time, width).transpose(0, 2, 1, 3).reshape(batch * time, patches, width)
        cls_copies = jnp.broadcast_to(cls[:, None], (batch, time, 1, width)).reshape(batch * time, 1, width)
        spatial = jnp.concatenate([cls_copies, spatial], axis=1)  # [B*T, 1 + N, D]
        spatial = Attention(self.heads, self.qkv_bias, self.dtype, name="attention")(
            _layer_norm(self.dtype, "layernorm_before")(spatial))
        cls_residual = spatial[:, 0].reshape(batch, time, width).mean(axis=1, keepdims=True)  # [B, 1, D]
        residual = spatial[:, 1:].reshape(batch, time, patches, width).transpose(0, 2, 1, 3)
        tokens = jnp.concatenate([cls + cls_residual, x + residual.reshape(batch, patches * time, width)], axis=1)

        # MLP
        hidden = _layer_norm(self.dtype, "layernorm_after")(tokens)
        hidden = nn.gelu(_dense(self.mlp_ratio * width, self.dtype, "intermediate")(hidden), approximate=False)
        return tokens + _dense(width, self.dtype, "output")(hidden)


class TimeSformer(FrameEncoder):
    """[B, T, S, S, C] uint8 or float -> [B, features] (the final CLS token, projected when features != hidden).
    The fields every encoder has, the input scaling and the head: `FrameEncoder`."""

    features: int = 768
    frames: int = 8
    image_size: int = 224
    patch_size: int = 16
    hidden: int = 768
    depth: int = 12
    heads: int = 12
    mlp_ratio: int = 4
    qkv_bias: bool = True

    @nn.compact
    def __call__(self, frames: jax.Array) -> jax.Array:
        _, time, height, width, _ = frames.shape
        if time != self.frames or height != self.image_size or width != self.image_size:
            raise ValueError(f"this TimeSformer takes {self.frames} frames of {self.image_size}x{self.image_size}, "
                             f"got {time} of {height}x{width}")
        if self.image_size % self.patch_size or self.hidden % self.heads:
            raise ValueError(f"image size {self.image_size} must be a multiple of the patch size {self.patch_size} "
                             f"and hidden {self.hidden} a multiple of heads {self.heads}")
        x = self.prepare(frames)
        num_patches = (self.image_size // self.patch_size) ** 2
        tokens = Embeddings(self.patch_size, self.hidden, self.frames, num_patches, conv_impl=self.conv_impl,
                            dtype=self.dtype, name="embeddings")(x)
        for index in range(self.depth):
            tokens = Layer(self.heads, self.frames, self.mlp_ratio, self.qkv_bias, self.dtype,
                           name=f"layer_{index}")(tokens)
        return self.projection_head(_layer_norm(self.dtype, "layernorm")(tokens[:, 0]).astype(jnp.float32))  # CLS
