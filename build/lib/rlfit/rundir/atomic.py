"""Writing files and folders so that a kill at any instant leaves the old version or the new, never half of one."""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

from rlfit.rundir.write_failures import naming


def write_synced(path: Path, data: bytes | str) -> None:
    """Writes `data` to `path` and forces it to disk before returning (an OSError names `path`)."""
    with naming(path), open(path, "wb") as file:
        file.write(data.encode() if isinstance(data, str) else data)
        file.flush()
        os.fsync(file.fileno())


def write_atomic(path: Path, data: bytes | str) -> None:
    """Writes via a temporary sibling and a rename, so readers never see half a file (a failed write leaves the
    old file and no temporary one)."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with naming(path, tmp):
            write_synced(tmp, data)
            tmp.replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def fsync_dir(path: Path) -> None:
    """Makes a rename inside `path` durable (best effort where the file system cannot)."""
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


def aside_path(directory: Path) -> Path:
    """Where the previous version of `directory` waits while the new one is renamed in."""
    return directory.with_name(f".{directory.name}.old")


def swap_into_place(staging: Path, directory: Path) -> None:
    """Renames the complete folder `staging` to `directory`, replacing an existing one.

    The old `directory` is first renamed aside, so at every instant one complete version exists under
    `directory` or `aside_path(directory)`.
    """
    aside = aside_path(directory)
    if aside.exists():
        shutil.rmtree(aside)
    if directory.exists():
        directory.rename(aside)
    staging.rename(directory)
    shutil.rmtree(aside, ignore_errors=True)
    fsync_dir(directory.parent)
