"""One writer per run directory: a second holder is refused naming the first; a killed holder frees it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlfit.rundir.lock import (
    LOCK_FILE,
    MAX_COMMAND_CHARS,
    RunInUse,
    RunLock,
    check_not_in_use,
    describe_holder,
    process_command,
)
from tests.conftest import TOY_ENV, cli_in_process

HOLD = """
import sys, time
from pathlib import Path
from rlfit.rundir.lock import RunLock
directory, purpose, *argv = sys.argv[1:]
if argv:  # the command line this holder pretends to have been started with
    sys.argv = argv
lock = RunLock.acquire(Path(directory), purpose)
print("locked", flush=True)
time.sleep(60)
"""


def start_holder(directory, purpose="resume", argv=()):
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(directory), purpose, *argv],
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "locked"
    return process


def test_a_second_process_is_refused_with_the_holders_pid_and_host(tmp_path):
    holder = start_holder(tmp_path)
    try:
        with pytest.raises(RunInUse, match=f"in use by process {holder.pid} on host {socket.gethostname()} "
                                            r"\(`python -c .*`, resuming it\)"):
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


def test_the_message_names_the_holders_own_command_not_rlfit_train(capfd, tmp_path):
    """An experiment trains its trials in run directories: a second writer is told it is the experiment."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("algo: ppo\n")
    argv = [str(Path(sys.prefix) / "bin" / "rlfit"), "experiment", "my study.yaml", "--dir", "out"]
    holder = start_holder(run, "train", argv)
    try:
        result = cli_in_process(capfd, "train", TOY_ENV, "--preset", "smoke", "--run-dir", "run", cwd=tmp_path)
    finally:
        holder.kill()
        holder.wait()
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (
        f"rlfit: error: run directory run is in use by process {holder.pid} on host {socket.gethostname()} "
        "(`rlfit experiment 'my study.yaml' --dir out`, training it); wait for it to finish or stop it "
        "(SIGTERM saves a checkpoint), then try again")


@pytest.mark.parametrize(("argv", "command"), [
    (["/home/u/.venv/bin/rlfit", "resume", "runs/a"], "rlfit resume runs/a"),
    (["/home/u/.venv/lib/python3.11/site-packages/rlfit/__main__.py", "experiment", "s.yaml"],
     "rlfit experiment s.yaml"),  # python -m rlfit
    (["/src/tool/__main__.py", "--fast"], "python -m tool --fast"),
    (["train_cartpole.py", "--seed", "3"], "python train_cartpole.py --seed 3"),
    (["-c"], "python -c"),
    ([], "python"),
    (["/usr/bin/jupyter-kernel", "-f", "k 1.json"], "jupyter-kernel -f 'k 1.json'"),
])
def test_process_command_is_the_command_line_as_a_user_would_type_it(argv, command):
    assert process_command(argv) == command


def test_a_long_command_line_keeps_its_start():
    command = process_command(["/bin/rlfit", "experiment", "s.yaml", *(["--set", "run.seed=1"] * 40)])
    assert len(command) == MAX_COMMAND_CHARS and command.startswith("rlfit experiment s.yaml --set run.seed=1")
    assert command.endswith("...")


def test_a_lock_file_of_unexpected_shape_is_another_process(tmp_path):
    for text in ("", "[1, 2]", '{"pid": 1}', "not json"):
        (tmp_path / LOCK_FILE).write_text(text)
        assert describe_holder(tmp_path / LOCK_FILE) == "another rlfit process"
