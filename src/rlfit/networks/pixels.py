"""Networks on camera frames: which encoder a run uses (the config's choice, resolved for the device and the
frames), and the acting network an encoder feeds (what a policy file with an encoder holds)."""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import numpy as np

from rlfit.envs.pixels import PIXELS_KEY
from rlfit.networks.encoders import EncoderSpec, choose_encoder, resolve


def encoder_spec_for(network: Any, obs_example: Any, platform: str) -> EncoderSpec | None:
    """The resolved `EncoderSpec` for `network` (the config's network section) and one unbatched observation
    whose `PIXELS_KEY` entry is [T, H, W, C]; None for observations without frames."""
    if not isinstance(obs_example, dict) or PIXELS_KEY not in obs_example:
        return None
    frames, height, _, channels = np.shape(obs_example[PIXELS_KEY])
    name = choose_encoder(network.encoder, platform, int(frames))
    spec = EncoderSpec(name=name, features=int(network.encoder_features), frames=int(frames),
                       image_size=int(height), channels=int(channels))
    return resolve(spec, pretrained=bool(network.pretrained))


class PixelPolicy(nn.Module):
    """frames [..., T, H, W, C] -> the encoder's features -> an MLP (`head`) -> [..., out].

    With `detach` (SAC's actor, as DrQ) the features are detached: the head's loss does not train the encoder."""

    encoder: nn.Module
    head: nn.Module
    detach: bool = True

    @nn.compact
    def __call__(self, frames: jax.Array) -> jax.Array:
        leading = frames.shape[:-4]
        features = self.encoder(frames.reshape((-1,) + frames.shape[-4:]))
        if self.detach:
            features = jax.lax.stop_gradient(features)
        out = self.head(features)
        return out.reshape(leading + out.shape[-1:])
