"""The run directory: where a run's config, plan, metrics, summary, TensorBoard files and checkpoints live.

    runs/<env>-<YYYYmmdd-HHMMSS>/
        config.yaml      resolved config        plan.json     what ran (sizes, device, reasons)
        metrics.jsonl    one row per iteration   summary.json  written at the end
        tb/              TensorBoard events      checkpoints/  full training state
        policy/          the policy alone, for deployment
        .rlfit.lock      held by the process writing the run (see rlfit.rundir.lock)
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rlfit.rundir.atomic import write_atomic
from rlfit.config.schema import Config
from rlfit.envs.loading import env_label
from rlfit.errors import UserError
from rlfit.rundir.lock import LOCK_FILE, RunLock, check_not_in_use
from rlfit.rundir.write_failures import WriteFailed, refusal


@dataclass(frozen=True)
class RunDir:
    """The paths of one run directory's parts."""

    path: Path

    @property
    def config(self) -> Path:
        return self.path / "config.yaml"

    @property
    def plan(self) -> Path:
        return self.path / "plan.json"

    @property
    def metrics(self) -> Path:
        return self.path / "metrics.jsonl"

    @property
    def summary(self) -> Path:
        return self.path / "summary.json"

    @property
    def tensorboard(self) -> Path:
        return self.path / "tb"

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    @property
    def policy(self) -> Path:
        return self.path / "policy"


def default_run_path(env_name: str, root: str | Path = "runs") -> Path:
    return Path(root) / f"{env_label(env_name)}-{time.strftime('%Y%m%d-%H%M%S')}"


def check_new_run_dir(path: Path) -> None:
    """A new run never writes into a directory that already holds something (or into a file)."""
    if path.exists() and not path.is_dir():
        raise UserError(f"run directory {path} is a file, not a directory; choose another --run-dir")
    if path.is_dir() and any(p.name != LOCK_FILE for p in path.iterdir()):
        check_not_in_use(path)
        hint = (f"choose another --run-dir, or continue it with `rlfit resume {path}`" if looks_resumable(path)
                else "choose another --run-dir (or delete it)")
        raise UserError(f"run directory {path} already exists and is not empty; {hint}")


def looks_resumable(path: Path) -> bool:
    """True when `rlfit resume` can continue `path`: it has a checkpoint, or a config and no progress yet."""
    from rlfit.checkpoints.format import list_steps
    from rlfit.sinks.jsonl import read_rows

    run_dir = RunDir(path)
    if list_steps(run_dir.checkpoints):
        return True
    return run_dir.config.is_file() and not any(r.get("kind") == "train" for r in read_rows(run_dir.metrics))


def create_run_dir(path: Path, config: Config) -> tuple[RunDir, RunLock]:
    """Creates and locks the directory, writes `config.yaml` (call only once all input has been validated).

    Raises UserError (one line naming the path and the cause: exit 2, or 4 when the disk refuses the write) when
    it cannot be created or written, or when another process holds it.
    """
    check_new_run_dir(path)
    with user_path_errors(path, "choose another --run-dir"):
        path.mkdir(parents=True, exist_ok=True)
        lock = RunLock.acquire(path, "train")
    try:
        check_new_run_dir(path)  # again under the lock: another process may have started in it meanwhile
        run_dir = RunDir(path)
        with user_path_errors(run_dir.config, "choose another --run-dir"):
            write_atomic(run_dir.config, yaml.safe_dump(config.to_dict(), sort_keys=False))
    except BaseException:
        lock.release()
        raise
    return run_dir, lock


def lock_run_dir(path: Path, command: str) -> RunLock:
    """Locks an existing run directory for `command` (resume), or raises a one-line UserError."""
    with user_path_errors(path, "check the directory's permissions"):
        return RunLock.acquire(path, command)


@contextmanager
def user_path_errors(path: Path, fix: str) -> Iterator[None]:
    """Turns an OSError into one line: exit 4 when the disk refuses the write (full, over quota, read-only),
    exit 2 for a path that cannot be used (not a directory, permission denied)."""
    try:
        yield
    except OSError as error:
        where = error.filename or path
        what = f"cannot write {where}: {error.strerror or error}"
        if refusal(error) is not None:
            raise WriteFailed(what, f"free space or {fix}") from None
        raise UserError(f"{what}; {fix}") from None


def write_json(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
