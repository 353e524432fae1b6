"""FastTD3 networks: a deterministic tanh actor and twin distributional (C51) critics on (observation, action).

Shapes: observations [..., obs_dim] (or dicts of them); A = action size, K = atoms;
actor output [..., A] before the tanh (the action is tanh of it); critic logits [..., NUM_CRITICS, K].
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple

import jax
import jax.numpy as jnp

from rlfit.algos.contract import Observation, Variables
from rlfit.algos.fasttd3.config import FastTD3Config
from rlfit.algos.fasttd3.distributional import atoms
from rlfit.algos.offpolicy.critics import TwinQ
from rlfit.networks import COMPUTE_DTYPES, MLP, forward, select_obs



class FastTD3Params(NamedTuple):
    """Trainable parameters and the slowly following target critics (FastTD3 keeps no target actor)."""

    policy: Variables
    q: Variables
    target_q: Variables


class FastTD3Networks(NamedTuple):
    """Pure functions of (params, normalized observation)."""

    actor: Callable[[Variables, Observation], jax.Array]
    """(policy params, obs [...]) -> [..., A] before the tanh."""
    critic: Callable[[Variables, Observation, jax.Array], jax.Array]
    """(q or target q params, obs [B, ...], action [B, A]) -> logits [B, NUM_CRITICS, K]."""
    init: Callable[[jax.Array], FastTD3Params]
    """key -> fresh parameters (target critics = critics)."""
    support: jax.Array
    """[K] the atoms."""
    action_size: int

    def action(self, policy_params: Variables, obs: Observation) -> jax.Array:
        """[..., A] the deterministic action tanh(actor(obs)) in [-1, 1]."""
        return jnp.tanh(self.actor(policy_params, obs))

    def policy_logits(self, policy_params: Variables, obs: Observation) -> jax.Array:
        """[..., A] the actor's output before the tanh: what the `deterministic_tanh` action head reads."""
        return self.actor(policy_params, obs)


def scaled_output_layer(policy_params: Mapping[str, Mapping[str, Mapping[str, jax.Array]]], key: jax.Array,
                        scale: float) -> Variables:
    """The actor's params (collection -> dense layer -> kernel and bias) with its last kernel drawn from
    N(0, scale^2) and its bias 0 (FastTD3's init_scale)."""
    layers = policy_params["params"]
    last = f"dense_{len(layers) - 1}"
    kernel = layers[last]["kernel"]
    fresh = {"kernel": scale * jax.random.normal(key, kernel.shape, kernel.dtype),
             "bias": jnp.zeros_like(layers[last]["bias"])}
    return {**policy_params, "params": {**layers, last: fresh}}


def make_fasttd3_networks(obs_example: Observation, action_size: int, config: FastTD3Config,
                          precision: str = "fp32") -> FastTD3Networks:
    """The networks for observations shaped like `obs_example` (one unbatched observation); `precision` is the
    compute dtype, fp32 or bf16 (parameters stay fp32)."""
    dtype = COMPUTE_DTYPES[precision]
    actor_net = MLP(tuple(config.actor_hidden) + (action_size,), config.activation, dtype)
    critic_net = TwinQ(tuple(config.critic_hidden), config.activation, config.critic_layer_norm, dtype,
                       num_atoms=config.num_atoms)

    def policy_obs(obs: Observation) -> jax.Array:
        return select_obs(obs, config.policy_obs_key)

    def q_obs(obs: Observation) -> jax.Array:
        return select_obs(obs, config.q_obs_key, config.policy_obs_key)

    def init(key: jax.Array) -> FastTD3Params:
        policy_key, scale_key, q_key = jax.random.split(key, 3)
        policy = scaled_output_layer(actor_net.init(policy_key, policy_obs(obs_example)), scale_key,
                                     config.actor_init_scale)
        q = critic_net.init(q_key, q_obs(obs_example), jnp.zeros((action_size,), jnp.float32))
        return FastTD3Params(policy, q, jax.tree.map(jnp.copy, q))

    return FastTD3Networks(
        actor=lambda params, obs: forward(actor_net, params, policy_obs(obs)),
        critic=lambda params, obs, action: forward(critic_net, params, q_obs(obs), action),
        init=init,
        support=atoms(config.v_min, config.v_max, config.num_atoms),
        action_size=action_size,
    )
