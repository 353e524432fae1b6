"""Episodes of an exported policy in native MuJoCo: one record per episode, on one model after another.

    for each model (its MJX fields, its native copy):
        for each episode:  state = reset(key, fields)
            until it ends or `max_steps` policy steps:   action = onnx(state.obs)
                action_repeat times: state = env.step(state, action)   (physics: native MuJoCo)

The environment's own reset and step run, traced once inside `physics_replaced` with the model's fields as an
argument (one compile for every model), so its pushes, observation noise, rewards and terminations are its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import numpy as np

from rlfit.deploy.play.native import NativeSimulator, check_physics_replaced, native_physics_step, physics_replaced
from rlfit.envs.randomization import with_model

NOMINAL = "nominal"
RANDOMIZED = "randomized"
CONDITIONS = (NOMINAL, RANDOMIZED)


class EpisodeRecord(NamedTuple):
    """One episode of the transfer check (a row of transfer_check.json's `episodes`)."""

    condition: str
    """'nominal' (the environment's own model) or 'randomized' (a model drawn by its randomizer)."""
    model_index: int
    """Which drawn model (0 .. models - 1); -1 for the nominal model."""
    episode: int
    """The episode's index within its condition; episode j of each condition starts from the same reset key."""
    episode_return: float
    """Sum of the environment's rewards over the episode."""
    length: int
    """Policy (control) steps the episode lasted."""
    terminated: bool
    """The environment ended it (a fall or another early termination) before `max_steps`."""


class ModelRun(NamedTuple):
    """One model to run episodes on."""

    condition: str
    model_index: int
    fields: dict[str, jax.Array]
    """The MJX model's fields for this model (path -> value); {} without randomization."""
    native: Any
    """The mujoco.MjModel native MuJoCo integrates (the environment's own, or a copy with `fields`)."""
    episodes: int
    """How many episodes to run on it."""


def run_episodes(env: Any, env_name: str, policy: Callable[[Any], np.ndarray], models: Sequence[ModelRun],
                 max_steps: int, action_repeat: int, key: jax.Array,
                 say: Callable[[str], None] = lambda line: None) -> list[EpisodeRecord]:
    """`model.episodes` episodes on each of `models`, each up to `max_steps` policy steps of `action_repeat`
    environment steps. The j-th episode of a condition (counted over its models in order) starts from
    `jax.random.split(key, n)[j]`, so the conditions' episodes start alike, pair by pair."""
    from rlfit.deploy.play.session import strong_types

    simulator = NativeSimulator(models[0].native)
    records: list[EpisodeRecord] = []
    counts = dict.fromkeys(CONDITIONS, 0)
    most = max(sum(m.episodes for m in models if m.condition == condition) for condition in CONDITIONS)
    reset_keys = jax.random.split(key, max(most, 1))
    with physics_replaced(native_physics_step(simulator)):
        def on(fields: dict[str, jax.Array]) -> Any:
            return with_model(env, fields) if fields else env

        reset = jax.jit(lambda rng, fields: strong_types(on(fields).reset(rng)))
        step = jax.jit(lambda state, action, fields: strong_types(on(fields).step(state, action)))
        for model in models:
            simulator.use_model(model.native)
            for _ in range(model.episodes):
                index = counts[model.condition]
                state = reset(reset_keys[index], model.fields)
                if not records:  # `calls` counts the traces of the step that reach the physics: the first is next
                    simulator.calls = 0
                outcome = one_episode(state, lambda state, action: step(state, action, model.fields), policy,
                                      max_steps, action_repeat, lambda: check_physics_replaced(simulator, env_name))
                records.append(EpisodeRecord(model.condition, model.model_index, index, *outcome))
                counts[model.condition] = index + 1
            name = "the nominal model" if model.model_index < 0 else f"randomized model {model.model_index}"
            say(f"  {name}: returns " + ", ".join(f"{r.episode_return:.2f}" for r in records[-model.episodes:]))
    return records


def one_episode(state: Any, step: Callable[[Any, jax.Array], Any], policy: Callable[[Any], np.ndarray],
                max_steps: int, action_repeat: int, after_step: Callable[[], None]) -> tuple[float, int, bool]:
    """(return, policy steps, terminated) of the episode from `state`: an action every `action_repeat` steps,
    until the environment ends it (`state.done`) or `max_steps` actions; `after_step()` after each action."""
    episode_return, length, terminated = 0.0, 0, False
    while length < max_steps and not terminated:
        action = jax.numpy.asarray(policy(state.obs))
        for _ in range(action_repeat):
            state = step(state, action)
            episode_return += float(state.reward)
            terminated = float(state.done) > 0
            if terminated:
                break
        length += 1
        after_step()
    return episode_return, length, terminated
