"""summary.json of a training session: what ran, how fast, where it ended (`run_summary`, a
`rlfit.run.summary_record.RunSummary`), and the parameters' digest that tells two runs' results apart bit for bit
(`params_digest`)."""

from __future__ import annotations

import hashlib
from typing import Any

import jax
import numpy as np

from rlfit.algos.contract import PyTree, TrainState
from rlfit.config.schema import Config
from rlfit.envs.observation_set import observation_set_of
from rlfit.hardware.compile_log import ProgramCompile
from rlfit.hardware.probe import peak_bytes_in_use
from rlfit.planning.plan import Plan
from rlfit.run.progress import Progress
from rlfit.run.trainer import Environment, Trainer
from rlfit.run.summary_record import RunSummary
from rlfit.versions import package_versions


def params_digest(params: PyTree) -> str:
    """sha256 of the parameters' bytes, leaf by leaf in tree order."""
    digest = hashlib.sha256()
    for leaf in jax.tree.leaves(jax.device_get(params)):
        digest.update(np.ascontiguousarray(leaf).tobytes())
    return digest.hexdigest()


def config_total_steps(config: Config, plan: Plan) -> int:
    """Env steps the run will have made at its last iteration (for progress display)."""
    return max(config.run.num_timesteps, plan.num_iterations * plan.env_steps_per_iteration)


def run_summary(trainer: Trainer[TrainState], state: TrainState | None, progress: Progress, *, compile_s: float,
                compile_reused: bool, init_s: float, train_wall_s: float, session_steps: int, eval_s: float,
                stopped_by: str | None, programs: tuple[ProgramCompile, ...] = (),
                time_to_first_step_s: float | None = None, compile_wait_s: float = 0.0) -> RunSummary:
    """The summary of a session of `trainer`'s run that ended at `state`/`progress`. `programs`: each compiled
    program's name, seconds and whether the persistent cache supplied it (empty when this process's programs were
    reused); `time_to_first_step_s`: to the end of the session's first training step from the process's start (from
    the session's start for a later run in the same process, an experiment's next trial); `compile_wait_s`: how
    long the session waited for programs compiling in the background (`Trainer.compile`) once it needed them."""
    return RunSummary(
        env=trainer.config.env.name,
        final_eval_reward=progress.last_eval_reward,
        best_eval_reward=progress.best_eval_reward,
        final_eval_reward_randomized=progress.last_randomized_eval_reward,
        randomization=trainer.randomization.to_dict(),
        observation_set=observation_record(trainer.env),
        final_description_length_bits=progress.last_description_length_bits,
        iterations=progress.iteration,
        env_steps=progress.env_steps,
        session_env_steps=session_steps,
        train_wall_s=train_wall_s,
        compile_s=compile_s,
        compile_reused=compile_reused,
        compile_wait_s=compile_wait_s,
        programs=[program.as_dict() for program in programs],
        time_to_first_step_s=time_to_first_step_s,
        init_s=init_s,
        eval_s=eval_s,
        sps_mean=session_steps / train_wall_s if train_wall_s > 0 else None,
        **where_it_ran(trainer),
        events=progress.events,
        stopped_by=stopped_by,
        versions=package_versions(),
        params_digest=params_digest(state.params) if state is not None else None,
    )


def observation_record(env: Environment) -> dict[str, Any] | None:
    """summary.json's `observation_set`: the `robot` set `env` applies, or None for the environment's own."""
    chosen = observation_set_of(env)
    return None if chosen is None else chosen.to_dict()


def where_it_ran(trainer: Trainer[TrainState]) -> dict[str, Any]:
    """summary.json's fields on the devices and sizes of `trainer`'s run, with each local device's peak memory."""
    plan = trainer.plan
    peaks = [peak for peak in map(peak_bytes_in_use, trainer.layout.local_devices()) if peak is not None]
    return {"device": plan.device, "backend": plan.backend, "impl": plan.impl, "sizes": plan.sizes._asdict(),
            "preset": plan.preset, "predicted_bytes": plan.predicted_bytes, "devices": trainer.layout.describe(),
            "device_peak_bytes": max(peaks, default=None), "device_peak_bytes_per_device": peaks or None}
