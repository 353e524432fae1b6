"""SAC networks: a tanh-Gaussian policy MLP and twin Q MLPs on (observation, action).

Shapes: observations [..., obs_dim] (or dicts of them); actions [..., A] in [-1, 1];
policy output [..., 2 * A] (mean, raw scale, read by `rlfit.networks.TanhGaussian`); Q values [..., 2].
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from rlfit.algos.sac.config import SACConfig
from rlfit.networks import COMPUTE_DTYPES, MLP, select_obs

NUM_CRITICS = 2


class TwinQ(nn.Module):
    """NUM_CRITICS independent Q functions: (obs [..., D], action [..., A]) -> [..., NUM_CRITICS]."""

    hidden: Sequence[int]
    activation: str = "relu"
    layer_norm: bool = False
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, obs: jax.Array, action: jax.Array) -> jax.Array:
        x = jnp.concatenate([obs.astype(jnp.float32), action.astype(jnp.float32)], axis=-1)
        values = [MLP(tuple(self.hidden) + (1,), self.activation, self.dtype, self.layer_norm,
                      name=f"critic_{index}")(x) for index in range(NUM_CRITICS)]
        return jnp.concatenate(values, axis=-1)


class SACParams(NamedTuple):
    """Trainable parameters (and the slowly following target Q parameters)."""

    policy: Any
    q: Any
    target_q: Any
    """A moving average of `q` (starts equal to it)."""
    log_alpha: jax.Array
    """[] float32 log of the entropy temperature (starts at 0: alpha = 1, as in Brax)."""


class SACNetworks(NamedTuple):
    """Pure functions of (params, normalized observation)."""

    policy_logits: Callable[[Any, Any], jax.Array]
    """(policy params, obs [...]) -> [..., 2 * A]."""
    q_values: Callable[[Any, Any, jax.Array], jax.Array]
    """(q params, obs [...], action [..., A]) -> [..., NUM_CRITICS]."""
    init: Callable[[jax.Array], SACParams]
    """key -> fresh parameters (target Q = Q, log_alpha = 0)."""
    action_size: int


def make_sac_networks(obs_example: Any, action_size: int, config: SACConfig, precision: str = "fp32") -> SACNetworks:
    """The networks for observations shaped like `obs_example` (one unbatched observation).

    `precision` is the compute dtype, fp32, bf16 or fp16 (parameters stay fp32; fp16 trains with loss scaling).
    """
    dtype = COMPUTE_DTYPES[precision]
    policy_net = MLP(tuple(config.policy_hidden) + (2 * action_size,), config.activation, dtype)
    q_net = TwinQ(tuple(config.q_hidden), config.activation, config.q_layer_norm, dtype)

    def policy_obs(obs):
        return select_obs(obs, config.policy_obs_key)

    def q_obs(obs):
        return select_obs(obs, config.q_obs_key, config.policy_obs_key)

    def init(key: jax.Array) -> SACParams:
        policy_key, q_key = jax.random.split(key)
        policy = policy_net.init(policy_key, policy_obs(obs_example))
        q = q_net.init(q_key, q_obs(obs_example), jnp.zeros((action_size,), jnp.float32))
        return SACParams(policy, q, jax.tree.map(jnp.copy, q), jnp.zeros((), jnp.float32))

    return SACNetworks(
        policy_logits=lambda params, obs: policy_net.apply(params, policy_obs(obs)),
        q_values=lambda params, obs, action: q_net.apply(params, q_obs(obs), action),
        init=init,
        action_size=action_size,
    )
