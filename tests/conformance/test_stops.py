"""Stopping safely, for every algorithm. SIGTERM (and, for PPO, SIGINT) mid-run saves the iteration in flight and
exits 143 (130); kill -9 leaves the last checkpoint. Either run resumed ends bit-identical to a straight run (every
checkpointed array: parameters, optimizer states, a replay buffer, the environments, the keys). A non-finite loss
stops with exit 3, the algorithm's own hint and no NaN checkpoint. Covers the test-only detpg: stopping is the
runner's, not an algorithm's."""

from __future__ import annotations

import re
import signal

import pytest

from rlfit.algos.registry import algorithm
from tests.checkpoints.conftest import ToyCli
from tests.checkpoints.test_stops import LONG, wait_for_rows
from tests.conformance.conftest import ALGORITHM_NAMES, checkpoint_arrays, has_replay

SIGNALS = [*((algo, signal.SIGTERM) for algo in ALGORITHM_NAMES), *((algo, signal.SIGKILL) for algo in ALGORITHM_NAMES),
           ("ppo", signal.SIGINT)]
EXIT_CODES = {signal.SIGTERM: 143, signal.SIGINT: 130, signal.SIGKILL: -signal.SIGKILL}


@pytest.mark.parametrize(("algo", "signum"), SIGNALS, ids=[f"{a}-{s.name}" for a, s in SIGNALS])
def test_a_stopped_run_resumed_ends_bit_identical_to_a_straight_run(tmp_path, capfd, algo, signum):
    """SIGTERM/SIGINT: the iteration in flight saved, the session's summary written; kill -9: only the starting
    checkpoint (saves every 1,000 iterations), from which the resume trains everything again."""
    cli = ToyCli(tmp_path, algo, capfd=capfd)  # the signalled run is a real process (`start`), the others not
    stopped, straight = tmp_path / "stopped", tmp_path / "straight"
    process = cli.start("train", *cli.toy, *LONG, "--run-dir", str(stopped), "--quiet")
    wait_for_rows(stopped, 3, process)
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == EXIT_CODES[signum], stderr
    logged = cli.train_rows(stopped)[-1]["iteration"]
    saved = sorted(int(p.name) for p in (stopped / "checkpoints").iterdir())
    if signum == signal.SIGKILL:
        assert saved == [0] and not (stopped / "summary.json").exists()
    else:
        assert "Traceback" not in stderr
        assert saved == [0, logged]  # the start, and the iteration in flight: finished, logged and saved
        summary = cli.summary(stopped)  # the session so far, written before exiting
        assert summary["stopped_by"] == signum.name and summary["iterations"] == logged

    total = logged + 2
    resumed = cli.run("resume", str(stopped), "--iterations", str(total), "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert cli.summary(stopped)["iterations"] == total and cli.summary(stopped)["stopped_by"] is None
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
    message = result.stderr.strip().splitlines()[-1]
    bad = int(re.search(r"non-finite at iteration (\d+)", message).group(1))
    assert (4 <= bad <= 8) if has_replay(algo) else (bad == 4)
    assert "loss/" in message and ("loss/critic" in message or algo != "fasttd3")
    assert message.endswith(algorithm(algo).non_finite_hint)
    last_good = (bad - 1) // 2 * 2
    assert f"last good checkpoint: iteration {last_good}" in message
    assert sorted(int(p.name) for p in (run / "checkpoints").iterdir())[-1] == last_good
    assert not (run / "summary.json").exists()
