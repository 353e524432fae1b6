"""Which encoder a run with pixel observations uses: the config's choice, resolved for the device and frames."""

from __future__ import annotations

from typing import Any

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
