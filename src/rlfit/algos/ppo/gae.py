"""Advantage estimators: Brax PPO's (`brax_targets`, run inside the loss on every minibatch) and GAE sums with
time-limit steps bootstrapped (`compute_gae`, once per iteration: `ppo.advantages: gae_once`)."""

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

    def backward(advantage_next: jax.Array, step: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        delta, cont = step
        advantage = delta + discount * gae_lambda * cont * advantage_next
        return advantage, advantage

    _, advantages = jax.lax.scan(backward, jnp.zeros_like(deltas[0]), (deltas, continues), reverse=True)
    return advantages, advantages + values


def brax_targets(
    rewards: jax.Array,
    values: jax.Array,
    bootstrap_value: jax.Array,
    terminations: jax.Array,
    truncations: jax.Array,
    discount: float,
    gae_lambda: float,
) -> tuple[jax.Array, jax.Array]:
    """Brax PPO's (0.14.2 `compute_gae`) advantages and value targets; arrays [T, B], `bootstrap_value` [B] is V
    of the observation after the last step.

    `values[t + 1]` (the next step of the sequence, a new episode's first after a reset) is the successor's value;
    a terminal step does not bootstrap and a truncated (time-limit) step is masked out, its advantage 0 and its
    target its own value:

        delta_t   = (r_t + discount * (1 - termination_t) * values_{t+1} - values_t) * (1 - truncation_t)
        vs_t      = values_t + delta_t + discount * lambda * (1 - termination_t) * (1 - truncation_t) * (vs_{t+1} - values_{t+1})
        A_t       = (r_t + discount * (1 - termination_t) * vs_{t+1} - values_t) * (1 - truncation_t)

    with values_T = vs_T = bootstrap_value: the advantage is the one-step error on the lambda-returns vs, not
    their sum. Returns (advantages [T, B], vs [T, B]), without gradients.
    """
    mask = 1.0 - truncations
    next_values = jnp.concatenate([values[1:], bootstrap_value[None]], axis=0)
    deltas = (rewards + discount * (1.0 - terminations) * next_values - values) * mask
    continues = discount * gae_lambda * (1.0 - terminations) * mask

    def backward(acc_next: jax.Array, step: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        delta, cont = step
        acc = delta + cont * acc_next
        return acc, acc

    _, vs_minus_values = jax.lax.scan(backward, jnp.zeros_like(bootstrap_value), (deltas, continues), reverse=True)
    vs = vs_minus_values + values
    next_vs = jnp.concatenate([vs[1:], bootstrap_value[None]], axis=0)
    advantages = (rewards + discount * (1.0 - terminations) * next_vs - values) * mask
    return jax.lax.stop_gradient(advantages), jax.lax.stop_gradient(vs)
