"""n-step transitions from SAC's device replay buffer (`rlfit.algos.offpolicy.replay`), as pure functions.

Shapes: B = batch, n = `n_step`. A window is the n policy steps of one environment that start at a sampled row;
it stops early at the first step where the episode ended (a terminal state, discount 0, or the time limit, a
final-observation slot), so no reward of the next episode is ever added.

    return    = sum_{k <= m} gamma^k r_k                  m: the window's last step
    bootstrap = gamma^(m + 1) * discount_m                0 after a terminal state
    next_obs  = the observation after step m: the pre-reset one at a time limit, else the row after m's

The newest n rows have no complete window yet (their successors are not all stored), so sampling draws from the
(size - n) * N older transitions.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from rlfit.algos.contract import Observation
from rlfit.algos.offpolicy.replay import ReplayState
from rlfit.parallel.mesh import take_by_env


class NStepBatch(NamedTuple):
    """Sampled n-step transitions; leading axis [B]."""

    obs: Observation
    action: jax.Array
    """[B, A] the first step's action."""
    reward: jax.Array
    """[B] the discounted sum of the window's rewards."""
    bootstrap: jax.Array
    """[B] what multiplies the value of `next_obs` in the target (gamma^(m + 1) * discount_m)."""
    next_obs: Observation


class NStepReturn(NamedTuple):
    """The return of windows of n steps; leading axis [B]."""

    reward: jax.Array
    """[B] sum over the window's steps, up to its end, of gamma^k r_k."""
    bootstrap: jax.Array
    """[B] gamma^(m + 1) * discount_m."""
    last: jax.Array
    """[B] int32 m, the index of the window's last step."""


def nstep_return(reward: jax.Array, discount: jax.Array, ended: jax.Array, gamma: float) -> NStepReturn:
    """The n-step return of windows `reward`, `discount` [B, n] float32 and `ended` [B, n] bool (the episode
    ended at that step: terminal or truncated), stopping after the first ended step."""
    n = reward.shape[-1]
    not_ended = 1.0 - ended.astype(jnp.float32)
    # alive[:, k] = 1 while no earlier step of the window ended
    alive = jnp.concatenate([jnp.ones_like(not_ended[:, :1]), jnp.cumprod(not_ended[:, :-1], axis=1)], axis=1)
    powers = gamma ** jnp.arange(n, dtype=jnp.float32)
    last = (jnp.sum(alive, axis=1) - 1).astype(jnp.int32)
    last_discount = jnp.take_along_axis(discount, last[:, None], axis=1)[:, 0]
    bootstrap = gamma ** (last + 1).astype(jnp.float32) * last_discount
    return NStepReturn(jnp.sum(alive * powers * reward, axis=1), bootstrap, last)


def num_valid(state: ReplayState, n_step: int) -> jax.Array:
    """[] int32 transitions whose whole n-step window is stored."""
    return jnp.maximum(state.size - n_step, 0) * state.reward.shape[1]


def sample_nstep(state: ReplayState, key: jax.Array, batch_size: int, n_step: int, gamma: float) -> NStepBatch:
    """`batch_size` n-step transitions drawn uniformly, with replacement, from the valid ones (a buffer without
    frame stacks). With none valid the batch is meaningless (but finite); check `num_valid`."""
    rows, num_envs = state.reward.shape
    index = jax.random.randint(key, (batch_size,), 0, jnp.maximum(num_valid(state, n_step), 1))
    oldest = (state.insert_position - state.size) % rows
    row = (oldest + index // num_envs) % rows
    env = index % num_envs
    window = (row[:, None] + jnp.arange(n_step)[None, :]) % rows  # [B, n]
    window_env = jnp.broadcast_to(env[:, None], window.shape)
    discount = take_by_env(state.discount, window, window_env)
    slots = take_by_env(state.final_slot, window, window_env)
    returns = nstep_return(take_by_env(state.reward, window, window_env), discount, (discount == 0) | (slots >= 0),
                           gamma)
    last_slot = jnp.take_along_axis(slots, returns.last[:, None], axis=1)[:, 0]
    following = (row + returns.last + 1) % rows

    def next_obs(buffer: jax.Array, final: jax.Array) -> jax.Array:
        truncated = (last_slot >= 0).reshape((batch_size,) + (1,) * (buffer.ndim - 2))
        return jnp.where(truncated, take_by_env(final, jnp.maximum(last_slot, 0), env),
                         take_by_env(buffer, following, env))

    return NStepBatch(
        obs=jax.tree.map(lambda buffer: take_by_env(buffer, row, env), state.obs),
        action=take_by_env(state.action, row, env),
        reward=returns.reward,
        bootstrap=returns.bootstrap,
        next_obs=jax.tree.map(next_obs, state.obs, state.final_obs),
    )
