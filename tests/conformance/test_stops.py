"""Stopping safely, for every algorithm. SIGTERM (and, for PPO, SIGINT) mid-session saves the iteration in flight and
exits 143 (130); kill -9 leaves the last checkpoint and no summary of its session. The run, stopped each of these
ways in turn and resumed, ends bit-identical to a straight run (every checkpointed array: parameters, optimizer
states, a replay buffer, the environments, the keys). A non-finite loss stops with exit 3, the algorithm's own hint
and no NaN checkpoint. Covers the test-only detpg: stopping is the runner's, not an algorithm's."""

from __future__ import annotations

import re
import signal

import pytest

from rlfit.algos.registry import algorithm
from tests.checkpoints.conftest import ToyCli
from tests.checkpoints.test_stops import LONG, wait_for_rows
from tests.conformance.conftest import ALGORITHM_NAMES, checkpoint_arrays, has_replay

SIGNALS = {algo: (signal.SIGTERM, *((signal.SIGINT,) if algo == "ppo" else ()), signal.SIGKILL)
           for algo in ALGORITHM_NAMES}
"""The signals each algorithm's run is stopped by, one session each: the first session (`train`) by SIGTERM, each
next one (`resume`) by the next signal; kill -9 last (a session after it would resume from the same checkpoint and
start by cutting metrics.jsonl back to it, so waiting for its rows would race)."""
EXIT_CODES = {signal.SIGTERM: 143, signal.SIGINT: 130, signal.SIGKILL: -signal.SIGKILL}


@pytest.mark.parametrize("algo", ALGORITHM_NAMES)
def test_a_run_stopped_by_each_signal_and_resumed_ends_bit_identical_to_a_straight_run(tmp_path, capfd, forked_rlfit,
                                                                                       algo):
    """SIGTERM/SIGINT: the iteration in flight saved, the session's summary written; kill -9: nothing saved or
    written by its session (saves every 1,000 iterations), so the resume trains its iterations again. Each stopped
    session is a real process (`forked_rlfit`: forked from a server that imported rlfit once), the last resume and
    the straight run are not."""
    cli = ToyCli(tmp_path, algo, capfd=capfd)
    stopped, straight = tmp_path / "stopped", tmp_path / "straight"
    saved_before: list[int] = []  # the checkpoints the sessions before this one left
    logged = 0  # the last iteration the sessions before this one logged
    for session, signum in enumerate(SIGNALS[algo]):
        if session == 0:
            process = forked_rlfit.start(["train", *cli.toy, *LONG, "--run-dir", str(stopped), "--quiet"], tmp_path)
        else:  # appends to the `logged` rows of the session before (cut back to the same rows): the count only grows
            process = forked_rlfit.start(["resume", str(stopped), "--quiet"], tmp_path)
            summary_before = (stopped / "summary.json").read_bytes()
        wait_for_rows(stopped, logged + 3, process)
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=120)
        assert process.returncode == EXIT_CODES[signum], stderr
        rows = cli.train_rows(stopped)
        assert [r["iteration"] for r in rows] == list(range(1, rows[-1]["iteration"] + 1))
        saved = sorted(int(p.name) for p in (stopped / "checkpoints").iterdir())
        if signum == signal.SIGKILL:  # only the checkpoints before it; the summary is the session's before
            assert saved == saved_before and rows[-1]["iteration"] > logged
            assert (stopped / "summary.json").read_bytes() == summary_before
        else:
            assert "Traceback" not in stderr
            # the start (the first session's), and the iteration in flight: finished, logged and saved
            assert saved == [*(saved_before or [0]), rows[-1]["iteration"]]
            summary = cli.summary(stopped)  # the run so far, written before exiting
            assert summary["stopped_by"] == signum.name and summary["iterations"] == rows[-1]["iteration"]
        saved_before, logged = saved, rows[-1]["iteration"]

    total = logged + 2
    resumed = cli.run("resume", str(stopped), "--iterations", str(total), "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert cli.summary(stopped)["iterations"] == total and cli.summary(stopped)["stopped_by"] is None
    assert [r["iteration"] for r in cli.train_rows(stopped)] == list(range(1, total + 1))
    steps = str(total * 64)  # every algorithm's smoke preset: 8 environments x 8 env steps per iteration
    done = cli.run("train", *cli.toy, *LONG[2:], "--timesteps", steps, "--run-dir", str(straight), "--quiet")
    assert done.returncode == 0, done.stderr
    assert cli.summary(straight)["iterations"] == total
    assert cli.summary(stopped)["params_digest"] == cli.summary(straight)["params_digest"]
    ours, theirs = checkpoint_arrays(stopped, total), checkpoint_arrays(straight, total)
    assert ours and ours == theirs
    if has_replay(algo):  # the buffer's rows (max_replay_size 512 / 8 environments) are among them
        assert [a for a in ours if a["shape"][:1] == [512 // 8]], ours


@pytest.mark.parametrize("algo", ALGORITHM_NAMES)
def test_a_non_finite_loss_stops_with_exit_3_the_algorithms_hint_and_no_nan_checkpoint(tmp_path, capfd, algo):
    cli = ToyCli(tmp_path, algo, capfd=capfd)
    run = tmp_path / "run"
    # The reward turns NaN at step 30 of each episode; an iteration is 8 policy steps, so an algorithm learning from
    # what it just collected meets it in iteration 4; one learning from replayed rewards once a batch samples one
    # (the prefill is 2 or 5 policy steps: iteration 4 or soon after).
    result = cli.run("train", *cli.toy, "--set", "env.overrides={nan_after_steps: 30}", "--timesteps", "6400",
                     "--set", "run.save_interval=2", "--run-dir", str(run))
    assert result.returncode == 3, result.stderr
    # The command's own last line; the evaluation, still compiling in the background when the run stopped, may log
    # below Python (XLA's slow-operation alarm under load) after it.
    message = [line for line in result.stderr.splitlines() if line.startswith("rlfit: ")][-1]
    found = re.search(r"non-finite at iteration (\d+)", message)
    assert found, result.stderr
    bad = int(found.group(1))
    assert (4 <= bad <= 8) if has_replay(algo) else (bad == 4)
    assert "loss/" in message and ("loss/critic" in message or algo != "fasttd3")
    assert message.endswith(algorithm(algo).non_finite_hint)
    last_good = (bad - 1) // 2 * 2
    assert f"last good checkpoint: iteration {last_good}" in message
    assert sorted(int(p.name) for p in (run / "checkpoints").iterdir())[-1] == last_good
    assert not (run / "summary.json").exists()
