"""The Learner parts an off-policy algorithm shares (`rlfit.algos.contract.Learner`): its config section sized by
the plan, the prefill compiled, and the functions that resize, refill, checkpoint and split a state that holds
`env_state` and a `replay` buffer (`rlfit.algos.offpolicy.replay`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Generic, NamedTuple, TypeVar

import jax

from rlfit.algos.contract import PyTree
from rlfit.algos.offpolicy.collect import empty_replay, make_prefill
from rlfit.algos.offpolicy.sizes import ReplaySizes
from rlfit.algos.offpolicy.state import reset_envs
from rlfit.algos.offpolicy.types import ReplaySettings, StateT
from rlfit.envs.vec_env import VecEnv
from rlfit.parallel.mesh import REPLICATED, default_env_axes

SettingsT = TypeVar("SettingsT", bound=ReplaySettings)


def sized_config(settings: SettingsT, sizes: ReplaySizes) -> SettingsT:
    """The config section (a frozen dataclass) with the plan's sizes; min_replay_size at most the buffer."""
    return dataclasses.replace(settings, num_envs=sizes.num_envs,
                               batch_size=sizes.batch_size, max_replay_size=sizes.max_replay_size,
                               min_replay_size=min(settings.min_replay_size, sizes.max_replay_size))


def make_filled(train_env: VecEnv, settings: ReplaySettings) -> Callable[[StateT], StateT]:
    """state -> the state after the prefill (`rlfit.algos.offpolicy.collect.make_prefill`), compiled with the state
    donated, so the prefill updates the buffer in place (it is not doubled); the state itself without a prefill."""
    prefill = make_prefill(train_env, settings)

    def filled(state: StateT) -> StateT:
        return jax.jit(prefill, donate_argnums=0)(state) if settings.min_replay_size > 0 else state

    return filled


class ReplayParts(NamedTuple, Generic[StateT]):
    """The Learner functions of an algorithm whose state holds `env_state` and a `replay` buffer."""

    resize: Callable[[StateT, jax.Array], StateT]
    refill: Callable[[StateT], StateT]
    stored_rows: Callable[[StateT], list[int | None]]
    env_axes: Callable[[StateT], PyTree]


def replay_learner_parts(train_env: VecEnv, settings: ReplaySettings, filled: Callable[[StateT], StateT]
                         ) -> ReplayParts[StateT]:
    """`settings`: the sized config section; `filled`: state -> state after the prefill (`make_filled`)."""

    def resize(state: StateT, key: jax.Array) -> StateT:
        """New environments and a new, prefilled replay buffer (its layout follows num_envs); the rest kept."""
        env_state, one_obs = reset_envs(train_env, key)
        return filled(state._replace(env_state=env_state, replay=empty_replay(train_env, settings, one_obs)))

    def refill(state: StateT) -> StateT:
        """The restored buffer marked empty (its rows are zeros) and prefilled again; the rest kept."""
        replay = state.replay
        emptied = replay._replace(final_slot=jax.numpy.full_like(replay.final_slot, -1),
                                  final_position=jax.numpy.zeros_like(replay.final_position),
                                  insert_position=jax.numpy.zeros_like(replay.insert_position),
                                  size=jax.numpy.zeros_like(replay.size))
        return filled(state._replace(replay=emptied))

    def stored_rows(state: StateT) -> list[int | None]:
        """The replay buffer's filled rows (all once it has wrapped), its final-observation slots while it holds
        anything; every other leaf whole."""
        replay = state.replay
        rows_filled = int(replay.size)
        slots = 0 if rows_filled == 0 else jax.tree.leaves(replay.final_obs)[0].shape[0]
        stored = {id(leaf): rows_filled for leaf in (*jax.tree.leaves(replay.obs), replay.action, replay.reward,
                                                     replay.discount, replay.final_slot,
                                                     *jax.tree.leaves(replay.episode_step))}
        stored.update({id(leaf): slots for leaf in jax.tree.leaves(replay.final_obs)})
        return [stored.get(id(leaf)) for leaf in jax.tree.leaves(state)]

    def env_axes(state: StateT) -> PyTree:
        """The environments' states along axis 0 and the replay buffer's transitions along their environment axis
        (1: [rows, num_envs, ...]; `final_position` 0), so each device stores the transitions it collects."""
        replay = state.replay
        env_axis = jax.tree.map(lambda _: 1, replay)._replace(final_position=0, insert_position=REPLICATED,
                                                               size=REPLICATED)
        axes: PyTree = default_env_axes(state)._replace(replay=env_axis)
        return axes

    return ReplayParts(resize, refill, stored_rows, env_axes)
