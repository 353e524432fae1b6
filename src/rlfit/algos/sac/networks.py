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
from typing import NamedTuple, cast

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import numpy.typing as npt

from rlfit.algos.contract import Observation, PyTree, Variables
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
        q: jax.Array = self.head(self.features(frames), action)
        return q

    def features(self, frames: jax.Array) -> jax.Array:
        """frames [..., T, H, W, C] -> the encoder's features [..., F]."""
        features = self.encoder(frames.reshape((-1,) + frames.shape[-4:]))
        reshaped: jax.Array = features.reshape(frames.shape[:-4] + features.shape[-1:])
        return reshaped


def share_encoder(policy_params: Variables, q_params: Variables) -> Variables:
    """The policy's parameters with the Q networks' encoder in place of its own copy (every collection)."""
    return {collection: ({**tree, ENCODER: q_params[collection][ENCODER]} if ENCODER in tree else tree)
            for collection, tree in policy_params.items()}


def without_encoder(variables: Variables) -> Variables:
    """A network's variables without its encoder's subtree (every collection): what the target network follows
    (all of Q for vector observations)."""
    return {collection: {name: tree for name, tree in trees.items() if name != ENCODER}
            for collection, trees in variables.items()}


class Encoded(NamedTuple):
    """A batch of observations as the heads take them: [B, ...] each."""

    policy: jax.Array
    """The policy head's input: its observation key (vectors) or the encoder's features [B, F]."""
    q: jax.Array
    """The Q heads' input: their observation key (vectors, maybe privileged) or the same features [B, F]."""


class SACParams(NamedTuple):
    """Trainable parameters (and the slowly following target Q parameters)."""

    policy: Variables
    q: Variables
    target_q: Variables
    """A moving average of `q`'s heads (starts equal to them; for vector observations all of `q`)."""
    log_alpha: jax.Array
    """[] float32 log of the entropy temperature (starts at log(`sac.initial_alpha`); Brax: 0, alpha = 1)."""


class SACNetworks(NamedTuple):
    """Pure functions of (params, normalized observation)."""

    policy_logits: Callable[[PyTree, Observation], jax.Array]
    """(policy params, obs [...]) -> [..., 2 * A]."""
    init: Callable[[jax.Array], SACParams]
    """key -> fresh parameters (target Q = Q's heads, log_alpha = log(`config.initial_alpha`))."""
    action_size: int
    encode: Callable[[Variables, Observation], Encoded]
    """(q params, obs [B, ...]) -> the heads' inputs (runs the Q encoder for camera frames)."""
    policy_head: Callable[[Variables, jax.Array], jax.Array]
    """(policy params, Encoded.policy) -> [B, 2 * A]."""
    q_head: Callable[[Variables, jax.Array, jax.Array], jax.Array]
    """(q or target q params, Encoded.q, action [B, A]) -> [B, NUM_CRITICS]."""
    encoder: EncoderSpec | None = None
    """The encoder of camera frames, None for vector observations."""


def make_sac_networks(obs_example: Observation, action_size: int, config: SACConfig, precision: str = "fp32",
                      encoder: EncoderSpec | None = None,
                      encoder_weights: dict[str, npt.NDArray[np.generic]] | None = None) -> SACNetworks:
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
        policy: Variables = policy_net.init(policy_key, policy_obs(obs_example))
        q: Variables = q_net.init(q_key, q_obs(obs_example), jnp.zeros((action_size,), jnp.float32))
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


class HeadFunctions(NamedTuple):
    """How the networks read a batch: each network's input, the heads' inputs at once, and the heads on them."""

    policy_obs: Callable[[Observation], jax.Array]
    q_obs: Callable[[Observation], jax.Array]
    encode: Callable[[Variables, Observation], Encoded]
    policy_head: Callable[[Variables, jax.Array], jax.Array]
    q_head: Callable[[Variables, jax.Array, jax.Array], jax.Array]


def _vector_functions(policy_net: nn.Module, q_net: nn.Module, config: SACConfig) -> HeadFunctions:
    """(policy_obs, q_obs, encode, policy_head, q_head) for vector observations: each head reads its
    observation key."""

    def policy_obs(obs: Observation) -> jax.Array:
        return select_obs(obs, config.policy_obs_key)

    def q_obs(obs: Observation) -> jax.Array:
        return select_obs(obs, config.q_obs_key, config.policy_obs_key)

    def encode(q_params: Variables, obs: Observation) -> Encoded:
        return Encoded(policy_obs(obs), q_obs(obs))

    def policy_head(params: Variables, inputs: jax.Array) -> jax.Array:
        logits: jax.Array = forward(policy_net, params, inputs)
        return logits

    def q_head(params: Variables, inputs: jax.Array, action: jax.Array) -> jax.Array:
        q: jax.Array = forward(q_net, params, inputs, action)
        return q

    return HeadFunctions(policy_obs, q_obs, encode, policy_head, q_head)


def _pixel_functions(policy_net: PixelPolicy, q_net: PixelTwinQ) -> HeadFunctions:
    """(policy_obs, q_obs, encode, policy_head, q_head) for camera frames: both heads read the Q encoder's
    features, computed once."""

    def frames(obs: Observation) -> jax.Array:  # batched for the encoder
        return select_obs(obs, PIXELS_KEY)

    def encode(q_params: Variables, obs: Observation) -> Encoded:  # the features, once for both heads
        features = cast(jax.Array, q_net.apply(q_params, select_obs(obs, PIXELS_KEY), method=PixelTwinQ.features))
        return Encoded(features, features)

    def policy_head(params: Variables, features: jax.Array) -> jax.Array:
        logits = cast(jax.Array, policy_net.apply(params, features, method=lambda module, x: module.head(x)))
        return logits

    def q_head(params: Variables, features: jax.Array, action: jax.Array) -> jax.Array:
        q = cast(jax.Array, q_net.apply(params, features, action, method=lambda module, x, a: module.head(x, a)))
        return q

    return HeadFunctions(frames, frames, encode, policy_head, q_head)
