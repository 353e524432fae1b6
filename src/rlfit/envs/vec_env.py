"""A batch of environments with time limits, auto-reset and episode statistics, as pure functions.

Shapes: N = number of environments; observations are arrays [N, obs_dim] or dicts of them.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from rlfit.envs.action_space import ActionSpace, action_space
from rlfit.envs.randomization import ModelBatch, Randomizer, draw_models, models_key, with_model


class EnvState(NamedTuple):
    """State of N environments."""

    inner: Any
    """The wrapped environment's State, batched on a leading axis [N]."""
    step_count: jax.Array
    """[N] int32 policy steps since each environment's last reset."""
    episode_return: jax.Array
    """[N] float32 return of each running episode (unscaled reward)."""
    reset_key: jax.Array
    """[N, 2] uint32 key each environment uses for its next reset."""
    models: ModelBatch | None = None
    """The randomized fields of each environment's MuJoCo model, [N, ...] per field (`rlfit.envs.randomization`),
    drawn at `VecEnv.reset` and kept through every auto-reset; None without domain randomization."""


class StepOutput(NamedTuple):
    """What one batched step produced, before any auto-reset replaced the state."""

    next_obs: Any
    """[N, ...] observation reached by the step (the final one where an episode ended)."""
    reward: jax.Array
    """[N] float32 reward summed over the action repeats."""
    termination: jax.Array
    """[N] float32, 1 where a terminal state was reached (no value beyond it)."""
    truncation: jax.Array
    """[N] float32, 1 where the time limit ended the episode (not terminal: bootstrap from next_obs)."""
    finished_return: jax.Array
    """[N] float32 return of the episode that ended at this step, 0 where none ended."""
    finished_length: jax.Array
    """[N] float32 length of the episode that ended at this step, 0 where none ended."""


class VecEnv:
    """N copies of `env` stepped together; an environment whose episode ends is reset with its own key.

    With a `randomizer` (`rlfit.envs.randomization`), `reset(key)` also draws one MuJoCo model per environment
    from `models_key(key)`, and each environment steps and resets on its own model from then on."""

    def __init__(self, env: Any, num_envs: int, episode_length: int, action_repeat: int = 1,
                 randomizer: Randomizer | None = None):
        self.env = env
        self.num_envs = num_envs
        self.episode_length = episode_length
        self.action_repeat = action_repeat
        self.randomizer = randomizer

    @property
    def action_space(self) -> ActionSpace:
        """The environment's actions: continuous [A] in [-1, 1] or one of K discrete choices."""
        return action_space(self.env)

    @property
    def action_size(self) -> int:
        """Continuous action dimensions A (a discrete environment has none: see `action_space`)."""
        return int(self.env.action_size)

    def reset(self, key: jax.Array) -> EnvState:
        """Fresh episodes in all N environments; `key` is one PRNG key."""
        return self.start(*self.reset_inputs(key))

    def reset_inputs(self, key: jax.Array) -> tuple[jax.Array, jax.Array, ModelBatch | None]:
        """What `reset(key)` starts from: (each environment's reset key [N, 2], its key for later resets [N, 2], the
        models drawn from `models_key(key)` or None without a randomizer)."""
        start_key, reset_key = jax.random.split(key)
        models = None
        if self.randomizer is not None:
            models = draw_models(self.randomizer, self.env.mjx_model, models_key(key), self.num_envs)
        return (jax.random.split(start_key, self.num_envs), jax.random.split(reset_key, self.num_envs), models)

    def start(self, start_keys: jax.Array, reset_keys: jax.Array, models: ModelBatch | None) -> EnvState:
        """Fresh episodes from per-environment keys [N, 2] (the reset's, then the later resets') on `models` (a batch
        of N, or None: the environment's own model)."""
        inner = self._per_env("reset", models, start_keys)
        zeros = jnp.zeros(self.num_envs)
        return EnvState(inner, zeros.astype(jnp.int32), zeros, reset_keys, models)

    def _per_env(self, method: str, models: ModelBatch | None, *args: Any) -> Any:
        """`env.<method>(*args)` of each environment under `jax.vmap` (args batched on axis 0), each on its own model
        where `models` holds a batch of them."""
        if models is None:
            return jax.vmap(getattr(self.env, method))(*args)
        return jax.vmap(lambda fields, *one: getattr(with_model(self.env, fields), method)(*one))(models, *args)

    def step(self, state: EnvState, action: jax.Array, auto_reset: bool = True) -> tuple[EnvState, StepOutput]:
        """Applies `action` [N, A] (continuous) or [N] int32 (discrete); environments whose episode ended start a new
        one. `auto_reset=False` leaves them as they ended (stepping on from there), and the compiled program holds no
        reset: for one episode per environment (evaluation), where whatever follows an episode's end is not read."""
        inner, reward, terminal = self._repeat_step(state.inner, action, state.models)
        step_count = state.step_count + 1
        timed_out = (step_count >= self.episode_length).astype(jnp.float32)
        truncation = timed_out * (1.0 - terminal)
        finished = jnp.maximum(terminal, timed_out)
        episode_return = state.episode_return + reward
        output = StepOutput(
            next_obs=inner.obs,
            reward=reward,
            termination=terminal,
            truncation=truncation,
            finished_return=episode_return * finished,
            finished_length=step_count.astype(jnp.float32) * finished,
        )
        running = EnvState(inner, step_count, episode_return, state.reset_key, state.models)
        if not auto_reset:
            return running, output
        next_state = jax.lax.cond(jnp.any(finished > 0), self._reset_finished, lambda s, f: s, running, finished)
        return next_state, output

    def _repeat_step(self, inner: Any, action: jax.Array, models: ModelBatch | None
                     ) -> tuple[Any, jax.Array, jax.Array]:
        """`action_repeat` physics steps; an env with `advance` and `observe` (pixels) renders once, after them."""
        advance = "advance" if hasattr(self.env, "advance") else "step"
        reward = jnp.zeros(self.num_envs)
        terminal = jnp.zeros(self.num_envs)
        for _ in range(self.action_repeat):
            inner = self._per_env(advance, models, inner, action)
            reward = reward + inner.reward * (1.0 - terminal)
            terminal = jnp.maximum(terminal, inner.done.astype(jnp.float32))
        if hasattr(self.env, "observe"):
            inner = jax.vmap(self.env.observe)(inner)
        return inner, reward, terminal

    def _reset_finished(self, state: EnvState, finished: jax.Array) -> EnvState:
        keys = jax.vmap(jax.random.split)(state.reset_key)
        fresh = self._per_env("reset", state.models, keys[:, 0])
        done = finished > 0

        def pick(new, old):
            mask = done.reshape(done.shape + (1,) * (old.ndim - 1))
            return jnp.where(mask, new, old)

        inner = jax.tree.map(pick, fresh, state.inner)
        return EnvState(
            inner=inner,
            step_count=jnp.where(done, 0, state.step_count),
            episode_return=jnp.where(done, 0.0, state.episode_return),
            reset_key=jnp.where(done[:, None], keys[:, 1], state.reset_key),
            models=state.models,
        )


def episode_steps(env_config: Any, env: Any) -> int:
    """Policy steps per episode: `env.episode_length` environment steps over `env.action_repeat`, no more than
    the environment's own limit where it declares one (`max_episode_steps`: gymnax, XLand-MiniGrid)."""
    steps = max(1, env_config.episode_length // env_config.action_repeat)
    limit = getattr(env, "max_episode_steps", None)
    return min(steps, max(1, int(limit) // env_config.action_repeat)) if limit else steps


def observation_example(env: Any, store_key: str | None = None) -> Any:
    """One unbatched observation of `env` as zeros (shapes from an abstract reset, nothing run; with `store_key`,
    what the reset depends on, read from the program store when a process traced it before)."""
    from rlfit.hardware.program_store import result_shapes

    shapes = result_shapes(lambda key: env.reset(key).obs, (jax.ShapeDtypeStruct((2,), jnp.uint32),), store_key)
    return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
