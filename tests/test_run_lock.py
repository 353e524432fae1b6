"""One writer per run directory: a second holder is refused naming the first; a killed holder frees it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from rlfit.run_lock import LOCK_FILE, RunInUse, RunLock, check_not_in_use

HOLD = """
import sys, time
from pathlib import Path
from rlfit.run_lock import RunLock
lock = RunLock.acquire(Path(sys.argv[1]), "resume")
print("locked", flush=True)
time.sleep(60)
"""


def start_holder(directory):
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(directory)], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "locked"
    return process


def test_a_second_process_is_refused_with_the_holders_pid_and_host(tmp_path):
    holder = start_holder(tmp_path)
    try:
        with pytest.raises(RunInUse, match=f"in use by process {holder.pid} on host {socket.gethostname()} "
                                            r"\(rlfit resume\)"):
            RunLock.acquire(tmp_path, "train")
        with pytest.raises(RunInUse):
            check_not_in_use(tmp_path)
    finally:
        holder.kill()
        holder.wait()


def test_kill_9_never_leaves_a_stale_lock(tmp_path):
    holder = start_holder(tmp_path)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    assert (tmp_path / LOCK_FILE).read_text()  # the dead holder's record is still there ...
    check_not_in_use(tmp_path)  # ... but it holds nothing
    with RunLock.acquire(tmp_path, "train"):
        assert f'"pid": {os.getpid()}' in (tmp_path / LOCK_FILE).read_text()
    assert (tmp_path / LOCK_FILE).read_text() == ""


def test_the_same_process_cannot_take_it_twice(tmp_path):
    with RunLock.acquire(tmp_path, "train"):
        start = time.monotonic()
        with pytest.raises(RunInUse):
            RunLock.acquire(tmp_path, "resume")  # flock is per open file: a second open conflicts
        assert time.monotonic() - start < 1  # at once, no waiting
