"""The parts of a fresh off-policy training state that SAC and FastTD3 build alike: the environment batch
checked against the config, the environments reset, and the state's leaves (but its replay buffer) given their own
buffers."""

from __future__ import annotations


import jax
import jax.numpy as jnp

from rlfit.algos.contract import Observation
from rlfit.algos.offpolicy.types import ReplaySettings, StateT
from rlfit.envs.vec_env import EnvState, VecEnv


def check_env_batch(env: VecEnv, settings: ReplaySettings) -> None:
    """Raises ValueError when the environment batch is not `settings.num_envs` environments (a bug, not input)."""
    if env.num_envs != settings.num_envs:
        raise ValueError(f"the environment batch has {env.num_envs} environments but num_envs is {settings.num_envs}")


def reset_envs(env: VecEnv, key: jax.Array) -> tuple[EnvState, Observation]:
    """The N environments reset from `key` and one (unbatched) observation of them, the buffer's example."""
    env_state = jax.jit(env.reset)(key)  # compiled: op-by-op dispatch of a physics reset takes far longer
    return env_state, jax.tree.map(lambda x: x[0], env_state.inner.obs)


def with_own_buffers(state: StateT) -> StateT:
    """`state` (with its empty replay buffer, `rlfit.algos.offpolicy.collect.empty_replay`) with every other leaf
    in its own buffer.

    Donation needs one buffer per leaf; initializers may share buffers (e.g. two zero arrays). The replay
    buffer's leaves are each allocated once, and not copied: it may be most of the device's memory.
    """
    replay = state.replay  # kept whole: `is_leaf` stops the map at it
    copied: StateT = jax.tree.map(lambda x: x if x is replay else jnp.array(x, copy=True), state,
                                  is_leaf=lambda x: x is replay)
    return copied
