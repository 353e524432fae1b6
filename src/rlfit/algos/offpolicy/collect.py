"""Collecting into the replay buffer, as pure functions: an empty buffer, one policy step stored, and the prefill
with uniform random actions. They read only the fields in `rlfit.algos.offpolicy.types`."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from rlfit.algos.contract import Observation
from rlfit.algos.common.normalizer import update_stats
from rlfit.algos.offpolicy.replay import ReplayState, StepBatch, init_replay, insert
from rlfit.algos.offpolicy.types import ReplaySettings, StateT
from rlfit.envs.pixels import frame_stack_keys
from rlfit.envs.vec_env import StepOutput, VecEnv


def empty_replay(env: VecEnv, settings: ReplaySettings, one_obs: Observation) -> ReplayState:
    """An empty replay buffer for `settings`' sizes and observations shaped like `one_obs` (unbatched)."""
    zero = jnp.zeros((), jnp.float32)
    example = StepBatch(one_obs, jnp.zeros((env.action_size,), jnp.float32), zero, zero, zero, one_obs)
    return init_replay(example, settings.max_replay_size, settings.num_envs, env.episode_length,
                       stacked_keys=frame_stack_keys(one_obs))


def act_and_store(env: VecEnv, settings: ReplaySettings, state: StateT, action: jax.Array
                  ) -> tuple[StateT, StepOutput]:
    """Steps the N environments with `action` [N, A], stores the transitions, updates the statistics."""
    obs = state.env_state.inner.obs
    env_state, out = env.step(state.env_state, action)
    step = StepBatch(obs, action, out.reward, 1.0 - out.termination, out.truncation, out.next_obs,
                     episode_step=state.env_state.step_count)
    stats = update_stats(state.normalizer, obs) if settings.normalize_observations else state.normalizer
    state = state._replace(normalizer=stats, env_state=env_state, replay=insert(state.replay, step),
                           policy_steps=state.policy_steps + 1)
    return state, out


def make_prefill(env: VecEnv, settings: ReplaySettings) -> Callable[[StateT], StateT]:
    """`state -> state` after ceil(min_replay_size / num_envs) policy steps of uniform random actions."""
    num_steps = -(-settings.min_replay_size // settings.num_envs)

    def random_step(state: StateT, _: None) -> tuple[StateT, None]:
        key, action_key = jax.random.split(state.key)
        action = jax.random.uniform(action_key, (env.num_envs, env.action_size), minval=-1.0, maxval=1.0)
        state, _output = act_and_store(env, settings, state._replace(key=key), action)
        return state, None

    def prefill(state: StateT) -> StateT:
        return jax.lax.scan(random_step, state, None, length=num_steps)[0]

    return prefill
