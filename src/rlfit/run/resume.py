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
from pathlib import Path
from collections.abc import Callable, Sequence
from typing import Any

import yaml

from rlfit.checkpoints.format import CheckpointMeta, dropped_leaves
from rlfit.config.schema import Config
from rlfit.errors import UserError
from rlfit.planning.plan import make_plan
from rlfit.run.lanes import LaneSpec
from rlfit.run.loop import RunResult, lane_plan
from rlfit.run.progress import Progress
from rlfit.run.restore import (checked_config, differences, read_newest_meta, read_saved_config, restore_newest,
                               rewind_run_dir, warn)
from rlfit.run.summary_record import SessionSummary
from rlfit.algos.contract import TrainState
from rlfit.run.trainer import Trainer
from rlfit.rundir.atomic import write_atomic
from rlfit.rundir.layout import RunDir, lock_run_dir, open_run, write_json


@dataclasses.dataclass(frozen=True)
class Request:
    """What the user asked of the resumed session."""

    timesteps: int | None = None
    iterations: int | None = None
    requested: Config | None = None
    """`rlfit train ENV ... --resume`: the config that command resolves to; any difference is refused."""
    overrides: dict[str, Any] | None = None
    """Changes to RESUMABLE_CHANGES keys, by section."""


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
    from rlfit.run.opener import open_planned
    from rlfit.run.session import execute

    config = apply_request(checked_config(directory, record), request)
    open_planned(config)
    trainer, state, meta = restore_newest(directory, config)
    if dropped_leaves(meta):
        assert trainer.learner.refill is not None, "only a state that can be refilled leaves rows out"
        state = trainer.learner.refill(state)
        warn(f"rlfit: checkpoint {meta.iteration} was saved without its replay buffer (run.checkpoint_replay=false): "
             "collected again as at the start; from here the run is not bit-identical to an uninterrupted one")
    if request.iterations is not None:
        config = config.replace(run={"num_timesteps": max(1, meta.env_steps + (request.iterations - meta.iteration)
                                                          * trainer.plan.env_steps_per_iteration)})
    lane = continued_lane(directory, trainer, config, meta)
    return execute(lane.trainer, directory, state, lane.progress, quiet=quiet, live=live)


def continued_lane(directory: RunDir, trainer: Trainer[TrainState], config: Config, meta: CheckpointMeta,
                   note: dict[str, Any] | None = None) -> LaneSpec:
    """The lane that continues `directory` from checkpoint `meta` (restored as `trainer`'s) to `config`'s total:
    its plan from the checkpoint's sizes, refused in one line where the run is there already, and the run
    directory rewound to the checkpoint (metrics, config.yaml, plan.json; `note`: its seed group)."""
    from rlfit.parallel.distributed import is_writer

    plan = dataclasses.replace(make_plan(config, trainer.plan.sizes, trainer.plan.reasons,
                                         (meta.iteration, meta.env_steps)), preset=trainer.plan.preset)
    finished = plan.num_iterations < meta.iteration or summary_written(directory, meta.iteration)
    if plan.num_iterations <= meta.iteration and finished:
        raise UserError(f"{directory.path} is already at iteration {meta.iteration} ({meta.env_steps:,} env steps); "
                        f"give a larger total (`rlfit resume {directory.path} --iterations N` with N > {meta.iteration}, "
                        f"or --timesteps N with N > {meta.env_steps})")
    trainer = dataclasses.replace(trainer, config=config, plan=plan)
    if is_writer():  # from here on the run directory changes (process 0's alone over several processes)
        rewind_run_dir(directory, meta.iteration, config, lane_plan(plan, note).to_dict())
    return LaneSpec(trainer, directory, Progress.from_record(meta.progress), note)


def continue_group(directories: Sequence[RunDir], records: Sequence[CheckpointMeta], note: dict[str, Any],
                   say: Callable[[str], None]) -> list[RunResult] | None:
    """Continues the lanes of a stopped or killed seed group (locks held) in one program, from the newest checkpoint
    they all have (a kill between two lanes' saves leaves one lane a checkpoint ahead: it goes back to the others'
    and computes the same again), to the plan's end: bit-identical to the group never stopped. None, with nothing
    written, when they cannot continue together (no common checkpoint, replay left out, other sizes)."""
    from rlfit.run.lanes import train_lanes
    from rlfit.run.opener import open_planned
    from rlfit.run.seed_group import SeedGroup

    common = min(record.iteration for record in records)
    configs = [checked_config(directory, record) for directory, record in zip(directories, records, strict=True)]
    open_planned(configs[0])
    restored = []
    for directory, config in zip(directories, configs, strict=True):
        try:
            restored.append(restore_newest(directory, config, at_most=common))
        except UserError:  # nothing at or before the common iteration: this lane resumes alone
            return None
    if len({meta.iteration for *_, meta in restored}) > 1 or len({trainer.plan.sizes for trainer, *_ in restored}) > 1 \
            or any(dropped_leaves(meta) for *_, meta in restored):
        return None
    lanes = [continued_lane(directory, trainer, trainer.config, meta, note)
             for directory, (trainer, _, meta) in zip(directories, restored, strict=True)]
    group = SeedGroup.build(lanes[0].trainer, [lane.trainer.config.run.seed for lane in lanes])
    say(f"rlfit: resuming seeds {', '.join(str(s) for s in group.seeds)} in one program from iteration "
        f"{common}")
    return train_lanes(group, lanes, group.stack([state for _, state, _ in restored]), say=say)


def summary_written(directory: RunDir, iteration: int) -> bool:
    """True when summary.json records a session that ended at `iteration`; a run that saved its last checkpoint
    but could not write its summary (a full disk) is not finished: resuming it writes the summary."""
    try:
        return SessionSummary.from_json(json.loads(directory.summary.read_text())).iterations == iteration
    except (OSError, ValueError, TypeError):
        return False


def restart(directory: RunDir, request: Request, quiet: bool, live: bool | None) -> RunResult:
    """A run without any checkpoint: refused if it logged iterations, else started again from its config."""
    from rlfit.run.opener import open_session
    from rlfit.run.probes import StepProbes
    from rlfit.run.session import execute
    from rlfit.sinks.jsonl import read_rows, truncate_after

    logged = sum(1 for row in read_rows(directory.metrics) if row.get("kind") == "train")
    if logged:
        raise UserError(f"{directory.path} has no checkpoint although {logged} iterations were logged, so it cannot "
                        "continue; start a new run in another directory (`rlfit train ENV --run-dir OTHER`)")
    config, problem = read_saved_config(directory)
    if config is None:
        raise UserError(f"{directory.path} has no checkpoint and its config.yaml is {problem}, so there is nothing to "
                        "resume; start a new run in another directory (`rlfit train ENV --run-dir OTHER`)")
    config, plan, env = open_session(apply_request(config, request, restarting=True), StepProbes())
    trainer = Trainer.build(config, plan, env=env)
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


