"""A new run's directory: its default path, the refusal to write into one already used (with a hint when
`rlfit resume` can continue it), creating and locking it."""

from __future__ import annotations

import time
from pathlib import Path

import yaml

from rlfit.config.schema import Config
from rlfit.envs.loading import env_label
from rlfit.errors import UserError
from rlfit.rundir.atomic import write_atomic
from rlfit.rundir.layout import list_steps
from rlfit.rundir.layout import RunDir, user_path_errors
from rlfit.rundir.lock import LOCK_FILE, RunLock, check_not_in_use
from rlfit.sinks.jsonl import read_rows


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
