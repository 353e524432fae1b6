"""A uniform replay buffer on the device: a ring of policy steps of `num_envs` environments, as pure functions.

Shapes: C = capacity // num_envs rows (policy steps), N = num_envs, A = action size, L = episode_length,
F = ceil(C / L) final-observation slots per environment. Observations may be arrays or dicts of arrays;
every leaf keeps its own dtype and shape (uint8 frames stay uint8).

    obs             per leaf [C, N, *leaf_shape]  the observation each action was chosen on
    action          [C, N, A]                     as the environment received it (after tanh)
    reward          [C, N] float32
    discount        [C, N] float32                0 at a terminal state, 1 otherwise (also at a time limit)
    final_slot      [C, N] int32                  slot of the next observation in `final_obs`, -1 if none
    final_obs       per leaf [F, N, *leaf_shape]  observations reached at a time limit, before the reset
    final_position  [N] int32                     the slot each environment writes next
    insert_position [] int32                      the row written next
    size            [] int32                      rows filled, at most C
    episode_step    [C, N] int32 or None          policy steps since the reset when `obs` was seen (frame stacks)

Each observation is stored once. The next observation of transition (row t, env e) is
- `final_obs[final_slot[t, e], e]` where the time limit truncated the episode at t (the value beyond it is
  bootstrapped, so the pre-reset observation is kept);
- `obs[(t + 1) % C, e]` otherwise: the episode went on and its next action was chosen on that observation.
  After a terminal state this is the first observation of the next episode; the losses multiply everything
  computed from it by discount = 0, so the true final observation is never needed and not stored.
The newest row's successor is not stored yet, so sampling draws from the (size - 1) * N older transitions.

Frame stacks (`stacked_keys`: dict entries shaped [T, H, W, C], the last frame the newest) are stored one frame
per row: `obs[key]` is [C, N, H, W, C], and `sample` rebuilds the stack of row t from rows t - T + 1 .. t of the
same environment, repeating the episode's first frame where the episode is younger than T steps (as the
environment fills its stack at a reset; `episode_step` says how young). So a stack is never stored T times.
Sampling skips the oldest T - 1 rows, whose earlier frames are overwritten. `final_obs` keeps whole stacks
(one slot per L rows).

F slots suffice: `VecEnv` truncates an environment at most once every L policy steps, so the truncation that
reuses a slot comes at least F * L >= C rows after the one that wrote it, when that row is already overwritten.
`episode_length` must therefore not exceed the environment's time limit (a smaller value only costs memory).

Bytes per stored transition, with obs_bytes = sum over observation leaves of itemsize * prod(leaf_shape)
(row_bytes the same with one frame of each stack):

    row_bytes + obs_bytes * F / C + A * action_itemsize + 4 (reward) + 4 (discount) + 4 (final_slot)
        + 4 (episode_step, with frame stacks)

that is about obs_bytes * (1 + 1 / L) + 4 * A + 12 for float32 actions, instead of 2 * obs_bytes + ... when
every transition stores its next observation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rlfit.algos.contract import Observation
from rlfit.parallel.mesh import take_by_env


class StepBatch(NamedTuple):
    """What one policy step of N environments adds; leading axis [N] (none in `init_replay`'s example)."""

    obs: Observation
    """[N, ...] observation the action was chosen on (array or dict of arrays)."""
    action: jax.Array
    """[N, A] action the environment received."""
    reward: jax.Array
    """[N] float32."""
    discount: jax.Array
    """[N] float32, 0 where a terminal state was reached, 1 otherwise."""
    truncation: jax.Array
    """[N] float32, 1 where the time limit ended the episode (then `next_obs` is stored)."""
    next_obs: Observation
    """[N, ...] observation reached, before any reset; read only where `truncation` is 1."""
    episode_step: jax.Array | None = None
    """[N] int32 policy steps since each environment's reset when `obs` was seen (needed with frame stacks)."""


class Batch(NamedTuple):
    """Sampled transitions; leading axis [B]."""

    obs: Observation
    action: jax.Array
    reward: jax.Array
    discount: jax.Array
    next_obs: Observation
    """Observation after the action; after a terminal state (discount 0) the next episode's first one."""


class ReplayState(NamedTuple):
    """The ring buffer; see the module docstring for the layout."""

    obs: Observation
    action: jax.Array
    reward: jax.Array
    discount: jax.Array
    final_slot: jax.Array
    final_obs: Observation
    final_position: jax.Array
    insert_position: jax.Array
    size: jax.Array
    episode_step: jax.Array | None = None


def replay_rows(capacity: int, num_envs: int, episode_length: int) -> tuple[int, int]:
    """(C rows, F final-observation slots per environment) for `capacity` transitions."""
    rows = capacity // num_envs
    if rows < 2:
        raise ValueError(f"a replay capacity of {capacity} transitions holds fewer than 2 policy steps of "
                         f"{num_envs} environments; raise max_replay_size to at least {2 * num_envs}")
    return rows, math.ceil(rows / max(episode_length, 1))


def newest_frames(obs: Observation, stacked_keys: tuple[str, ...]) -> Observation:
    """`obs` with each frame stack [..., T, H, W, C] cut to its newest frame [..., H, W, C] (what a row stores)."""
    if not stacked_keys:
        return obs
    if not isinstance(obs, dict) or not set(stacked_keys) <= set(obs):
        raise ValueError(f"frame stacks {stacked_keys} must be entries of a dict observation")
    return {key: (value[..., -1, :, :, :] if key in stacked_keys else value) for key, value in obs.items()}


def stacked_keys_of(state: ReplayState) -> tuple[str, ...]:
    """The observation entries stored one frame per row (a final slot holds one more axis than a row)."""
    obs, final_obs = state.obs, state.final_obs
    if not isinstance(obs, dict) or not isinstance(final_obs, Mapping):
        return ()
    return tuple(key for key in obs if final_obs[key].ndim == obs[key].ndim + 1)


def init_replay(example: StepBatch, capacity: int, num_envs: int, episode_length: int,
                stacked_keys: tuple[str, ...] = ()) -> ReplayState:
    """An empty buffer for transitions shaped like `example` (one unbatched transition; only obs, action used).

    `stacked_keys`: dict entries of the observation that are frame stacks [T, H, W, C] (stored a frame a row).
    """
    rows, slots = replay_rows(capacity, num_envs, episode_length)

    def zeros(leading: int) -> Callable[[jax.Array], jax.Array]:
        return lambda x: jnp.zeros((leading, num_envs) + jnp.shape(x), jnp.asarray(x).dtype)

    return ReplayState(
        obs=jax.tree.map(zeros(rows), newest_frames(example.obs, stacked_keys)),
        action=zeros(rows)(example.action),
        reward=jnp.zeros((rows, num_envs), jnp.float32),
        discount=jnp.zeros((rows, num_envs), jnp.float32),
        final_slot=jnp.full((rows, num_envs), -1, jnp.int32),
        final_obs=jax.tree.map(zeros(slots), example.obs),
        final_position=jnp.zeros((num_envs,), jnp.int32),
        insert_position=jnp.zeros((), jnp.int32),
        size=jnp.zeros((), jnp.int32),
        episode_step=jnp.zeros((rows, num_envs), jnp.int32) if stacked_keys else None,
    )


def insert(state: ReplayState, step: StepBatch) -> ReplayState:
    """Writes one policy step of all N environments into the next row, overwriting the oldest when full."""
    rows, num_envs = state.reward.shape
    slots = jax.tree.leaves(state.final_obs)[0].shape[0]
    row = state.insert_position
    truncated = step.truncation > 0
    envs = jnp.arange(num_envs)
    slot = state.final_position

    def write_row(buffer: jax.Array, value: jax.Array) -> jax.Array:
        written: jax.Array = jax.lax.dynamic_update_index_in_dim(buffer, value.astype(buffer.dtype), row, axis=0)
        return written

    def write_final(buffer: jax.Array, value: jax.Array) -> jax.Array:
        mask = truncated.reshape((num_envs,) + (1,) * (value.ndim - 1))
        kept = buffer[slot, envs]
        return buffer.at[slot, envs].set(jnp.where(mask, value.astype(buffer.dtype), kept))

    stacked_keys = stacked_keys_of(state)
    if stacked_keys and step.episode_step is None:
        raise ValueError("a replay buffer of frame stacks needs each step's episode_step")
    return ReplayState(
        obs=jax.tree.map(write_row, state.obs, newest_frames(step.obs, stacked_keys)),
        action=write_row(state.action, step.action),
        reward=write_row(state.reward, step.reward),
        discount=write_row(state.discount, step.discount),
        final_slot=write_row(state.final_slot, jnp.where(truncated, slot, -1)),
        final_obs=jax.tree.map(write_final, state.final_obs, step.next_obs),
        final_position=jnp.where(truncated, (slot + 1) % slots, slot).astype(jnp.int32),
        insert_position=((row + 1) % rows).astype(jnp.int32),
        size=jnp.minimum(state.size + 1, rows).astype(jnp.int32),
        episode_step=None if state.episode_step is None or step.episode_step is None
        else write_row(state.episode_step, step.episode_step),
    )


def stack_length(state: ReplayState) -> int:
    """T, the longest frame stack stored (1 without frame stacks)."""
    final_obs = state.final_obs
    return max((final_obs[key].shape[2] for key in stacked_keys_of(state) if isinstance(final_obs, Mapping)), default=1)


def num_valid(state: ReplayState) -> jax.Array:
    """[] int32 transitions `sample` draws from: all but the newest row's and, with frame stacks of T frames,
    the oldest T - 1 rows'."""
    return jnp.maximum(state.size - stack_length(state), 0) * state.reward.shape[1]


def sample(state: ReplayState, key: jax.Array, batch_size: int) -> Batch:
    """`batch_size` transitions drawn uniformly, with replacement, from the valid ones.

    With no valid transition (fewer than 2 rows filled) the batch is meaningless (but finite); check `num_valid`.
    """
    rows, num_envs = state.reward.shape
    stacked_keys = stacked_keys_of(state)
    index = jax.random.randint(key, (batch_size,), 0, jnp.maximum(num_valid(state), 1))
    oldest = (state.insert_position - state.size) % rows
    row = (oldest + stack_length(state) - 1 + index // num_envs) % rows
    env = index % num_envs
    next_row = (row + 1) % rows
    slot = take_by_env(state.final_slot, row, env)
    truncated = slot >= 0
    safe_slot = jnp.maximum(slot, 0)

    def at(buffer: jax.Array, rows: jax.Array) -> jax.Array:
        """buffer[rows, env] (`rlfit.parallel.mesh.take_by_env`: where the environments are split over devices too)."""
        taken: jax.Array = take_by_env(buffer, rows, env)
        return taken

    def stack_at(buffer: jax.Array, rows_: jax.Array, frames: int) -> jax.Array:
        """[B, T, ...]: rows_ - T + 1 .. rows_ of each env, none older than the episode's first (episode_step)."""
        assert state.episode_step is not None, "a buffer of frame stacks keeps each row's episode_step"
        back = at(state.episode_step, rows_)
        wanted = frames - 1 - jnp.arange(frames)
        source = (rows_[:, None] - jnp.minimum(wanted[None, :], back[:, None])) % rows
        stacked: jax.Array = take_by_env(buffer, source, jnp.broadcast_to(env[:, None], source.shape))
        return stacked

    def gather(rows_: jax.Array) -> Observation:
        """The observations of rows_ [B], with frame stacks rebuilt."""
        obs, final_obs = state.obs, state.final_obs
        if not stacked_keys or not isinstance(obs, Mapping) or not isinstance(final_obs, Mapping):
            gathered: Observation = jax.tree.map(lambda buffer: at(buffer, rows_), obs)
            return gathered
        return {key: (stack_at(buffer, rows_, final_obs[key].shape[2]) if key in stacked_keys
                      else jax.tree.map(lambda b: at(b, rows_), buffer)) for key, buffer in obs.items()}

    def next_obs(following: jax.Array, final: jax.Array) -> jax.Array:
        mask = truncated.reshape((batch_size,) + (1,) * (following.ndim - 1))
        return jnp.where(mask, take_by_env(final, safe_slot, env), following)

    return Batch(
        obs=gather(row),
        action=at(state.action, row),
        reward=at(state.reward, row),
        discount=at(state.discount, row),
        next_obs=jax.tree.map(next_obs, gather(next_row), state.final_obs),
    )


def bytes_per_transition(example: StepBatch, capacity: int, num_envs: int, episode_length: int,
                         stacked_keys: tuple[str, ...] = ()) -> float:
    """Buffer bytes per stored transition (the module docstring's formula), for a memory planner."""
    rows, slots = replay_rows(capacity, num_envs, episode_length)

    def nbytes(x: jax.typing.ArrayLike) -> int:
        return int(np.prod(jnp.shape(x), dtype=np.int64)) * jnp.asarray(x).dtype.itemsize

    obs_bytes = sum(nbytes(leaf) for leaf in jax.tree.leaves(example.obs))
    row_bytes = sum(nbytes(leaf) for leaf in jax.tree.leaves(newest_frames(example.obs, stacked_keys)))
    scalar_bytes = 4 + 4 + 4 + (4 if stacked_keys else 0)  # reward, discount, final_slot, episode_step
    return row_bytes + obs_bytes * slots / rows + nbytes(example.action) + scalar_bytes
