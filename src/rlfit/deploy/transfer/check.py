"""`rlfit transfer-check RUN_DIR`: the exported policy (ONNX through onnxruntime) in native MuJoCo, on the nominal
model and on models drawn afresh by the environment's randomizer, before it meets a robot.

    run dir -> config, environment (MJX on the CPU, for observations), ONNX file (checked against both)
        -> models: nominal, N randomized (`rlfit.deploy.transfer.models`)
        -> episodes in native MuJoCo at the control rate (`rlfit.deploy.transfer.episodes`) -> EpisodeRecords

The figures (`rlfit.study.transfer_report`) are computed from the records; this module only runs the episodes.
Every check of the input happens before anything runs or is written.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jax

from rlfit.deploy.transfer.episodes import NOMINAL, RANDOMIZED, EpisodeRecord, ModelRun, run_episodes
from rlfit.deploy.transfer.onnx_policy import ARRAY_OBS_NAME, load_onnx_policy, onnx_path
from rlfit.deploy.transfer.options import TransferCheckOptions, check_counts
from rlfit.errors import UserError
from rlfit.rundir.layout import existing_run_dir

class TransferRun(NamedTuple):
    """What the check ran: its episodes and what a report says about the conditions."""

    env_name: str
    onnx_path: Path
    records: list[EpisodeRecord]
    max_steps: int
    run_episode_steps: int
    """The run's own episode length in policy steps (what training and its evaluation ran)."""
    control_dt: float
    """Seconds between two actions (the environment's dt times action_repeat)."""
    randomization: dict[str, Any]
    """`Randomization.to_dict()` of the run's `env.randomization` at the check's model count."""
    perturbations: dict[str, Any]
    """What the environment's own config says of pushes and observation noise (`perturbations_of`)."""
    eval_episodes: int
    """Episodes of each of the run's evaluations in training (run.num_eval_envs)."""


def run_transfer_check(options: TransferCheckOptions, say: Callable[[str], None] = print) -> TransferRun:
    """Runs the check's episodes (see the module docstring); UserError for every bad input, before running."""
    from rlfit.deploy.play.session import load_native_env, read_run_config
    from rlfit.deploy.transfer.models import EPISODES, check_key, draw_check_models, native_copy, nominal_fields, row
    from rlfit.envs.randomization import resolve_randomization
    from rlfit.envs.vec_env import episode_steps
    from rlfit.hardware.jax_setup import configure_jax

    check_counts(options)
    existing_run_dir(options.run_dir)
    config = read_run_config(options.run_dir)
    path = onnx_path(options.run_dir, options.onnx)
    configure_jax(config.run.precision)
    env, mj_model, obs = load_native_env(config)
    sizes = ({name: int(value.size) for name, value in obs.items()} if isinstance(obs, dict)
             else {ARRAY_OBS_NAME: int(obs.size)})
    policy = load_onnx_policy(path, config.env.name, sizes, int(env.action_size))
    randomization = resolve_randomization(config.env.randomization, config.env.name, env, options.models)
    run_steps = episode_steps(config.env, env)
    if options.max_steps is not None and options.max_steps > run_steps:
        raise UserError(f"--max-steps {options.max_steps} is longer than the run's episodes ({run_steps} policy steps, "
                        "what training and its evaluation ran); give at most that")
    max_steps = options.max_steps or run_steps
    control_dt = float(env.dt) * config.env.action_repeat
    models = [ModelRun(NOMINAL, -1, {}, mj_model, options.models * options.episodes_per_model)]
    if randomization.enabled:
        batch = draw_check_models(randomization.function, env.mjx_model, options.seed, options.models)
        models = [ModelRun(NOMINAL, -1, nominal_fields(env.mjx_model, batch), mj_model, models[0].episodes)]
        models += [ModelRun(RANDOMIZED, i, row(batch, i), native_copy(mj_model, row(batch, i)),
                            options.episodes_per_model) for i in range(options.models)]
    say(f"transfer check of {config.env.name}: {path.name} through onnxruntime in native MuJoCo, "
        f"{models[0].episodes} episodes on the nominal model"
        + (f" and {options.episodes_per_model} on each of {options.models} randomized models" if randomization.enabled
           else f" ({randomization.note or 'no randomizer'})")
        + f", up to {max_steps} steps of {control_dt:g} s each")
    key = jax.random.fold_in(check_key(options.seed), EPISODES)
    records = run_episodes(env, config.env.name, policy, models, max_steps, config.env.action_repeat, key, say)
    return TransferRun(config.env.name, path, records, max_steps, run_steps, control_dt, randomization.to_dict(),
                       perturbations_of(env), config.run.num_eval_envs)


def perturbations_of(env: Any) -> dict[str, Any]:
    """Pushes and observation noise as the environment's own (Playground) config sets them, which its step applies:
    {'pushes': bool or None, 'observation_noise_level': float or None}; None where the config has no such entry."""
    config = getattr(env, "_config", None)
    push = getattr(getattr(config, "push_config", None), "enable", None)
    noise = getattr(getattr(config, "noise_config", None), "level", None)
    return {"pushes": None if push is None else bool(push),
            "observation_noise_level": None if noise is None else float(noise)}
