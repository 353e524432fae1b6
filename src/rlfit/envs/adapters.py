"""gymnax and XLand-MiniGrid environments behind rlfit's environment contract (`rlfit.envs.loading`).

Both adapters return `SimpleState`s whose reset and step outputs have the same pytree structure, shapes and dtypes
(`VecEnv` picks between them with `jnp.where`): every leaf of the wrapped state is cast, after each step, to the
dtype it had after the reset. Neither auto-resets: `VecEnv` resets finished environments, and its
`env.episode_length` is the time limit.

gymnax (`gymnax:<name>`): `reset` calls `reset_env`, `step` calls `step_env` (gymnax's `step` would auto-reset).
`done` is gymnax's `terminated`: in gymnax 1.x `step_env` reports natural termination only, and the time limit
`max_steps_in_episode` (a truncation) is applied by gymnax's own `step`, which rlfit does not call; so
`max_steps_in_episode` does not end an rlfit episode (`max_episode_steps` exposes it). Keys: `reset(key)` splits
`key` into (reset key, carried key); each step splits the carried key into (next carried key, step key) and passes
the step key to `step_env`. Observations are flattened to float32. Discrete action spaces give `num_actions`; a Box
gives `action_size`, and rlfit's actions in [-1, 1] are clipped and mapped linearly onto [low, high].

XLand-MiniGrid (`xminigrid:<name>`): `Environment.step` does not auto-reset (only xminigrid's wrappers do).
`done` is 1 at a terminal state only (step_type LAST with discount 0). xminigrid's own truncation at
`max_steps` (step_type LAST with discount 1) is not `done`: it stays visible in `info.step_type` /
`info.discount`, and `max_episode_steps` exposes it; set `env.episode_length` to at most it, since xminigrid's
goal reward 1 - 0.9 * step / max_steps shrinks with the step count. The observation is the egocentric view
[V, V, 2] (tile id, colour id), one-hot encoded per cell over `NUM_TILES` tiles then `NUM_COLORS` colours and
flattened: float32 [V * V * (NUM_TILES + NUM_COLORS)] (V = `view_size`; 1225 for the default 7).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rlfit.envs.simple_state import SimpleState
from rlfit.errors import UserError, did_you_mean

EXTRA_HINT = "need the 'gridworlds' extra: pip install 'rlfit[gridworlds]'"


def _strong(leaf: Any) -> jax.Array:
    """`leaf` as a strongly typed array (Python numbers and weakly typed arrays would change type when stepped)."""
    leaf = jnp.asarray(leaf)
    return leaf.astype(leaf.dtype)


def _like(new: Any, old: Any) -> Any:
    """`new` with each leaf cast to the dtype of the matching leaf of `old` (same structure and shapes required)."""

    def cast(new_leaf: Any, old_leaf: jax.Array) -> jax.Array:
        new_leaf = jnp.asarray(new_leaf)
        if new_leaf.shape != old_leaf.shape:
            raise ValueError(f"an environment state leaf changed shape in a step: {old_leaf.shape} -> {new_leaf.shape}")
        return new_leaf.astype(old_leaf.dtype)

    return jax.tree.map(cast, new, old)


def _check_overrides(overrides: Mapping[str, Any], valid: list[str], family: str, name: str) -> None:
    unknown = [key for key in overrides if key not in valid]
    if unknown:
        raise UserError(f"env.overrides names '{unknown[0]}'{did_you_mean(unknown[0], valid)}, which {family} "
                        f"environment '{name}' does not have; valid keys: {', '.join(valid)}")


class GymnaxInfo(NamedTuple):
    """What a gymnax environment carries between steps."""

    env_state: Any
    """gymnax's EnvState (its leaves keep the dtypes they had after reset)."""
    key: jax.Array
    """The PRNG key the next step splits."""


class GymnaxEnv:
    """A gymnax environment with fixed `params`; see the module docstring for keys, time limits and actions."""

    def __init__(self, env: Any, params: Any, name: str):
        from gymnax.environments import spaces

        self.env = env
        self.params = params
        self.name = name
        space = env.action_space(params)
        self._box: tuple[np.ndarray, np.ndarray] | None = None
        if isinstance(space, spaces.Discrete):
            self.num_actions = int(space.n)
            self._action_dtype = space.dtype
        elif isinstance(space, spaces.Box):
            shape = tuple(space.shape)
            low, high = (np.broadcast_to(np.asarray(bound, np.float32), shape) for bound in (space.low, space.high))
            if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
                raise UserError(f"gymnax environment '{name}' has an unbounded action space; rlfit needs finite bounds")
            self.action_size = int(np.prod(shape))
            self._box = (low, high)
            self._action_dtype = space.dtype
        else:
            raise UserError(f"gymnax environment '{name}' has a {type(space).__name__} action space; rlfit takes "
                            "Discrete or Box actions")
        self.observation_size = int(np.prod(jax.eval_shape(self.reset, jax.random.PRNGKey(0)).obs.shape))
        self.max_episode_steps = int(params.max_steps_in_episode)
        """gymnax's own time limit, which this adapter does not apply (rlfit's env.episode_length does)."""

    def reset(self, key: jax.Array) -> SimpleState:
        reset_key, carried_key = jax.random.split(key)
        obs, env_state = self.env.reset_env(reset_key, self.params)
        zero = jnp.zeros((), jnp.float32)
        return SimpleState(_flat(obs), zero, zero, {}, GymnaxInfo(jax.tree.map(_strong, env_state), carried_key))

    def step(self, state: SimpleState, action: jax.Array) -> SimpleState:
        carried_key, step_key = jax.random.split(state.info.key)
        obs, env_state, reward, terminated, _ = self.env.step_env(
            step_key, state.info.env_state, self.gymnax_action(action), self.params)
        return SimpleState(
            obs=_flat(obs),
            reward=jnp.asarray(reward, jnp.float32).reshape(()),
            done=jnp.asarray(terminated, jnp.float32).reshape(()),
            metrics={},
            info=GymnaxInfo(_like(env_state, state.info.env_state), carried_key),
        )

    def gymnax_action(self, action: jax.Array) -> jax.Array:
        """rlfit's action as gymnax takes it: an int scalar, or [-1, 1] mapped onto the Box's [low, high]."""
        if self._box is None:
            return jnp.asarray(action).reshape(()).astype(self._action_dtype)
        low, high = self._box
        unit = jnp.clip(jnp.asarray(action, jnp.float32).reshape(low.shape), -1.0, 1.0)
        return (low + (unit + 1.0) * 0.5 * (high - low)).astype(self._action_dtype)


def _flat(obs: Any) -> jax.Array:
    return jnp.ravel(jnp.asarray(obs)).astype(jnp.float32)


class XMiniGridEnv:
    """An XLand-MiniGrid environment with fixed `params`; `info` is xminigrid's TimeStep (see the module docstring)."""

    def __init__(self, env: Any, params: Any, name: str):
        from xminigrid.core.constants import NUM_COLORS, NUM_LAYERS, NUM_TILES

        shape = env.observation_shape(params)
        if not (isinstance(shape, tuple) and len(shape) == 3 and shape[2] == NUM_LAYERS):
            raise UserError(f"XLand-MiniGrid environment '{name}' has observations {shape}; rlfit takes the "
                            f"egocentric grid [V, V, {NUM_LAYERS}]")
        self.env = env
        self.params = params
        self.name = name
        self.num_actions = int(env.num_actions(params))
        self.observation_size = int(shape[0] * shape[1] * (NUM_TILES + NUM_COLORS))
        self.max_episode_steps = int(params.max_steps)
        """xminigrid's own truncation (step_type LAST, discount 1), which does not set `done`."""
        self._counts = (NUM_TILES, NUM_COLORS)

    def reset(self, key: jax.Array) -> SimpleState:
        timestep = jax.tree.map(_strong, self.env.reset(self.params, key))
        zero = jnp.zeros((), jnp.float32)
        return SimpleState(self.encode(timestep.observation), zero, zero, {}, timestep)

    def step(self, state: SimpleState, action: jax.Array) -> SimpleState:
        from xminigrid.types import StepType

        action = jnp.asarray(action).reshape(()).astype(jnp.int32)
        timestep = _like(self.env.step(self.params, state.info, action), state.info)
        terminal = jnp.logical_and(timestep.step_type == StepType.LAST, timestep.discount == 0)
        return SimpleState(self.encode(timestep.observation), timestep.reward.astype(jnp.float32),
                           terminal.astype(jnp.float32), {}, timestep)

    def encode(self, view: jax.Array) -> jax.Array:
        """[V, V, 2] (tile id, colour id) -> float32 [V * V * (NUM_TILES + NUM_COLORS)], one-hot per cell."""
        tiles, colours = self._counts
        one_hot = jnp.concatenate([jax.nn.one_hot(view[..., 0], tiles, dtype=jnp.float32),
                                   jax.nn.one_hot(view[..., 1], colours, dtype=jnp.float32)], axis=-1)
        return one_hot.reshape(-1)


def _import(module: str, family: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise UserError(f"{family} environments {EXTRA_HINT} ({error})") from None


def gymnax_names() -> tuple[str, ...]:
    """Every environment name gymnax registers (UserError when gymnax is not installed)."""
    return tuple(_import("gymnax", "gymnax").registered_envs)


def xminigrid_names() -> tuple[str, ...]:
    """Every environment name XLand-MiniGrid registers (UserError when xminigrid is not installed)."""
    return tuple(_import("xminigrid", "XLand-MiniGrid").registered_environments())


def load_gymnax(name: str, overrides: Mapping[str, Any]) -> GymnaxEnv:
    """`gymnax.make(name)`; `overrides` set fields of its EnvParams or keyword arguments of its constructor."""
    gymnax = _import("gymnax", "gymnax")
    names = gymnax_names()
    if name not in names:
        raise UserError(f"unknown gymnax environment '{name}'{did_you_mean(name, names)}; "
                        "`rlfit envs` lists them (gymnax:<name>)")
    try:
        env, params = gymnax.make(name)
        constructor = [p for p in inspect.signature(type(env).__init__).parameters if p != "self"]
        fields = [field.name for field in dataclasses.fields(params)]
        _check_overrides(overrides, fields + constructor, "gymnax", name)
        if any(key in constructor for key in overrides):
            env, params = gymnax.make(name, **{k: v for k, v in overrides.items() if k in constructor})
        params = params.replace(**{k: v for k, v in overrides.items() if k in fields})
    except OSError as error:
        raise UserError(f"gymnax could not build '{name}': {error}") from None
    return GymnaxEnv(env, params, name)


def load_xminigrid(name: str, overrides: Mapping[str, Any]) -> XMiniGridEnv:
    """`xminigrid.make(name)`; `overrides` set fields of its EnvParams (view_size, max_steps, height, width, ...).

    A new height or width without max_steps recomputes max_steps by the environment's own rule (MiniGrid's
    4 * height * width for Empty)."""
    xminigrid = _import("xminigrid", "XLand-MiniGrid")
    names = xminigrid_names()
    if name not in names:
        raise UserError(f"unknown XLand-MiniGrid environment '{name}'{did_you_mean(name, names)}; "
                        "`rlfit envs` lists them (xminigrid:<name>)")
    env, params = xminigrid.make(name)
    current = {field.name: getattr(params, field.name) for field in dataclasses.fields(params)}
    _check_overrides(overrides, list(current), "XLand-MiniGrid", name)
    if overrides:
        resized = ("height" in overrides or "width" in overrides) and "max_steps" not in overrides
        params = env.default_params(**{**current, **overrides, **({"max_steps": None} if resized else {})})
    return XMiniGridEnv(env, params, name)
