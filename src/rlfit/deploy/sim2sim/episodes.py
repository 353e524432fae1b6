"""Episodes of the controller in native MuJoCo, scored by the environment's own code (FOLLOW mode of
`rlfit.deploy.sim2sim.native_env`): the controller integrates the physics; after each control step the
environment's step reads the controller's state and computes its reward and termination.

    for each model (nominal, randomized ...), each episode j:
        state = env.reset(key_j)                                   the environment's start and command
        obs = controller.reset(state's qpos, qvel, command)        the deployed clock frequency
        until state.done or max_steps:  action, obs = controller.step(obs); state = env.step(state, action)

The environment's pushes and observation noise do not reach the controller (its own sensors are exact); G1's
`feet_phase` reward is given the deployed clock frequency, which the controller runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from rlfit.deploy.bundle.schema import Bundle
from rlfit.deploy.controller.loop import Controller
from rlfit.deploy.controller.margins import Margins
from rlfit.deploy.sim2sim.native_env import NativeEnv
from rlfit.deploy.transfer.episodes import EpisodeRecord, ModelRun

Frames = Callable[[Any], None]
"""Called with the controller's MjData after each control step of the first episode (video frames)."""


def run_episodes(native: NativeEnv, bundle: Bundle, policy: Callable[[np.ndarray], np.ndarray],
                 models: Sequence[ModelRun], max_steps: int, key: jax.Array, margins: Margins = Margins(),
                 frames: Frames | None = None) -> list[EpisodeRecord]:
    """`model.episodes` episodes on each of `models` (episode j of each condition from `split(key)[j]`)."""
    records: list[EpisodeRecord] = []
    counts: dict[str, int] = {}
    most = max(sum(m.episodes for m in models if m.condition == c) for c in {m.condition for m in models})
    keys = jax.random.split(key, max(most, 1))
    for model in models:
        native.physics.use_model(model.native)
        controller = Controller(bundle, model.native, policy, margins)
        for _ in range(model.episodes):
            index = counts.get(model.condition, 0)
            outcome = one_episode(native, controller, keys[index], max_steps, frames if not records else None)
            records.append(EpisodeRecord(model.condition, model.model_index, index, *outcome))
            counts[model.condition] = index + 1
    return records


def one_episode(native: NativeEnv, controller: Controller, key: jax.Array, max_steps: int,
                frames: Frames | None) -> tuple[float, int, bool]:
    """(return, control steps, terminated) of one episode from the environment's reset at `key`."""
    state = native.reset(key)
    command = state.info.get("command")
    if "phase_dt" in state.info and controller.bundle.clocks:
        deployed = 2 * math.pi * controller.bundle.ctrl_dt * controller.bundle.clocks[0].deploy_frequency_hz
        state.info["phase_dt"] = jnp.full_like(state.info["phase_dt"], deployed)
    obs = controller.reset(np.asarray(state.data.qpos, np.float64), np.asarray(state.data.qvel, np.float64),
                           None if command is None else np.asarray(command))
    native.physics.follow = controller.data
    total, length, terminated = 0.0, 0, False
    while length < max_steps and not terminated:
        action, obs = controller.step(obs)
        state = native.step(state, action)
        total += float(state.reward)
        terminated = float(state.done) > 0
        length += 1
        if command is not None:  # the operator: the environment's resampled command reaches the controller
            controller.command = np.asarray(state.info["command"], np.float32)
        if frames is not None:
            frames(controller.data)
    return total, length, terminated
