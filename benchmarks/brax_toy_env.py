"""A pure-JAX toy environment that Brax's `ppo.train` and rlfit's `VecEnv` both run, for the whole-iteration
Brax fixture (benchmarks/brax_reference.py writes it, tests/algos/ppo/test_brax_iteration.py reads it).

A point mass in the plane pushed by a 2-D action in [-1, 1]: observation [D=5] = (position [2], 4 * velocity [2],
|position|), features of unlike scales so that observation normalization matters (and means no more than about
twice their spread: the first update of Brax's float32 running statistics from zero loses digits to cancellation
where a feature's mean is far larger than its spread). An episode ends (a termination)
when the position leaves the disc of radius `RADIUS`; time limits are the wrappers' (Brax's `EpisodeWrapper`,
rlfit's `VecEnv`). The reset does not depend on its key: Brax's auto-reset returns an environment to its first
state while rlfit's draws a fresh one, and with one fixed start both are the same state. The physical state is
the observation itself (Brax's auto-reset restores `obs`). Imports only jax.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

OBS_SIZE, ACTION_SIZE = 5, 2
RADIUS = 0.9
START = (0.2, -0.1, 0.3, 0.2)
"""Position and velocity every episode starts from."""


class ToyState(NamedTuple):
    """One environment's state (rlfit's environment contract: `obs`, `reward`, `done`)."""

    obs: jax.Array
    """[5] float32."""
    reward: jax.Array
    """[] float32 reward of the last step."""
    done: jax.Array
    """[] float32, 1 where the last step left the disc."""


def observe(position: jax.Array, velocity: jax.Array) -> jax.Array:
    """[5] the observation of a position [2] and velocity [2]."""
    return jnp.concatenate([position, 4.0 * velocity, jnp.linalg.norm(position, keepdims=True)])


def start_obs() -> jax.Array:
    """[5] the observation every episode starts from."""
    return observe(jnp.asarray(START[:2], jnp.float32), jnp.asarray(START[2:], jnp.float32))


def dynamics(obs: jax.Array, action: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(next obs [5], reward [], done []) after `action` [2] from `obs` [5]."""
    velocity = 0.6 * (obs[2:4] / 4.0) + 0.8 * action
    position = obs[:2] + 0.3 * velocity
    reward = 1.0 - jnp.sum(position**2) - 0.05 * jnp.sum(action**2)
    done = (jnp.linalg.norm(position) > RADIUS).astype(jnp.float32)
    return observe(position, velocity), reward, done


class ToyEnv:
    """The environment as rlfit loads one: `reset(key)`, `step(state, action)`, `action_size`."""

    action_size = ACTION_SIZE
    observation_size = OBS_SIZE

    def reset(self, key: jax.Array) -> ToyState:
        del key  # one fixed start (see the module docstring)
        return ToyState(start_obs(), jnp.zeros(()), jnp.zeros(()))

    def step(self, state: ToyState, action: jax.Array) -> ToyState:
        obs, reward, done = dynamics(state.obs, action)
        return ToyState(obs, reward, done)
