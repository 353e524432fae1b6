"""Continuing a run in its own directory: same config, restored state, a new total.

    rlfit resume RUN_DIR --timesteps N     (N is the new total, not an increment)

Everything is checked before the directory is touched: a refused resume changes nothing.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

import yaml

from rlfit.checkpoint import load_latest
from rlfit.config import Config, from_layers, read_yaml
from rlfit.errors import UserError
from rlfit.plan import BatchSizes, make_plan
from rlfit.rundir import RunDir, write_atomic, write_json
from rlfit.runner import Progress, RunResult
from rlfit.sinks.jsonl import truncate_after

# Keys that may differ between the run and the resumed session; all others must match.
RESUMABLE_CHANGES = ("run.num_timesteps", "run.eval_every", "run.save_interval", "run.keep_checkpoints",
                     "run.continue_on_save_error", "run.fit_to_device", "run.oom_backoff")


def open_run(path: str | Path) -> tuple[RunDir, Config]:
    """The run directory and its saved config; a missing or broken one is a UserError."""
    directory = RunDir(Path(path))
    if not directory.config.is_file():
        raise UserError(f"{directory.path} is not an rlfit run directory (no config.yaml); "
                        "give the directory `rlfit train` wrote")
    return directory, from_layers([read_yaml(directory.config)])


def first_difference(saved: Config, requested: Config) -> str | None:
    """The first key (other than RESUMABLE_CHANGES) whose value differs, described in words."""
    old, new = saved.to_dict(), requested.to_dict()
    for section in old:
        for key in old[section]:
            name = f"{section}.{key}"
            if name not in RESUMABLE_CHANGES and old[section][key] != new[section][key]:
                return f"{name} is {old[section][key]!r} in the run but {new[section][key]!r} now"
    return None


def resume(path: str | Path, *, timesteps: int | None = None, iterations: int | None = None,
           requested: Config | None = None, overrides: dict[str, Any] | None = None, quiet: bool = True,
           live: bool | None = None) -> RunResult:
    """Continues the run at `path` to a new total of `timesteps` env steps or `iterations` iterations."""
    from rlfit.api import execute
    from rlfit.jax_setup import configure_jax
    from rlfit.trainer import Trainer

    directory, saved = open_run(path)
    if requested is not None:
        difference = first_difference(saved, requested)
        if difference:
            raise UserError(f"cannot resume {directory.path}: {difference}; resume with the run's settings "
                            "or start a new run")
    config = requested or saved
    if overrides:
        config = config.replace(**overrides)
    if iterations is not None and timesteps is not None:
        raise UserError("give either --timesteps or --iterations, not both")
    plan_dict = _read_plan(directory)
    sizes = BatchSizes(**plan_dict["sizes"])
    configure_jax(config.run.precision)
    reasons = tuple(plan_dict.get("reasons", ())) + ("resumed with the run's sizes",)
    trainer = Trainer.build(config, make_plan(config, sizes, reasons))
    state, meta = load_latest(directory.checkpoints, trainer.abstract_state(),
                              warn=lambda text: print(text, file=sys.stderr, flush=True))
    done = (meta.iteration, meta.env_steps)
    if iterations is not None:
        timesteps = meta.env_steps + (iterations - meta.iteration) * trainer.plan.env_steps_per_iteration
    if timesteps is not None:
        config = config.replace(run={"num_timesteps": max(1, timesteps)})
    plan = make_plan(config, sizes, reasons, done)
    if plan.num_iterations <= meta.iteration:
        raise UserError(f"{directory.path} is already at iteration {meta.iteration} ({meta.env_steps:,} env steps); "
                        f"give a larger total (--iterations > {meta.iteration} or --timesteps > {meta.env_steps})")
    trainer = dataclasses.replace(trainer, config=config, plan=plan)
    progress = _progress_from(meta.progress)
    # From here on the run directory changes.
    write_atomic(directory.config, yaml.safe_dump(config.to_dict(), sort_keys=False))
    write_json(directory.plan, plan.to_dict())
    truncate_after(directory.metrics, meta.iteration)
    return execute(trainer, directory, state, progress, quiet=quiet, live=live)


def _read_plan(directory: RunDir) -> dict[str, Any]:
    import json

    try:
        return json.loads(directory.plan.read_text())
    except (OSError, ValueError) as error:
        raise UserError(f"cannot read {directory.plan} ({error}); the run directory is incomplete") from None


def _progress_from(saved: dict[str, Any]) -> Progress:
    names = {f.name for f in dataclasses.fields(Progress)}
    return Progress(**{k: v for k, v in saved.items() if k in names})
