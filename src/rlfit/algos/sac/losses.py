"""SAC losses (arXiv:1812.05905) with Brax's semantics, as pure functions of parameters and a batch.

Shapes: B = batch size, A = action size; observations in the batch are already normalized.
Every function takes its PRNG key explicitly (a fresh reparameterized action sample per call).

The heads see encoded observations (`SACNetworks.encode`): the observation itself for vector observations, as
Brax; for camera frames the Q encoder's features, computed once per batch as DrQ-v2 does: with gradients in the
critic loss, which alone trains the encoder, and detached for the temperature and actor losses and for the next
observation, whose features come from the online encoder (the target network holds only the Q heads).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rlfit.algos.contract import Variables
from rlfit.algos.sac.networks import Encoded, SACNetworks
from rlfit.algos.offpolicy.replay import Batch
from rlfit.networks import TanhGaussian, squash


def sample_action(logits: jax.Array, key: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(action [B, A] in [-1, 1], log-probability [B] of it) drawn from the policy's `logits` [B, 2A],
    reparameterized."""
    dist = TanhGaussian.from_logits(logits)
    raw_action = dist.sample_raw(key)
    return squash(raw_action), dist.log_prob(raw_action)


def alpha_loss(log_alpha: jax.Array, policy_params: Variables, networks: SACNetworks, encoded: Encoded,
               target_entropy: float, key: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(loss [], entropy estimate [] = mean -log pi(a|s)) for the temperature.

    loss = mean(-log_alpha * stop_gradient(log pi(a|s) + target_entropy)), a ~ pi(.|s): alpha grows while the
    policy's entropy is below the target and shrinks while above. (Brax writes alpha * stop_gradient(...) instead:
    the same direction, its gradient with respect to log_alpha scaled by alpha.)
    """
    _, log_prob = sample_action(networks.policy_head(policy_params, encoded.policy), key)
    log_prob = jax.lax.stop_gradient(log_prob)
    loss = jnp.mean(-log_alpha * (log_prob + target_entropy))
    return loss, -jnp.mean(log_prob)


def critic_loss(q_params: Variables, policy_params: Variables, target_q_params: Variables, alpha: jax.Array,
                networks: SACNetworks, batch: Batch, reward_scaling: float, discounting: float, key: jax.Array
                ) -> tuple[jax.Array, Encoded]:
    """([] 0.5 * mean over the batch and both critics of (Q_i(s, a) - y)^2, the batch's encoded observations
    (detached, for the other losses)), with the soft target

        y = stop_gradient(reward * reward_scaling + discount * discounting * (min_i Q'_i(s', a') - alpha log pi(a'|s')))

    where Q' are the target heads and a' ~ pi(.|s'). The batch's next observation at a time limit is the
    pre-reset one, so truncated episodes bootstrap (Brax's SAC, lacking it, masks those transitions instead).
    """
    encoded = networks.encode(q_params, batch.obs)
    next_encoded = jax.lax.stop_gradient(networks.encode(q_params, batch.next_obs))
    next_action, next_log_prob = sample_action(networks.policy_head(policy_params, next_encoded.policy), key)
    next_q = networks.q_head(target_q_params, next_encoded.q, next_action)
    next_value = jnp.min(next_q, axis=-1) - alpha * next_log_prob
    target = jax.lax.stop_gradient(batch.reward * reward_scaling + batch.discount * discounting * next_value)
    q = networks.q_head(q_params, encoded.q, batch.action)
    return 0.5 * jnp.mean(jnp.square(q - target[:, None])), jax.lax.stop_gradient(encoded)


def actor_loss(policy_params: Variables, q_params: Variables, alpha: jax.Array, networks: SACNetworks, encoded: Encoded,
               key: jax.Array) -> jax.Array:
    """[] mean(alpha * log pi(a|s) - min_i Q_i(s, a)), a ~ pi(.|s) reparameterized (gradients reach the policy's
    head, not the encoder: `encoded` is detached)."""
    action, log_prob = sample_action(networks.policy_head(policy_params, encoded.policy), key)
    min_q = jnp.min(networks.q_head(q_params, encoded.q, action), axis=-1)
    return jnp.mean(alpha * log_prob - min_q)
