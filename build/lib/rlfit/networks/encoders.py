"""The encoder registry: a spec (what a policy file records) -> a Flax module, and the choice for `auto`.

Every encoder maps frames [B, T, H, W, C] (uint8, scaled to [0, 1] inside, or float in [0, 1]) to float
[B, features], after the spec's per-channel input normalization `(x - mean) / std` when the spec has one.

| name        | for                          | output                      | module                           |
|-------------|------------------------------|-----------------------------|----------------------------------|
| simple2dcnn | CPU, few frames (DrQ)        | tanh(LayerNorm(Dense))      | rlfit.networks.simple2dcnn       |
| simple3dcnn | CPU, more frames             | tanh(LayerNorm(Dense))      | rlfit.networks.simple3dcnn       |
| r3d18       | GPU; torchvision weights     | pooled 512 (or projected)   | rlfit.networks.r3d18             |
| timesformer | GPU; Hugging Face weights    | CLS token (or projected)    | rlfit.networks.timesformer       |

Each module is a `rlfit.networks.frame_encoder.FrameEncoder`: the fields they share, the input scaling and the
two output heads live there.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from rlfit.errors import UserError, did_you_mean
from rlfit.networks import r3d18, timesformer
from rlfit.networks.conv3d import IMPLS, choose_impl
from rlfit.networks.simple2dcnn import Simple2DCNN
from rlfit.networks.simple3dcnn import Simple3DCNN

ENCODERS = ("simple2dcnn", "simple3dcnn", "r3d18", "timesformer")
CPU_2D_MAX_FRAMES = 4
"""On a CPU, `auto` stacks up to this many frames in the 2D CNN; more go to the 3D CNN."""
KINETICS_MEAN = (0.43216, 0.394666, 0.37645)
KINETICS_STD = (0.22803, 0.22145, 0.216989)
"""torchvision's input normalization for its Kinetics-400 video models (r3d_18's weights were trained with it)."""


class EncoderSpec(NamedTuple):
    """What an encoder is: enough to rebuild it (the policy file and export read this, never the weights' shapes)."""

    name: str
    """One of ENCODERS."""
    features: int
    """Width of the output [B, features]."""
    frames: int
    """T, frames per clip."""
    image_size: int
    """H = W of each frame in pixels."""
    channels: int = 3
    """C, channels per frame (3 for RGB)."""
    norm: str = ""
    """r3d18 only: 'frozen_bn' or 'group' ('' = r3d18.default_norm(pretrained) via `resolve`)."""
    preset: str = ""
    """timesformer only: a key of timesformer.PRESETS ('' = 'small')."""
    mean: tuple[float, ...] | None = None
    """Per-channel input mean (C numbers) subtracted after scaling to [0, 1]; None: no normalization."""
    std: tuple[float, ...] | None = None
    """Per-channel input standard deviation (C numbers); with `mean`."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: tuples become lists."""
        out = self._asdict()
        out["mean"] = None if self.mean is None else list(self.mean)
        out["std"] = None if self.std is None else list(self.std)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EncoderSpec:
        """The inverse of `to_dict`; unknown keys are an error (a newer policy file), missing ones take defaults."""
        unknown = sorted(set(data) - set(cls._fields))
        if unknown:
            raise UserError(f"encoder spec has unknown keys {unknown}; this rlfit knows {list(cls._fields)}: "
                            "upgrade rlfit to read this policy file")
        values = dict(data)
        for key in ("mean", "std"):
            if values.get(key) is not None:
                values[key] = tuple(float(v) for v in values[key])
        return validate(cls(**values))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def input_shape(self, batch: int) -> tuple[int, int, int, int, int]:
        """[B, T, H, W, C] of the frames this encoder takes."""
        return (batch, self.frames, self.image_size, self.image_size, self.channels)


def validate(spec: EncoderSpec) -> EncoderSpec:
    """`spec` unchanged, or a one-line UserError naming the setting that does not fit."""
    if spec.name not in ENCODERS:
        raise UserError(f"network.encoder: unknown encoder {spec.name!r}{did_you_mean(spec.name, ENCODERS)}; "
                        f"choose one of {', '.join(ENCODERS)} or auto")
    for field in ("features", "frames", "image_size", "channels"):
        if int(getattr(spec, field)) < 1:
            raise UserError(f"encoder {field} must be at least 1, got {getattr(spec, field)}")
    if (spec.mean is None) != (spec.std is None):
        raise UserError("encoder input normalization needs both mean and std (or neither)")
    for key in ("mean", "std"):
        value = getattr(spec, key)
        if value is not None and len(value) != spec.channels:
            raise UserError(f"encoder input {key} has {len(value)} numbers for {spec.channels} channels; give one "
                            "per channel")
    if spec.std is not None and min(spec.std) <= 0:
        raise UserError(f"encoder input std must be positive, got {list(spec.std)}")
    if spec.norm and (spec.name != "r3d18" or spec.norm not in r3d18.NORMS):
        raise UserError(f"encoder norm {spec.norm!r} applies only to r3d18 and is one of {', '.join(r3d18.NORMS)}")
    if spec.preset and (spec.name != "timesformer" or spec.preset not in timesformer.PRESETS):
        raise UserError(f"encoder preset {spec.preset!r} applies only to timesformer and is one of "
                        f"{', '.join(timesformer.PRESETS)}")
    if spec.name == "timesformer":
        patch = timesformer.PRESETS[spec.preset or "small"].patch_size
        if spec.image_size % patch:
            raise UserError(f"timesformer {spec.preset or 'small'} cuts frames into {patch}x{patch} patches: the "
                            f"image size {spec.image_size} must be a multiple of {patch}")
    if spec.name == "r3d18" and spec.channels != 3:
        raise UserError(f"r3d18 takes RGB frames (3 channels), got {spec.channels}; use simple2dcnn or simple3dcnn")
    return spec


def resolve(spec: EncoderSpec, pretrained: bool = False) -> EncoderSpec:
    """`spec` with its defaults filled in (the spec a policy file should record).

    r3d18: norm 'frozen_bn' with pretrained weights, else 'group' (see r3d18.default_norm);
    timesformer: preset 'small'.
    """
    spec = validate(spec)
    if spec.name == "r3d18" and not spec.norm:
        spec = spec._replace(norm=r3d18.default_norm(pretrained))
    if spec.name == "timesformer" and not spec.preset:
        spec = spec._replace(preset="small")
    return spec


def make_encoder(spec: EncoderSpec, dtype: Any = jnp.float32, conv_impl: str | None = None) -> nn.Module:
    """The Flax module `spec` describes; `__call__(frames [B, T, H, W, C]) -> [B, features]`.

    Compute in `dtype` (parameters stay fp32). r3d18 with norm 'frozen_bn' also has a `batch_stats` collection:
    pass it to `apply` with the params (it is never updated, so `mutable` is not needed). `conv_impl` computes
    every encoder's convolutions ('native' or 'taps', same parameters; None: 'taps' when JAX's default backend is
    the CPU, see rlfit.networks.conv2d and conv3d).
    """
    spec = resolve(spec)
    conv_impl = conv_impl or choose_impl(jax.default_backend())
    if conv_impl not in IMPLS:
        raise ValueError(f"unknown conv_impl {conv_impl!r}; one of {IMPLS}")
    mean, std = spec.mean, spec.std
    if spec.name == "simple2dcnn":
        return Simple2DCNN(features=spec.features, mean=mean, std=std, conv_impl=conv_impl, dtype=dtype)
    if spec.name == "simple3dcnn":
        return Simple3DCNN(features=spec.features, mean=mean, std=std, conv_impl=conv_impl, dtype=dtype)
    if spec.name == "r3d18":
        return r3d18.R3D18(features=spec.features, norm=spec.norm, mean=mean, std=std, conv_impl=conv_impl,
                           dtype=dtype)
    preset = timesformer.PRESETS[spec.preset]
    return timesformer.TimeSformer(features=spec.features, frames=spec.frames, image_size=spec.image_size,
                                   patch_size=preset.patch_size, hidden=preset.hidden, depth=preset.depth,
                                   heads=preset.heads, mlp_ratio=preset.mlp_ratio, mean=mean, std=std,
                                   conv_impl=conv_impl, dtype=dtype)


def choose_encoder(requested: str, platform: str, frames: int) -> str:
    """The encoder for `network.encoder = requested` on a JAX `platform` ('cpu', 'gpu', 'cuda', 'tpu', ...).

    A named encoder is itself. `auto`: on a CPU the DrQ 2D CNN for up to CPU_2D_MAX_FRAMES frames, else the small
    3D CNN; on an accelerator R3D-18 (whether its memory fits the batch is the planner's check, not this one's).
    """
    if requested != "auto":
        if requested not in ENCODERS:
            raise UserError(f"network.encoder: unknown encoder {requested!r}{did_you_mean(requested, ENCODERS)}; "
                            f"choose one of {', '.join(ENCODERS)} or auto")
        return requested
    if platform == "cpu":
        return "simple2dcnn" if frames <= CPU_2D_MAX_FRAMES else "simple3dcnn"
    return "r3d18"
