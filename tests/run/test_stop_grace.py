"""A stop request leaves a checkpoint within `run.stop_grace_s` even when an iteration takes longer: the watcher
saves a host copy of the last finished iteration instead of waiting for the running one (`rlfit.run.stop_grace`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from rlfit.run.progress import Progress
from rlfit.run.signals import StopFlag
from rlfit.run.stop_grace import GraceWatch, host_copy, reserve_s
from tests.conftest import cli_environment, cli_in_process


def test_the_reserve_is_twice_the_slowest_save_within_bounds():
    assert reserve_s(25, 0.1) == 1.0  # at least RESERVE_MIN_S
    assert reserve_s(25, 3.0) == 6.0
    assert reserve_s(10, 30.0) == 5.0  # at most half the grace


def test_the_host_copy_does_not_follow_the_device_buffer():
    state = {"w": np.arange(4.0)}
    copy = host_copy(state)
    state["w"][:] = -1
    assert copy["w"].tolist() == [0.0, 1.0, 2.0, 3.0]


def watch_with_fakes(grace_s: float, budget_s: float | None = None, saved_iteration: int | None = 0):
    saved, exits, said = [], [], []
    done = threading.Event()

    def save(state, progress, reason):
        saved.append((state, progress.iteration, reason))

    def exit_process(code):
        exits.append(code)
        done.set()

    watch = GraceWatch(grace_s, budget_s, save, said.append, saved_iteration=saved_iteration,
                       start=Progress(iteration=saved_iteration or 0), exit_process=exit_process)
    return watch, saved, exits, said, done


def long_iteration(watch: GraceWatch, seconds: float, state, iteration: int) -> None:
    watch.iteration_started()
    time.sleep(seconds)
    watch.iteration_ended(state, Progress(iteration=iteration), saved=False)


def test_copies_are_kept_only_where_iterations_outlast_the_grace():
    short, *_ = watch_with_fakes(grace_s=60)
    long_iteration(short, 0.05, {"w": np.zeros(2)}, 1)
    assert not short.keeps_copies and short.record()["host_copies"] is False
    long, _, _, said, _ = watch_with_fakes(grace_s=0.2)
    long_iteration(long, 0.3, {"w": np.zeros(2)}, 1)
    assert long.keeps_copies and len(said) == 1 and "run.stop_grace_s=0.2" in said[0]


def test_a_signal_during_a_long_iteration_saves_the_last_finished_one_at_once():
    watch, saved, exits, _, done = watch_with_fakes(grace_s=4)
    with StopFlag():
        watch.start()
        try:
            long_iteration(watch, 4.5, {"w": np.full(2, 7.0)}, 1)  # 4.5 s > grace: copies kept from here on
            watch.iteration_started()  # iteration 2 under way, expected to take 4.5 s more
            asked = time.monotonic()
            os.kill(os.getpid(), signal.SIGTERM)
            assert done.wait(timeout=10)
            answered = time.monotonic() - asked
        finally:
            watch.stop()
    assert exits == [143]
    assert len(saved) == 1 and saved[0][1:] == (1, "SIGTERM") and saved[0][0]["w"].tolist() == [7.0, 7.0]
    assert answered < 4.5  # before the running iteration could have ended


def test_nothing_more_is_saved_where_the_newest_checkpoint_is_the_last_finished_iteration():
    watch, saved, exits, _, done = watch_with_fakes(grace_s=2, saved_iteration=0)
    with StopFlag():
        watch.start()
        try:
            watch.iteration_started()  # the first iteration: nothing finished since the start's checkpoint
            os.kill(os.getpid(), signal.SIGTERM)
            assert done.wait(timeout=10)
        finally:
            watch.stop()
    assert exits == [143] and saved == [(None, 0, "SIGTERM")]  # no checkpoint, only the summary


def test_without_copies_the_summary_reports_the_last_finished_iteration():
    """Short iterations (no host copies): a stop the watcher handles writes no checkpoint, and the summary reports
    the counters of the last finished iteration the loop handed over, not the session's start (the loop replaces
    its counters each iteration: `rlfit.run.after_step.advanced`)."""
    watch, saved, exits, _, done = watch_with_fakes(grace_s=2, saved_iteration=2)
    with StopFlag():
        watch.start()
        try:
            long_iteration(watch, 0.01, {"w": np.zeros(2)}, 3)  # short: no copy kept
            watch.iteration_started()  # iteration 4 under way; the main thread never handles the stop
            os.kill(os.getpid(), signal.SIGTERM)
            assert done.wait(timeout=10)
        finally:
            watch.stop()
    assert not watch.keeps_copies
    assert exits == [143] and saved == [(None, 3, "SIGTERM")]


def test_a_stop_the_main_loop_handles_leaves_the_watcher_idle():
    watch, saved, exits, _, _ = watch_with_fakes(grace_s=1.5)
    with StopFlag() as flag:
        watch.start()
        try:
            watch.iteration_started()
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.1)
            with watch.lock:
                watch.handled()
            time.sleep(2)
        finally:
            watch.stop()
        assert flag.requested
    assert exits == [] and saved == []


def test_the_time_budget_is_kept_within_the_grace_too():
    watch, saved, exits, _, done = watch_with_fakes(grace_s=0.2, budget_s=1.0)
    watch.start()
    try:
        long_iteration(watch, 0.3, {"w": np.ones(1)}, 1)
        watch.iteration_started()
        assert done.wait(timeout=5)
    finally:
        watch.stop()
    assert exits == [0] and [(i, r) for _, i, r in saved] == [(1, "time_budget")]


@pytest.mark.slow
def test_sigterm_during_a_long_iteration_of_a_real_run(capfd, tmp_path):
    """A run whose iterations take about 10 s (a sleeping toy environment) with a 2 s grace: SIGTERM sent early in
    the second iteration ends the process with 143 well before that iteration could end, with the first saved (its
    10 s outlast the grace, so the watcher keeps a host copy from then on), and `rlfit resume` continues from it.
    The environment sleeps in the evaluation too (each of its environments, each step), so the resumed run's closing
    evaluation is one environment over 20-step episodes (3 s of sleep, not the smoke preset's 4 x 100 steps, 60 s);
    the resume runs in this process (the signal is the first run's)."""
    run_dir = tmp_path / "run"
    args = [sys.executable, "-m", "rlfit", "train", "tests.toy_env:make_slow", "--preset", "smoke", "--run-dir",
            str(run_dir), "--set", "run.num_timesteps=6400", "--set", "run.save_interval=1000", "--set",
            "run.stop_grace_s=2", "--set", "run.eval_every=0", "--set", "run.num_eval_envs=1", "--set",
            "env.episode_length=20"]
    process = subprocess.Popen(args, env=cli_environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    metrics = run_dir / "metrics.jsonl"
    rows: list[dict] = []
    deadline = time.monotonic() + 400
    while time.monotonic() < deadline and not rows:
        time.sleep(0.2)
        rows = [json.loads(line) for line in metrics.read_text().splitlines()] if metrics.exists() else []
        rows = [row for row in rows if row.get("kind") == "train"]
    assert rows, process.communicate(timeout=60)
    time.sleep(1.0)  # the first iteration's copy is taken; the second iteration is under way
    asked = time.monotonic()
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=120)
    answered = time.monotonic() - asked
    assert process.returncode == 143, err
    assert answered < min(row["iteration_s"] for row in rows), (answered, err)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stopped_by"] == "SIGTERM" and summary["iterations"] == len(rows)  # 1 unless polling lagged
    assert summary["stop_grace"]["host_copies"] is True
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir() if not p.name.startswith("."))[-1].endswith(str(len(rows)))
    resumed = cli_in_process(capfd, "resume", str(run_dir), "--iterations", str(len(rows) + 1), "--quiet", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads((run_dir / "summary.json").read_text())["iterations"] == len(rows) + 1


def test_the_watcher_says_a_signal_in_one_write(monkeypatch):
    """The main thread's signal handler says its own line at the same moment: one write each keeps them apart."""
    writes: list[str] = []
    monkeypatch.setattr(sys, "stderr", type("Stream", (), {"write": lambda self, text: writes.append(text),
                                                          "flush": lambda self: None})())
    watch, _, _, _, _ = watch_with_fakes(grace_s=25)
    watch._heard(bytes([signal.SIGTERM]))
    assert writes == ["rlfit: SIGTERM received; saving within 25s (send it again to exit at once)\n"]
