"""Pixel observations: the observation entry that holds camera frames, and the frame-stack convention.

A pixel environment's observation is a dict with `PIXELS_KEY` -> uint8 [T, H, W, C] (the T most recent frames,
oldest first; a reset fills all T with its first frame) beside the state entries, which stay available to a
critic as privileged input.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rlfit.config.schema import EnvConfig
from rlfit.envs.camera import CHANNELS, CameraSpec, check_drawable, make_camera, render
from rlfit.errors import UserError

PIXELS_KEY = "pixels"


def frame_stack_keys(one_obs: Any) -> tuple[str, ...]:
    """The entries of an unbatched observation that are frame stacks [T, H, W, C] (stored a frame at a time)."""
    if isinstance(one_obs, dict) and PIXELS_KEY in one_obs and np.ndim(one_obs[PIXELS_KEY]) == 4:
        return (PIXELS_KEY,)
    return ()


class PixelState(NamedTuple):
    """A wrapped environment's state and the frames the policy has seen."""

    inner: Any
    """The wrapped environment's State (Playground's `State`: obs, reward, done, data, metrics, info)."""
    frames: jax.Array
    """[T, H, W, C] uint8, the T most recent frames, oldest first."""

    @property
    def obs(self) -> dict[str, Any]:
        """{PIXELS_KEY: [T, H, W, C] uint8, plus the wrapped observation's entries ('state' for an array)}."""
        return {PIXELS_KEY: self.frames, **state_entries(self.inner.obs)}

    @property
    def reward(self) -> jax.Array:
        return self.inner.reward

    @property
    def done(self) -> jax.Array:
        return self.inner.done

    @property
    def data(self) -> Any:
        return self.inner.data

    @property
    def metrics(self) -> Any:
        return self.inner.metrics

    @property
    def info(self) -> Any:
        return self.inner.info


def state_entries(obs: Any) -> dict[str, Any]:
    """The wrapped observation as dict entries: an array becomes {'state': obs}; a dict is kept."""
    if isinstance(obs, Mapping):
        if PIXELS_KEY in obs:
            raise ValueError(f"the environment's observation already has an entry '{PIXELS_KEY}'")
        return dict(obs)
    return {"state": obs}


class PixelObservation:
    """Adds camera frames to an MJX environment's observation, rendered inside the compiled step.

    `step` = `observe(advance(...))`: a batch with action repeats (`VecEnv`) advances the physics for each
    repeat and renders once per policy step. Everything else (action_size, mj_model, ...) is the wrapped env's.
    """

    def __init__(self, env: Any, spec: CameraSpec, frames: int):
        check_drawable(env.mj_model)
        self.env = env
        self.spec = spec
        self.num_frames = frames
        self.camera = make_camera(env.mj_model, spec)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["env"], name)

    @property
    def observation_size(self) -> dict[str, Any]:
        inner = self.env.observation_size
        inner = dict(inner) if isinstance(inner, Mapping) else {"state": (inner,) if isinstance(inner, int) else inner}
        size = self.spec.image_size
        return {PIXELS_KEY: (self.num_frames, size, size, CHANNELS[self.spec.channels]), **inner}

    def render(self, inner: Any) -> jax.Array:
        """[H, W, C] uint8: the camera's view of one environment's state."""
        return render(self.camera, self.env.mjx_model, inner.data)

    def reset(self, key: jax.Array) -> PixelState:
        inner = self.env.reset(key)
        first = self.render(inner)
        return PixelState(inner, jnp.broadcast_to(first, (self.num_frames, *first.shape)))

    def advance(self, state: PixelState, action: jax.Array) -> PixelState:
        """The physics step alone (the frames are not updated)."""
        return PixelState(self.env.step(state.inner, action), state.frames)

    def observe(self, state: PixelState) -> PixelState:
        """Renders the current state and pushes it as the newest frame (dropping the oldest)."""
        return state._replace(frames=jnp.concatenate([state.frames[1:], self.render(state.inner)[None]], axis=0))

    def step(self, state: PixelState, action: jax.Array) -> PixelState:
        return self.observe(self.advance(state, action))


def wrap_pixels(env: Any, config: EnvConfig) -> Any:
    """`env` with pixel observations when `config.observation` is 'pixels', else `env` unchanged."""
    if config.observation != "pixels":
        return env
    if config.renderer == "warp":
        raise UserError("env.renderer=warp is not available yet; use env.renderer=jax (MJX ray casting, any device)")
    for attribute in ("mj_model", "mjx_model"):
        if not hasattr(env, attribute):
            raise UserError(f"env.observation=pixels needs an MJX environment with {attribute} (Playground's); "
                            f"'{config.name}' has none: use env.observation=state")
    return PixelObservation(env, CameraSpec(config.image_size, config.channels, camera_name(env.mj_model, config.camera)),
                            config.frames)


def camera_name(mj_model: Any, requested: str) -> str:
    """`requested`, or for '' the model's first camera (DM Control's pixel default), or '' (the free view) when the
    model has none."""
    import mujoco

    if requested or mj_model.ncam == 0:
        return requested
    return mujoco.mj_id2name(mj_model, mujoco.mjtObj.mjOBJ_CAMERA, 0) or ""
