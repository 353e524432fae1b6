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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any


from rlfit.rundir.atomic import write_atomic
from rlfit.errors import UserError
from rlfit.rundir.lock import RunLock
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


def list_steps(directory: Path) -> list[int]:
    """Iterations of the (complete-looking) checkpoints in `directory`, oldest first."""
    if not directory.is_dir():
        return []
    return sorted(int(p.name) for p in directory.iterdir() if p.is_dir() and p.name.isdigit())


def open_run(path: str | Path) -> RunDir:
    """The run directory at `path`; one that rlfit did not write is a UserError (pure Python: `rlfit resume`
    checks its argument with it before it imports JAX)."""
    directory = RunDir(Path(path))
    if not directory.path.is_dir() or not (directory.config.exists() or list_steps(directory.checkpoints)):
        raise UserError(f"{directory.path} is not an rlfit run directory (no config.yaml, no checkpoints); "
                        "give the directory `rlfit train` wrote")
    return directory


def existing_run_dir(path: str | Path) -> Path:
    """`path` as a Path where it is a directory; else the one-line UserError of `rlfit play`, `export` and
    `transfer-check` (pure Python: the command line checks its argument with it before it imports JAX)."""
    run_dir = Path(path)
    if not run_dir.is_dir():
        raise UserError(f"run directory {run_dir} does not exist; "
                        "pass the folder `rlfit train` wrote (runs/<env>-<time>)")
    return run_dir


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
