"""FastTD3 losses as pure functions of parameters and a normalized n-step batch.

Shapes: B = batch, A = action size, K = atoms; critics' logits [B, 2, K].
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from rlfit.algos.contract import Observation, Variables
from rlfit.algos.fasttd3.distributional import cross_entropy, expected_value, project
from rlfit.algos.fasttd3.networks import FastTD3Networks
from rlfit.algos.fasttd3.nstep import NStepBatch


class TargetSettings(NamedTuple):
    """What shapes the critic target."""

    policy_noise: float
    noise_clip: float
    clipped_double_q: bool


def smoothed_action(action: jax.Array, key: jax.Array, policy_noise: float, noise_clip: float) -> jax.Array:
    """[B, A] TD3's target policy smoothing: clip(action + clip(policy_noise * N(0, 1), +-noise_clip), -1, 1)."""
    noise = jnp.clip(policy_noise * jax.random.normal(key, action.shape), -noise_clip, noise_clip)
    return jnp.clip(action + noise, -1.0, 1.0)


def pick_critic(values: jax.Array, distributions: jax.Array, clipped_double_q: bool) -> jax.Array:
    """[B, K] per row the distribution of the critic with the smaller expected value (`values` [B, 2],
    `distributions` [B, 2, K]; clipped double Q), or the two distributions' mixture (their mean)."""
    if not clipped_double_q:
        return jnp.mean(distributions, axis=1)
    first = (values[:, 0] <= values[:, 1])[:, None]
    return jnp.where(first, distributions[:, 0], distributions[:, 1])


def critic_target(policy_params: Variables, target_q_params: Variables, networks: FastTD3Networks, batch: NStepBatch,
                  key: jax.Array, settings: TargetSettings) -> jax.Array:
    """[B, K] the projected target distribution of reward + bootstrap * Z'(s', a'), a' the actor's smoothed
    action at s' and Z' the target critic chosen by `pick_critic` (chosen by the expected value before the
    projection, which keeps their order where no atom is clipped)."""
    next_action = smoothed_action(networks.action(policy_params, batch.next_obs), key, settings.policy_noise,
                                  settings.noise_clip)
    next_probs = jax.nn.softmax(networks.critic(target_q_params, batch.next_obs, next_action), axis=-1)
    chosen = pick_critic(expected_value(next_probs, networks.support), next_probs, settings.clipped_double_q)
    return jax.lax.stop_gradient(project(chosen, batch.reward, batch.bootstrap, networks.support))


def critic_loss(q_params: Variables, target: jax.Array, networks: FastTD3Networks,
                batch: NStepBatch) -> tuple[jax.Array, jax.Array]:
    """([] mean over the batch of the summed cross-entropies of both critics against `target` [B, K],
    [] the critics' mean expected value on the batch)."""
    logits = networks.critic(q_params, batch.obs, batch.action)
    loss = jnp.mean(jnp.sum(cross_entropy(target[:, None, :], logits), axis=-1))
    q_mean = jnp.mean(expected_value(jax.nn.softmax(logits, axis=-1), networks.support))
    return loss, jax.lax.stop_gradient(q_mean)


def actor_loss(policy_params: Variables, q_params: Variables, networks: FastTD3Networks, obs: Observation,
               clipped_double_q: bool) -> jax.Array:
    """[] -mean over the batch of the smaller (or mean) expected value of the two critics at the actor's action."""
    action = networks.action(policy_params, obs)
    values = expected_value(jax.nn.softmax(networks.critic(q_params, obs, action), axis=-1), networks.support)
    value = jnp.min(values, axis=-1) if clipped_double_q else jnp.mean(values, axis=-1)
    return -jnp.mean(value)
