"""A full disk stops a run in one line with exit code 4, at whichever file the disk refuses, keeping the
checkpoints written before; once there is room again `rlfit resume` continues from the newest of them.

A real size-limited tmpfs where the machine allows it (root), and each write path with the error injected
(everywhere); the commands run as a user runs them (`tests.checkpoints.conftest.ToyCli`)."""

from __future__ import annotations

import errno
import json
import logging

import pytest

from tests.full_disk import disk_full, grow, small_tmpfs

TEN_ITERATIONS = ("--timesteps", "640", "--set", "run.save_interval=2", "--set", "run.eval_every=5")
"""10 iterations of 64 env steps, saved every 2, evaluated at 5 and 10."""
ORBAX_FULL = ('RESOURCE_EXHAUSTED: Error writing "leaves.000030/0.0" in OCDBT database at local file "{path}": '
              "Failed to write 1830 bytes to file 20: No space left on device [os_error_code='28']")
"""What TensorStore raises through Orbax when the disk fills during a checkpoint (as seen on a real tmpfs)."""


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, f"expected one line on stderr, got:\n{stderr}"
    return lines[0]


def saved(run) -> list[int]:
    return sorted(int(p.name) for p in (run / "checkpoints").iterdir() if p.name.isdigit())


def rows_up_to(run, iteration: int) -> list[str]:
    return [line for line in (run / "metrics.jsonl").read_text().splitlines()
            if json.loads(line)["iteration"] <= iteration]


def assert_resumes_from(cli, run, checkpoint: int) -> None:
    """`rlfit resume RUN` continues from `checkpoint` (the rows it covers kept as they were) to iteration 10."""
    kept = rows_up_to(run, checkpoint)
    resumed = cli.run("resume", str(run), "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert rows_up_to(run, checkpoint) == kept
    assert [r["iteration"] for r in cli.train_rows(run)] == list(range(1, 11))
    summary = cli.summary(run)
    assert summary["iterations"] == 10 and summary["stopped_by"] is None


def test_train_on_a_real_full_disk_stops_in_one_line_and_resumes_once_there_is_room(cli):
    from tests.checkpoints.conftest import rlfit

    with small_tmpfs("260k") as disk:
        run = disk / "run"
        # A real process: Orbax's threads and event loops, and the interpreter's exit, are part of what is checked.
        result = rlfit(cli.tmp_path, "train", *cli.toy, *TEN_ITERATIONS, "--run-dir", str(run), "--quiet")
        assert result.returncode == 4, result.stderr
        line = one_line(result.stderr)
        assert line.startswith("rlfit: error: cannot write ") and "No space left on device" in line
        assert f"`rlfit resume {run}`" in line
        good = saved(run)
        assert good and good[-1] < 10  # the run stopped before its end, keeping what it had saved
        grow(disk, "16m")
        assert_resumes_from(cli, run, good[-1])


def test_a_checkpoint_refused_inside_orbax_keeps_the_one_before(cli, monkeypatch):
    import rlfit.checkpoints.format as checkpoint

    real = checkpoint._orbax
    calls = []

    class FillsUp:
        def save(self, path, item):
            calls.append(path)
            if len(calls) == 2:  # Orbax's own failure, logged by its thread and raised as a ValueError
                logging.getLogger("absl").error("_SignalingThread.run() raised an exception: %s",
                                                ORBAX_FULL.format(path=path))
                raise ValueError(ORBAX_FULL.format(path=path))
            return real().save(path, item)

    monkeypatch.setattr(checkpoint, "_orbax", FillsUp)
    run = cli.tmp_path / "run"
    result = cli.run("train", *cli.toy, *TEN_ITERATIONS, "--run-dir", str(run), "--quiet")
    assert result.returncode == 4
    line = one_line(result.stderr)
    assert f"cannot write checkpoint for iteration 2 in {run / 'checkpoints'}: No space left on device" in line
    assert saved(run) == [0] and not list((run / "checkpoints").glob(".tmp-*"))
    monkeypatch.undo()
    assert_resumes_from(cli, run, 0)


class FailingOs:
    """The `os` module, but `name` (e.g. 'write') raises a full disk from its `after`+1-th call on."""

    def __init__(self, name: str, after: int):
        import os

        self._os, self._name, self._after, self.calls = os, name, after, 0

    def __getattr__(self, attribute):
        if attribute != self._name:
            return getattr(self._os, attribute)

        def refused(*args, **kwargs):
            self.calls += 1
            if self.calls > self._after:
                raise disk_full()
            return getattr(self._os, attribute)(*args, **kwargs)

        return refused


def test_metrics_refused_stops_the_run(cli, monkeypatch):
    import rlfit.sinks.jsonl as jsonl

    monkeypatch.setattr(jsonl, "os", FailingOs("write", after=4))  # rows 1-4 written, the 5th refused
    run = cli.tmp_path / "run"
    result = cli.run("train", *cli.toy, *TEN_ITERATIONS, "--run-dir", str(run), "--quiet")
    assert result.returncode == 4
    assert f"cannot write {run / 'metrics.jsonl'}: No space left on device" in one_line(result.stderr)
    assert saved(run)[-1] == 4
    monkeypatch.undo()
    assert_resumes_from(cli, run, 4)


def test_tensorboard_refused_stops_the_run(cli, monkeypatch):
    from rlfit.sinks.tensorboard import EventFile

    real = EventFile._write
    calls = []

    class FullFile:
        """An event file on a disk that has just filled: writes fail (naming no file, as Python's do)."""

        def __init__(self, file):
            self.file = file

        def write(self, data):
            raise disk_full()

        def __getattr__(self, name):
            return getattr(self.file, name)

    def fills_up(self, event):
        calls.append(1)
        if len(calls) == 60:  # a few iterations' scalars into the run
            self.file = FullFile(self.file)
        return real(self, event)

    monkeypatch.setattr(EventFile, "_write", fills_up)
    run = cli.tmp_path / "run"
    result = cli.run("train", *cli.toy, *TEN_ITERATIONS, "--run-dir", str(run), "--quiet")
    assert result.returncode == 4
    line = one_line(result.stderr)
    assert f"cannot write {run / 'tb'}/events.out.tfevents." in line and "No space left on device" in line
    good = saved(run)
    assert good and good[-1] < 10
    monkeypatch.undo()
    assert_resumes_from(cli, run, good[-1])


def test_summary_refused_at_the_end_is_written_by_resume(cli, monkeypatch):
    import rlfit.run.loop as runner

    def refuse_summary(path, data):
        raise disk_full(path)

    monkeypatch.setattr(runner, "write_json", refuse_summary)
    run = cli.tmp_path / "run"
    result = cli.run("train", *cli.toy, *TEN_ITERATIONS, "--run-dir", str(run), "--quiet")
    assert result.returncode == 4
    assert f"cannot write {run / 'summary.json'}: No space left on device" in one_line(result.stderr)
    assert saved(run)[-1] == 10 and not (run / "summary.json").exists()
    monkeypatch.undo()
    assert_resumes_from(cli, run, 10)  # nothing left to train: the summary is written


def test_plan_refused_at_the_start_leaves_a_run_that_starts_again(cli, monkeypatch):
    import rlfit.run.session as session

    def refuse_plan(path, data):
        raise disk_full(path)

    monkeypatch.setattr(session, "write_json", refuse_plan)
    run = cli.tmp_path / "run"
    result = cli.run("train", *cli.toy, *TEN_ITERATIONS, "--run-dir", str(run), "--quiet")
    assert result.returncode == 4
    line = one_line(result.stderr)
    assert f"cannot write {run / 'plan.json'}: No space left on device" in line and f"rlfit resume {run}" in line
    monkeypatch.undo()
    resumed = cli.run("resume", str(run), "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert cli.summary(run)["iterations"] == 10


@pytest.mark.parametrize("number", [errno.ENOSPC, errno.EDQUOT, errno.EROFS])
def test_the_run_lock_refused_writes_nothing(cli, monkeypatch, number):
    import os

    import rlfit.rundir.lock as run_lock

    def refused(*args):
        raise OSError(number, os.strerror(number))

    monkeypatch.setattr(run_lock.os, "pwrite", refused)  # the lock's record of its holder
    run = cli.tmp_path / "run"
    result = cli.run("train", *cli.toy, *TEN_ITERATIONS, "--run-dir", str(run), "--quiet")
    assert result.returncode == 4
    assert f"cannot write {run}: {os.strerror(number)}" in one_line(result.stderr)
    assert not [p for p in run.iterdir() if p.name != ".rlfit.lock"]
