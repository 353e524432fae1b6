"""SAC networks: a tanh-Gaussian policy MLP and twin Q MLPs on (observation, action).

Shapes: observations [..., obs_dim] (or dicts of them); actions [..., A] in [-1, 1];
policy output [..., 2 * A] (mean, raw scale, read by `rlfit.networks.TanhGaussian`); Q values [..., 2].

With camera frames (an `EncoderSpec`), as DrQ: one encoder [..., T, H, W, C] -> [..., features] in front of both Q
networks, trained by the critic loss alone; the policy applies a copy of it with its output detached (the actor
loss does not train it), refreshed from the critic's after every update (`share_encoder`), so the policy's
parameters alone act (play, export). The losses run the encoder once per batch (`encode`) and the heads on its
features (`policy_head`, `q_head`); the target network holds only the Q heads (as DrQ-v2, the next observation's
features come from the online encoder, detached).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from rlfit.algos.offpolicy.critics import TwinQ
from rlfit.algos.sac.config import SACConfig
from rlfit.envs.pixels import PIXELS_KEY
from rlfit.networks import COMPUTE_DTYPES, MLP, forward, select_obs
from rlfit.networks.encoders import EncoderSpec, make_encoder
from rlfit.networks.pixels import ENCODER, PixelPolicy, with_pretrained


class PixelTwinQ(nn.Module):
    """(frames [..., T, H, W, C], action [..., A]) -> the encoder's features -> TwinQ -> [..., NUM_CRITICS]."""

    encoder: nn.Module
    head: nn.Module

    @nn.compact
    def __call__(self, frames: jax.Array, action: jax.Array) -> jax.Array:
        return self.head(self.features(frames), action)

    def features(self, frames: jax.Array) -> jax.Array:
        """frames [..., T, H, W, C] -> the encoder's features [..., F]."""
        features = self.encoder(frames.reshape((-1,) + frames.shape[-4:]))
        return features.reshape(frames.shape[:-4] + features.shape[-1:])


def share_encoder(policy_params: Any, q_params: Any) -> Any:
    """The policy's parameters with the Q networks' encoder in place of its own copy (every collection)."""
    return {collection: ({**tree, ENCODER: q_params[collection][ENCODER]} if ENCODER in tree else tree)
            for collection, tree in policy_params.items()}


def without_encoder(variables: Any) -> Any:
    """A network's variables without its encoder's subtree (every collection): what the target network follows
    (all of Q for vector observations)."""
    return {collection: {name: tree for name, tree in trees.items() if name != ENCODER}
            for collection, trees in variables.items()}


class Encoded(NamedTuple):
    """A batch of observations as the heads take them: [B, ...] each."""

    policy: Any
    """The policy head's input: its observation key (vectors) or the encoder's features [B, F]."""
    q: Any
    """The Q heads' input: their observation key (vectors, maybe privileged) or the same features [B, F]."""


class SACParams(NamedTuple):
    """Trainable parameters (and the slowly following target Q parameters)."""

    policy: Any
    q: Any
    target_q: Any
    """A moving average of `q`'s heads (starts equal to them; for vector observations all of `q`)."""
    log_alpha: jax.Array
    """[] float32 log of the entropy temperature (starts at log(`sac.initial_alpha`); Brax: 0, alpha = 1)."""


class SACNetworks(NamedTuple):
    """Pure functions of (params, normalized observation)."""

    policy_logits: Callable[[Any, Any], jax.Array]
    """(policy params, obs [...]) -> [..., 2 * A]."""
    init: Callable[[jax.Array], SACParams]
    """key -> fresh parameters (target Q = Q's heads, log_alpha = log(`config.initial_alpha`))."""
    action_size: int
    encode: Callable[[Any, Any], Encoded]
    """(q params, obs [B, ...]) -> the heads' inputs (runs the Q encoder for camera frames)."""
    policy_head: Callable[[Any, Any], jax.Array]
    """(policy params, Encoded.policy) -> [B, 2 * A]."""
    q_head: Callable[[Any, Any, jax.Array], jax.Array]
    """(q or target q params, Encoded.q, action [B, A]) -> [B, NUM_CRITICS]."""
    encoder: EncoderSpec | None = None
    """The encoder of camera frames, None for vector observations."""


def make_sac_networks(obs_example: Any, action_size: int, config: SACConfig, precision: str = "fp32",
                      encoder: EncoderSpec | None = None, encoder_weights: Any = None) -> SACNetworks:
    """The networks for observations shaped like `obs_example` (one unbatched observation).

    `precision` is the compute dtype, fp32, bf16 or fp16 (parameters stay fp32; fp16 trains with loss scaling).
    With `encoder`, the policy and Q networks see the observation's frames through it (module docstring), which
    starts from `encoder_weights` (flat pretrained variables) when given.
    """
    dtype = COMPUTE_DTYPES[precision]
    policy_net: nn.Module = MLP(tuple(config.policy_hidden) + (2 * action_size,), config.activation, dtype)
    q_net: nn.Module = TwinQ(tuple(config.q_hidden), config.activation, config.q_layer_norm, dtype)
    if encoder is not None:
        pixel_policy = PixelPolicy(make_encoder(encoder, dtype), policy_net)
        pixel_q = PixelTwinQ(make_encoder(encoder, dtype), q_net)
        policy_net, q_net = pixel_policy, pixel_q
        functions = _pixel_functions(pixel_policy, pixel_q)
    else:
        functions = _vector_functions(policy_net, q_net, config)
    policy_obs, q_obs, encode, policy_head, q_head = functions

    def init(key: jax.Array) -> SACParams:
        policy_key, q_key = jax.random.split(key)
        policy = policy_net.init(policy_key, policy_obs(obs_example))
        q = q_net.init(q_key, q_obs(obs_example), jnp.zeros((action_size,), jnp.float32))
        q = with_pretrained(q, encoder_weights)
        if encoder is not None:
            policy = share_encoder(policy, q)
        return SACParams(policy, q, jax.tree.map(jnp.copy, without_encoder(q)),
                         jnp.asarray(math.log(config.initial_alpha), jnp.float32))

    return SACNetworks(
        policy_logits=lambda params, obs: forward(policy_net, params, policy_obs(obs)),
        init=init,
        action_size=action_size,
        encode=encode,
        policy_head=policy_head,
        q_head=q_head,
        encoder=encoder,
    )


def _vector_functions(policy_net: nn.Module, q_net: nn.Module, config: SACConfig) -> tuple[Callable, ...]:
    """(policy_obs, q_obs, encode, policy_head, q_head) for vector observations: each head reads its
    observation key."""

    def policy_obs(obs):
        return select_obs(obs, config.policy_obs_key)

    def q_obs(obs):
        return select_obs(obs, config.q_obs_key, config.policy_obs_key)

    def encode(q_params, obs) -> Encoded:
        return Encoded(policy_obs(obs), q_obs(obs))

    def policy_head(params, inputs):
        return forward(policy_net, params, inputs)

    def q_head(params, inputs, action):
        return forward(q_net, params, inputs, action)

    return policy_obs, q_obs, encode, policy_head, q_head


def _pixel_functions(policy_net: PixelPolicy, q_net: PixelTwinQ) -> tuple[Callable, ...]:
    """(policy_obs, q_obs, encode, policy_head, q_head) for camera frames: both heads read the Q encoder's
    features, computed once."""

    def frames(obs):  # batched for the encoder
        return obs[PIXELS_KEY]

    def encode(q_params, obs) -> Encoded:  # the features, once for both heads
        features = q_net.apply(q_params, obs[PIXELS_KEY], method=PixelTwinQ.features)
        return Encoded(features, features)

    def policy_head(params, features):
        return policy_net.apply(params, features, method=lambda module, x: module.head(x))

    def q_head(params, features, action):
        return q_net.apply(params, features, action, method=lambda module, x, a: module.head(x, a))

    return frames, frames, encode, policy_head, q_head
