"""Networks on camera frames: which encoder a run uses (the config's choice, resolved for the device and the
frames), and the acting network an encoder feeds (what a policy file with an encoder holds)."""

from __future__ import annotations

from typing import Any, NamedTuple

import flax.linen as nn
import jax
import numpy as np
import optax

from rlfit.envs.pixels import PIXELS_KEY
from rlfit.errors import UserError
from rlfit.networks.encoders import EncoderSpec, choose_encoder, resolve
from rlfit.networks.pretrained import apply_pretrained, load_encoder_weights, spec_from_metadata


ENCODER = "encoder"
"""The name of the encoder's subtree in every network that has one (policy, value, Q)."""


class EncoderChoice(NamedTuple):
    """The encoder of a run and the pretrained weights to start it from."""

    spec: EncoderSpec
    weights: dict[str, np.ndarray] | None
    """Flat '.'-joined variables from `network.pretrained` (`load_encoder_weights`), None to start from scratch."""


def encoder_for(network: Any, obs_example: Any, platform: str) -> EncoderChoice | None:
    """The encoder for `network` (the config's network section) and one unbatched observation whose
    `PIXELS_KEY` entry is [T, H, W, C]; None for observations without frames.

    With `network.pretrained` the weights file's spec decides the architecture details and the input
    normalization (recorded in the policy file); its encoder must be the one `network.encoder` names (auto: any).
    """
    if not isinstance(obs_example, dict) or PIXELS_KEY not in obs_example:
        return None
    frames, height, _, channels = np.shape(obs_example[PIXELS_KEY])
    name = choose_encoder(network.encoder, platform, int(frames))
    spec = EncoderSpec(name=name, features=int(network.encoder_features), frames=int(frames),
                       image_size=int(height), channels=int(channels))
    if not network.pretrained:
        return EncoderChoice(resolve(spec), None)
    weights, metadata = load_encoder_weights(network.pretrained)
    made_for = spec_from_metadata(metadata, network.pretrained)
    if network.encoder not in ("auto", made_for.name):
        raise UserError(f"network.pretrained holds {made_for.name} weights but network.encoder is {network.encoder}; "
                        f"set network.encoder={made_for.name} (or auto)")
    spec = spec._replace(name=made_for.name, norm=made_for.norm, preset=made_for.preset, mean=made_for.mean,
                         std=made_for.std)
    return EncoderChoice(resolve(spec, pretrained=True), weights)


def with_pretrained(variables: Any, weights: dict[str, np.ndarray] | None) -> Any:
    """A network's variables ({'params': {..., ENCODER: ...}, ...}) with its encoder's replaced by `weights`
    (one-line UserError naming the first key or shape that does not fit); unchanged without weights."""
    if weights is None:
        return variables
    encoder = {collection: tree[ENCODER] for collection, tree in variables.items() if ENCODER in tree}
    loaded = apply_pretrained(encoder, weights)
    return {collection: ({**tree, ENCODER: loaded[collection]} if collection in loaded else tree)
            for collection, tree in variables.items()}


def encoder_optimizer(optimizer: optax.GradientTransformation, freeze_encoder: bool) -> optax.GradientTransformation:
    """`optimizer` for a network with an encoder: frozen batch-norm statistics (the `batch_stats` collection) get
    no updates, nor, with `freeze_encoder`, the encoder (their gradients are set to zero)."""
    def labels(params: Any) -> Any:
        def label(path, _) -> str:
            names = [str(getattr(entry, "key", entry)) for entry in path]
            return "frozen" if names[0] == "batch_stats" or (freeze_encoder and ENCODER in names) else "trained"

        return jax.tree_util.tree_map_with_path(label, params)

    return optax.multi_transform({"trained": optimizer, "frozen": optax.set_to_zero()}, labels)


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
