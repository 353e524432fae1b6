"""Restoring a run from its own directory: the checkpoint's config checked against config.yaml, the newest
checkpoint that verifies, the directory rewound to it. A library: `rlfit.run.resume` (the `rlfit resume`
command's session) and the study's seed groups use it."""

from __future__ import annotations

import dataclasses
import sys
from typing import TYPE_CHECKING, Any

import yaml

from rlfit.checkpoints.format import (CheckpointMeta, CheckpointMismatch, CorruptCheckpoint,
                                      load_checkpoint, read_meta)
from rlfit.checkpoints.metrics_copy import repair_metrics
from rlfit.config.schema import Config, from_layers, read_yaml
from rlfit.errors import UserError
from rlfit.planning.plan import make_plan, sizes_from_dict
from rlfit.rundir.atomic import write_atomic
from rlfit.rundir.layout import RunDir, list_steps, write_json

if TYPE_CHECKING:
    from rlfit.algos.contract import Sizes, TrainState
    from rlfit.run.trainer import Environment, Trainer


# Keys that may differ between the run and the resumed session; all others must match.
RESUMABLE_CHANGES = ("run.num_timesteps", "run.eval_every", "run.save_interval", "run.keep_checkpoints",
                     "run.continue_on_save_error", "run.fit_to_device", "run.oom_backoff", "run.checkpoint_replay",
                     "run.time_budget", "run.stop_grace_s", "run.early_stop_patience", "run.early_stop_min_delta",
                     "run.target_reward",
                     "run.wandb", "run.wandb_project", "run.wandb_entity", "run.wandb_group", "run.wandb_timeout_s",
                     "run.devices")


def warn(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


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


def rewind_run_dir(directory: RunDir, iteration: int, config: Config, plan: dict[str, Any]) -> None:
    """The run directory made ready to continue from checkpoint `iteration`: metrics.jsonl cut back to it
    (damaged lines repaired), config.yaml and plan.json (`plan`, as recorded) written for the new session."""
    repair_metrics(directory, iteration, warn)
    write_atomic(directory.config, yaml.safe_dump(config.to_dict(), sort_keys=False))
    write_json(directory.plan, plan)


EARLIER_VALUES = {("env", "randomization"): "off"}
"""Keys added since runs were first saved, with the value a run saved without them trained with (where that is not
the key's default: runs before domain randomization trained on the nominal model)."""


def as_saved(layer: dict[str, Any]) -> dict[str, Any]:
    """A saved config (a checkpoint's record or config.yaml) with EARLIER_VALUES for the keys it lacks."""
    layer = {section: dict(keys) if isinstance(keys, dict) else keys for section, keys in layer.items()}
    for (section, key), value in EARLIER_VALUES.items():
        if isinstance(layer.get(section), dict) and key not in layer[section]:
            layer[section][key] = value
    return layer


def checked_config(directory: RunDir, record: CheckpointMeta) -> Config:
    """config.yaml checked against the checkpoint's record (rebuilt from it when missing or unreadable)."""
    truth = from_layers([as_saved(record.config)])
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
        return from_layers([as_saved(data)]), ""
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


def restore_newest(directory: RunDir, config: Config, at_most: int | None = None,
                   env: Environment | None = None) -> tuple[Trainer[TrainState], TrainState, CheckpointMeta]:
    """(trainer, state, meta) from the newest checkpoint that verifies (of iteration `at_most` or before, when
    given), each with the sizes it was saved with, built on `env` (the environment already loaded; None: loaded
    here, once).

    Each unusable newer checkpoint is reported in one line, saying whether it is corrupt or does not match.
    """
    from rlfit.run.trainer import Trainer

    steps = [step for step in list_steps(directory.checkpoints) if at_most is None or step <= at_most]
    trainers: dict[Sizes, Trainer[TrainState]] = {}
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
                plan = dataclasses.replace(plan, preset=meta.plan.get("preset"))
                env = next(iter(trainers.values())).env if trainers else env
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
    changed = differences(from_layers([as_saved(meta.config)]), config)
    if changed:
        key, old, new = changed[0]
        raise CheckpointMismatch(f"checkpoint {meta.iteration} does not match this run's config ({key} is {old!r} "
                                 f"there, {new!r} here)")
