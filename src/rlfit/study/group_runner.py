"""An experiment's seed groups opened as lanes of the one host loop (`rlfit.run.loop`): the seeds of one config
trained in one compiled program (`rlfit.run.seed_group.SeedGroup`), each seed (a lane) writing its own ordinary run
directory as a run of that seed alone would: config.yaml, plan.json, metrics.jsonl, TensorBoard, checkpoints, the
policy, summary.json.

A lane logs, evaluates, saves and stops as a single run does, through the same loop, with the same out-of-memory
back-off (the group goes on at smaller sizes), stop grace and stopping rules:
- A lane that reaches `run.target_reward` or its early stop ends there, with a checkpoint and its summary; one that
  becomes non-finite is recorded as failed (`RunResult.failure`) where a single run raises NonFiniteError (the
  decision is documented in `rlfit.run.after_step`): neither saves the bad state. The program keeps computing
  finished lanes (their results are dropped) until every lane has ended, so a lane's arithmetic never depends on
  when the others end.
- `run.time_budget` and SIGTERM/SIGINT end every lane with a checkpoint, and the signal's exit code is raised once
  every lane's files are closed.
- Out of device memory with no smaller sizes raises OutOfMemory: every lane has a checkpoint (iteration 0 at least),
  and the experiment resumes each one on its own.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rlfit.config.schema import Config
from rlfit.planning.plan import PlanExtra
from rlfit.rundir.layout import RunDir, lock_run_dir, write_json
from rlfit.run.lanes import LaneSpec, train_lanes
from rlfit.run.loop import RunResult, lane_plan
from rlfit.run.new_run import create_run_dir
from rlfit.run.restore import read_newest_meta
from rlfit.run.resume import continue_group
from rlfit.run.seed_group import SeedGroup


def train_seed_group(group: SeedGroup, configs: Sequence[Config], paths: Sequence[Path],
                     say: Callable[[str], None], note: dict[str, Any]) -> list[RunResult]:
    """Creates a new run directory per config (lane i: `configs[i]`, seed `group.seeds[i]`, at `paths[i]`) and
    trains them all from their fresh states in `group`'s program; `note` goes into each plan.json and summary.json
    as `seed_group`."""
    with contextlib.ExitStack() as locks:
        lanes = []
        for config, path in zip(configs, paths, strict=True):
            directory, lock = create_run_dir(path, config)
            locks.enter_context(lock)
            write_json(directory.plan, lane_plan(group.trainer.plan, note).to_dict())
            lanes.append(LaneSpec(dataclasses.replace(group.trainer, config=config), directory, None, note))
        return train_lanes(group, lanes, say=say)


def continue_seed_group(paths: Sequence[Path], say: Callable[[str], None],
                        note: dict[str, Any]) -> list[RunResult] | None:
    """Continues the lanes of a stopped or killed group (their run directories, `paths`, locked here) together
    (`rlfit.run.resume.continue_group`); None, with nothing written, when they cannot: each resumes alone."""
    with contextlib.ExitStack() as locks:
        directories = [RunDir(path) for path in paths]
        for directory in directories:
            locks.enter_context(lock_run_dir(directory.path, "resume"))
        records = [read_newest_meta(directory) for directory in directories]
        if any(record is None for record in records):
            return None
        return continue_group(directories, [record for record in records if record is not None], note, say)


def recorded_group(path: Path) -> dict[str, Any] | None:
    """The `seed_group` record (seeds, size, reason) of the group a run directory was trained in (its
    plan.json), or None."""
    import json

    try:
        note = PlanExtra.from_json(json.loads(RunDir(path).plan.read_text())["extra"]).seed_group
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return note if isinstance(note, dict) and isinstance(note.get("seeds"), list) else None
