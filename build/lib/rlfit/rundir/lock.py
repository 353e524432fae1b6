"""One writer per run directory: an OS file lock held for as long as a process trains in it.

    with RunLock.acquire(run_dir_path, "train"):   # raises RunInUse (exit 2) when another process holds it
        ...write the run directory...

The lock is `fcntl.flock` on `RUN/.rlfit.lock`, so the kernel releases it when the holder dies, even by
`kill -9`: a stale lock is impossible. The file itself stays and records the last holder (pid, host, the
command line that started it, e.g. `rlfit experiment study.yaml`, and what it does there: train or resume) for
the error message while it is held (it is emptied on release); its presence means nothing.
flock is advisory and local: two machines sharing a network file system may not see each other's locks (NFS
maps it to byte-range locks on Linux, which do work across clients; other network file systems may not).
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

from rlfit.errors import UserError

LOCK_FILE = ".rlfit.lock"
MAX_COMMAND_CHARS = 160
"""A holder's command line longer than this is shortened (its start, which names the command, is kept)."""


class RunInUse(UserError):
    """Another process is writing to the run directory."""


class RunLock:
    """An exclusive lock on a run directory (a context manager; `release` is idempotent)."""

    def __init__(self, path: Path, descriptor: int):
        self.path = path
        self._descriptor: int | None = descriptor

    @classmethod
    def acquire(cls, directory: Path, purpose: str) -> RunLock:
        """Locks `directory` (which must exist) for `purpose` ('train', 'resume') or raises RunInUse naming the
        holder; the record names this process's own command line (`process_command`).

        An OSError from creating the lock file (read-only, permission denied) is left to the caller.
        """
        import fcntl

        path = directory / LOCK_FILE
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            raise RunInUse(in_use_message(directory)) from None
        holder = {"pid": os.getpid(), "host": socket.gethostname(), "command": process_command(),
                  "purpose": purpose}
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, json.dumps(holder).encode(), 0)
        return cls(path, descriptor)

    def release(self) -> None:
        """Empties the holder record (still holding the lock), then drops the lock."""
        if self._descriptor is not None:
            try:
                os.ftruncate(self._descriptor, 0)
            except OSError:
                pass
            os.close(self._descriptor)  # closing the descriptor drops the flock
            self._descriptor = None

    __del__ = release

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def check_not_in_use(directory: Path) -> None:
    """Raises RunInUse when another process holds `directory`'s lock (a free or absent lock passes)."""
    import fcntl

    path = directory / LOCK_FILE
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        raise RunInUse(in_use_message(directory)) from None
    finally:
        os.close(descriptor)


def in_use_message(directory: Path) -> str:
    return (f"run directory {directory} is in use by {describe_holder(directory / LOCK_FILE)}; wait for it to "
            "finish or stop it (SIGTERM saves a checkpoint), then try again")


def describe_holder(path: Path) -> str:
    """'process 1234 on host h (`rlfit experiment study.yaml`, training it)' from the lock file, or a vaguer
    phrase if it is unreadable."""
    try:
        holder = json.loads(path.read_text())
        doing = {"train": ", training it", "resume": ", resuming it"}.get(holder.get("purpose"), "")
        return f"process {holder['pid']} on host {holder['host']} (`{holder['command']}`{doing})"
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return "another rlfit process"


def process_command(argv: Sequence[str] | None = None) -> str:
    """This process's command line (`argv`, default `sys.argv`) as a user would type it: `rlfit experiment
    study.yaml` for the rlfit command (its console script or `python -m rlfit`), `python train.py` for a
    script, `pytest -q` for another console script; shortened to MAX_COMMAND_CHARS."""
    argv = list(sys.argv if argv is None else argv) or [""]
    program = Path(argv[0])
    if program.name == "__main__.py":
        head = ["rlfit"] if program.parent.name == "rlfit" else ["python", "-m", program.parent.name]
    elif argv[0] in ("", "-c", "-"):
        head = ["python", argv[0]] if argv[0] else ["python"]
    elif program.suffix == ".py":
        head = ["python", argv[0]]
    else:
        head = [program.name]
    command = shlex.join([*head, *argv[1:]])
    return command if len(command) <= MAX_COMMAND_CHARS else command[:MAX_COMMAND_CHARS - 3] + "..."
