"""Continuing a run in its own directory: the checkpoint's config, its restored state, a new total.

    rlfit resume RUN_DIR --timesteps N     (N is the new total, not an increment)

The checkpoint's own record of the config (its meta.json) is the truth: config.yaml may differ from it only
in RESUMABLE_CHANGES, a missing or unreadable config.yaml is rebuilt from it, and the sizes come from the
checkpoint's plan. Everything is checked under the run directory's lock before anything is written: a
refused resume changes nothing. A run stopped before its first checkpoint (and so before its first
iteration) starts again from the beginning with its saved config.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from rlfit.checkpoints.format import (CheckpointMeta, CheckpointMismatch, CorruptCheckpoint, dropped_leaves, list_steps,
                              load_checkpoint, read_meta)
from rlfit.config.schema import Config, from_layers, read_yaml
from rlfit.errors import UserError
from rlfit.planning.plan import make_plan, sizes_from_dict
from rlfit.rundir.layout import RunDir, lock_run_dir, write_atomic, write_json
from rlfit.checkpoints.metrics_copy import repair_metrics
from rlfit.run.loop import Progress, RunResult
from rlfit.sinks.wandb import check_wandb_available

# Keys that may differ between the run and the resumed session; all others must match.
RESUMABLE_CHANGES = ("run.num_timesteps", "run.eval_every", "run.save_interval", "run.keep_checkpoints",
                     "run.continue_on_save_error", "run.fit_to_device", "run.oom_backoff", "run.checkpoint_replay",
                     "run.time_budget", "run.early_stop_patience", "run.early_stop_min_delta", "run.target_reward",
                     "run.wandb", "run.wandb_project", "run.wandb_entity", "run.wandb_group", "run.wandb_timeout_s",
                     "run.devices")


@dataclasses.dataclass(frozen=True)
class Request:
    """What the user asked of the resumed session."""

    timesteps: int | None = None
    iterations: int | None = None
    requested: Config | None = None
    """`rlfit train ENV ... --resume`: the config that command resolves to; any difference is refused."""
    overrides: dict[str, Any] | None = None
    """Changes to RESUMABLE_CHANGES keys, by section."""


def warn(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def open_run(path: str | Path) -> RunDir:
    """The run directory at `path`; one that rlfit did not write is a UserError."""
    directory = RunDir(Path(path))
    if not directory.path.is_dir() or not (directory.config.exists() or list_steps(directory.checkpoints)):
        raise UserError(f"{directory.path} is not an rlfit run directory (no config.yaml, no checkpoints); "
                        "give the directory `rlfit train` wrote")
    return directory


def differences(old: Config, new: Config, allowed: tuple[str, ...] = RESUMABLE_CHANGES) -> list[tuple[str, Any, Any]]:
    """(key, old value, new value) for every key outside `allowed` whose value differs."""
    a, b = flat_keys(old.to_dict()), flat_keys(new.to_dict())
    return [(key, a.get(key), b.get(key)) for key in dict.fromkeys([*a, *b])
            if key not in allowed and a.get(key) != b.get(key)]


def flat_keys(config: dict[str, Any]) -> dict[str, Any]:
    """{'algo': 'ppo', 'env': {'name': ...}} -> {'algo': 'ppo', 'env.name': ...}."""
    return {(f"{section}.{key}" if isinstance(keys, dict) else section): value
            for section, keys in config.items()
            for key, value in (keys.items() if isinstance(keys, dict) else [(None, keys)])}


def resume(path: str | Path, *, timesteps: int | None = None, iterations: int | None = None,
           requested: Config | None = None, overrides: dict[str, Any] | None = None, quiet: bool = True,
           live: bool | None = None) -> RunResult:
    """Continues the run at `path` to a new total of `timesteps` env steps or `iterations` iterations."""
    if iterations is not None and timesteps is not None:
        raise UserError("give either --timesteps or --iterations, not both")
    from rlfit.parallel.distributed import is_writer, process_count

    directory = open_run(path)
    request = Request(timesteps, iterations, requested, overrides)
    # Over several processes (`rlfit resume --distributed`, the run directory on a file system all of them
    # see) process 0 holds the lock and writes; the others read the same checkpoint.
    with lock_run_dir(directory.path, "resume") if is_writer() else contextlib.nullcontext():
        record = read_newest_meta(directory)
        if record is None and process_count() > 1:
            raise UserError(f"{directory.path} has no checkpoint to resume over several processes; start it again "
                            "with `rlfit train ... --distributed`")
        if record is None:
            return restart(directory, request, quiet, live)
        return continue_run(directory, record, request, quiet, live)


def continue_run(directory: RunDir, record: CheckpointMeta, request: Request, quiet: bool,
                 live: bool | None) -> RunResult:
    """Resumes from the newest valid checkpoint, `record` being the newest readable record (lock held)."""
    from rlfit.api import execute
    from rlfit.parallel.distributed import is_writer
    from rlfit.hardware.jax_setup import configure_jax
    from rlfit.planning.planner import check_device_precision

    config = apply_request(checked_config(directory, record), request)
    check_wandb_available(config)
    check_device_precision(config.run.precision)
    configure_jax(config.run.precision)
    trainer, state, meta = restore_newest(directory, config)
    if dropped_leaves(meta):
        state = trainer.learner.refill(state)
        warn(f"rlfit: checkpoint {meta.iteration} was saved without its replay buffer (run.checkpoint_replay=false): "
             "collected again as at the start; from here the run is not bit-identical to an uninterrupted one")
    done = (meta.iteration, meta.env_steps)
    if request.iterations is not None:
        config = config.replace(run={"num_timesteps": max(1, meta.env_steps + (request.iterations - meta.iteration)
                                                          * trainer.plan.env_steps_per_iteration)})
    plan = make_plan(config, trainer.plan.sizes, trainer.plan.reasons, done)
    finished = plan.num_iterations < meta.iteration or summary_written(directory, meta.iteration)
    if plan.num_iterations <= meta.iteration and finished:
        raise UserError(f"{directory.path} is already at iteration {meta.iteration} ({meta.env_steps:,} env steps); "
                        f"give a larger total (`rlfit resume {directory.path} --iterations N` with N > {meta.iteration}, "
                        f"or --timesteps N with N > {meta.env_steps})")
    trainer = dataclasses.replace(trainer, config=config, plan=plan)
    if is_writer():  # from here on the run directory changes (process 0's alone over several processes)
        rewind_run_dir(directory, meta.iteration, config, plan.to_dict())
    return execute(trainer, directory, state, Progress.from_record(meta.progress), quiet=quiet, live=live)


def summary_written(directory: RunDir, iteration: int) -> bool:
    """True when summary.json records a session that ended at `iteration`; a run that saved its last checkpoint
    but could not write its summary (a full disk) is not finished: resuming it writes the summary."""
    try:
        return json.loads(directory.summary.read_text()).get("iterations") == iteration
    except (OSError, ValueError, AttributeError):
        return False


def rewind_run_dir(directory: RunDir, iteration: int, config: Config, plan: dict[str, Any]) -> None:
    """The run directory made ready to continue from checkpoint `iteration`: metrics.jsonl cut back to it
    (damaged lines repaired), config.yaml and plan.json (`plan`, as recorded) written for the new session."""
    repair_metrics(directory, iteration, warn)
    write_atomic(directory.config, yaml.safe_dump(config.to_dict(), sort_keys=False))
    write_json(directory.plan, plan)


def restart(directory: RunDir, request: Request, quiet: bool, live: bool | None) -> RunResult:
    """A run without any checkpoint: refused if it logged iterations, else started again from its config."""
    from rlfit.api import execute
    from rlfit.hardware.jax_setup import configure_jax
    from rlfit.planning import plan_for
    from rlfit.sinks.jsonl import read_rows, truncate_after
    from rlfit.run.build import Trainer

    logged = sum(1 for row in read_rows(directory.metrics) if row.get("kind") == "train")
    if logged:
        raise UserError(f"{directory.path} has no checkpoint although {logged} iterations were logged, so it cannot "
                        "continue; start a new run in another directory (`rlfit train ENV --run-dir OTHER`)")
    config, problem = read_saved_config(directory)
    if config is None:
        raise UserError(f"{directory.path} has no checkpoint and its config.yaml is {problem}, so there is nothing to "
                        "resume; start a new run in another directory (`rlfit train ENV --run-dir OTHER`)")
    config = apply_request(config, request, restarting=True)
    check_wandb_available(config)
    config, plan = plan_for(config, auto_num_envs=config.run.fit_to_device)
    configure_jax(plan.precision)
    trainer = Trainer.build(config, plan)
    warn(f"rlfit: {directory.path} stopped before its first checkpoint (no iteration was lost); "
         "starting it from the beginning with its saved config")
    truncate_after(directory.metrics, 0, [])
    write_atomic(directory.config, yaml.safe_dump(config.to_dict(), sort_keys=False))
    write_json(directory.plan, plan.to_dict())
    return execute(trainer, directory, quiet=quiet, live=live)


def apply_request(config: Config, request: Request, restarting: bool = False) -> Config:
    """The config with the user's allowed changes; `requested` (train --resume) must equal it in every key."""
    if request.requested is not None:
        changed = differences(config, request.requested, allowed=())
        if changed:
            key, old, new = changed[0]
            fix = (" (to change the total, use `rlfit resume RUN_DIR --timesteps N`)" if key == "run.num_timesteps"
                   else "")
            raise UserError(f"cannot resume: {key} is {old!r} in the run but {new!r} in this command; `--resume` "
                            f"continues a run with exactly its own settings{fix}")
    if request.overrides:
        config = config.replace(**request.overrides)
    if request.timesteps is not None:
        config = config.replace(run={"num_timesteps": max(1, request.timesteps)})
    if restarting and request.iterations is not None:
        from rlfit.planning.plan import config_sizes  # noqa: PLC0415 - imports JAX

        per_iteration = config_sizes(config).steps_per_iteration * config.env.action_repeat
        config = config.replace(run={"num_timesteps": request.iterations * per_iteration})
    return config


def checked_config(directory: RunDir, record: CheckpointMeta) -> Config:
    """config.yaml checked against the checkpoint's record (rebuilt from it when missing or unreadable)."""
    truth = from_layers([record.config])
    saved, problem = read_saved_config(directory)
    if saved is None:
        warn(f"rlfit: warning: {directory.config} is {problem}; rebuilt from checkpoint {record.iteration}'s record")
        return truth
    changed = differences(truth, saved)
    if changed:
        key, old, new = changed[0]
        raise UserError(f"cannot resume {directory.path}: {key} is {new!r} in config.yaml but the checkpoints were "
                        f"trained with {old!r}; restore config.yaml (or delete it to rebuild it from the checkpoint), "
                        "or start a new run to change it")
    return saved


def read_saved_config(directory: RunDir) -> tuple[Config | None, str]:
    """The run's config.yaml as a Config, or None and what is wrong with it ('missing', 'empty', ...)."""
    try:
        text = directory.config.read_text()
    except FileNotFoundError:
        return None, "missing"
    except (OSError, UnicodeDecodeError) as error:
        return None, f"unreadable ({error})"
    if not text.strip():
        return None, "empty"
    try:
        data = read_yaml(directory.config)
    except UserError as error:
        return None, f"unreadable ({error})"
    try:
        return from_layers([data]), ""
    except UserError as error:
        raise UserError(f"{directory.config} is invalid: {error}; restore it, or delete it to rebuild it from "
                        "the checkpoint") from None


def read_newest_meta(directory: RunDir) -> CheckpointMeta | None:
    """The record (meta.json) of the newest checkpoint that has a readable one."""
    for iteration in reversed(list_steps(directory.checkpoints)):
        meta = read_meta(directory.checkpoints, iteration)
        if meta is not None:
            return meta
    return None


def restore_newest(directory: RunDir, config: Config, at_most: int | None = None) -> tuple[Any, Any, CheckpointMeta]:
    """(trainer, state, meta) from the newest checkpoint that verifies (of iteration `at_most` or before, when
    given), each with the sizes it was saved with.

    Each unusable newer checkpoint is reported in one line, saying whether it is corrupt or does not match.
    """
    from rlfit.run.build import Trainer

    steps = [step for step in list_steps(directory.checkpoints) if at_most is None or step <= at_most]
    trainers: dict[Any, Any] = {}
    problems = []
    for iteration in reversed(steps):
        meta = read_meta(directory.checkpoints, iteration)
        try:
            if meta is None:
                raise CorruptCheckpoint(f"checkpoint {iteration} has no readable meta.json")
            _check_same_run(meta, config)
            sizes = sizes_from_dict(config, meta.plan["sizes"])
            if sizes not in trainers:
                plan = make_plan(config, sizes, tuple(meta.plan.get("reasons", ())) + ("resumed with the run's sizes",))
                env = next(iter(trainers.values())).env if trainers else None
                trainers[sizes] = Trainer.build(config, plan, env=env)
            state, meta = load_checkpoint(directory.checkpoints, iteration, trainers[sizes].abstract_state())
            return trainers[sizes], state, meta
        except CorruptCheckpoint as error:
            problems.append(error)
            warn(f"rlfit: warning: {error}; trying the previous checkpoint")
    kind = "do not match this run's config" if any(isinstance(p, CheckpointMismatch) for p in problems) else \
        "are corrupt or incomplete"
    raise UserError(f"no valid checkpoint in {directory.checkpoints} (all {len(steps)} {kind}); the run cannot "
                    "continue: start a new run in another directory (`rlfit train ENV --run-dir OTHER`)")


def _check_same_run(meta: CheckpointMeta, config: Config) -> None:
    changed = differences(from_layers([meta.config]), config)
    if changed:
        key, old, new = changed[0]
        raise CheckpointMismatch(f"checkpoint {meta.iteration} does not match this run's config ({key} is {old!r} "
                                 f"there, {new!r} here)")
