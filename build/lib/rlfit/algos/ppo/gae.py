"""Generalized advantage estimation with correct handling of time-limit truncation."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def compute_gae(
    rewards: jax.Array,
    values: jax.Array,
    next_values: jax.Array,
    terminations: jax.Array,
    truncations: jax.Array,
    discount: float,
    gae_lambda: float,
) -> tuple[jax.Array, jax.Array]:
    """Advantages and value targets for time-major sequences; all arrays are [T, B].

    `next_values[t]` is V of the observation reached by step t, before any reset, so a truncated
    step still bootstraps from it (a time limit is not a terminal state), while a terminal step does not:

        delta_t = r_t + discount * (1 - termination_t) * next_values_t - values_t
        A_t     = delta_t + discount * gae_lambda * (1 - done_t) * A_{t+1},   done = termination or truncation

    The last step of each sequence bootstraps through `next_values[T-1]` (A_T = 0).
    Returns (advantages [T, B], returns = advantages + values [T, B]).
    """
    deltas = rewards + discount * (1.0 - terminations) * next_values - values
    continues = 1.0 - jnp.maximum(terminations, truncations)

    def backward(advantage_next, step):
        delta, cont = step
        advantage = delta + discount * gae_lambda * cont * advantage_next
        return advantage, advantage

    _, advantages = jax.lax.scan(backward, jnp.zeros_like(deltas[0]), (deltas, continues), reverse=True)
    return advantages, advantages + values
