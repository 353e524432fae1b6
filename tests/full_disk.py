"""Full disks for the tests: a real size-limited tmpfs where the machine allows it (root, and `mount` works),
and the disk-full error a write raises, for fault-injected tests that run anywhere."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def disk_full(path: object = None) -> OSError:
    """The error a write raises on a full disk (naming `path` when given)."""
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), *([str(path)] if path is not None else []))


@contextmanager
def small_tmpfs(size: str) -> Iterator[Path]:
    """A tmpfs of `size` (e.g. '260k') mounted on a fresh folder under the temporary directory, unmounted and
    removed afterwards; the test is skipped, saying why, where it cannot be mounted."""
    if os.geteuid() != 0:
        pytest.skip("a real full disk needs a size-limited tmpfs, and mounting one needs root")
    if shutil.which("mount") is None or shutil.which("umount") is None:
        pytest.skip("a real full disk needs a size-limited tmpfs: mount/umount are not installed")
    mount_point = Path(tempfile.mkdtemp(prefix="rlfit-full-disk-"))
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount_point)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        mount_point.rmdir()
        pytest.skip(f"cannot mount a size-limited tmpfs here: {mounted.stderr.strip() or mounted.returncode}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)
        shutil.rmtree(mount_point, ignore_errors=True)


def grow(mount_point: Path, size: str) -> None:
    """Gives the tmpfs at `mount_point` room again (as a user freeing space would)."""
    subprocess.run(["mount", "-o", f"remount,size={size}", str(mount_point)], check=True, capture_output=True)
