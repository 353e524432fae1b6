"""FastTD3 stopped safely: a non-finite loss stops with exit 3 and its own hint; SIGTERM mid-run saves the
iteration in flight and exits 143, kill -9 leaves the last checkpoint, and either run resumed ends bit-identical
to an uninterrupted one (every checkpointed array: parameters, both AdamW states, the replay buffer, the
exploration stds, the environments, the keys)."""

from __future__ import annotations

import json
import re
import signal

import pytest

from tests.checkpoints.test_stops import LONG, wait_for_rows


def arrays(run_dir, iteration: int) -> list[dict]:
    """Shape, dtype and SHA-256 of every array of a checkpoint (its meta.json)."""
    return json.loads((run_dir / "checkpoints" / f"{iteration:08d}" / "meta.json").read_text())["arrays"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_stopped_run_resumed_ends_bit_identical_to_a_straight_run(tmp_path, capfd, signum):
    """SIGTERM: exit 143 with the iteration in flight saved; kill -9: only the starting checkpoint (saves every
    1,000 iterations), from which the resume trains everything again."""
    from tests.checkpoints.conftest import ToyCli

    cli = ToyCli(tmp_path, "fasttd3", capfd=capfd)
    stopped, straight = tmp_path / "stopped", tmp_path / "straight"
    process = cli.start("train", *cli.toy, *LONG, "--run-dir", str(stopped), "--quiet")
    wait_for_rows(stopped, 3, process)
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=120)
    logged = cli.train_rows(stopped)[-1]["iteration"]
    saved = sorted(int(p.name) for p in (stopped / "checkpoints").iterdir())
    if signum == signal.SIGTERM:
        assert process.returncode == 143, stderr
        assert saved == [0, logged] and cli.summary(stopped)["stopped_by"] == "SIGTERM"
    else:
        assert process.returncode == -signal.SIGKILL and saved == [0]

    total = logged + 2
    resumed = cli.run("resume", str(stopped), "--iterations", str(total), "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    steps = str(total * 64)  # the smoke preset: 8 environments x 8 policy steps per iteration
    done = cli.run("train", *cli.toy, *LONG[2:], "--timesteps", steps, "--run-dir", str(straight), "--quiet")
    assert done.returncode == 0, done.stderr
    assert cli.summary(stopped)["iterations"] == cli.summary(straight)["iterations"] == total
    assert cli.summary(stopped)["params_digest"] == cli.summary(straight)["params_digest"]
    ours, theirs = arrays(stopped, total), arrays(straight, total)
    assert len(ours) > 20 and ours == theirs
    replay = [a for a in ours if a["shape"][:1] == [512 // 8]]  # the buffer's rows: max_replay_size / num_envs
    assert replay, ours


def test_a_non_finite_loss_stops_with_exit_3_the_fasttd3_hint_and_no_nan_checkpoint(tmp_path, capfd):
    from tests.checkpoints.conftest import ToyCli

    cli = ToyCli(tmp_path, "fasttd3", capfd=capfd)
    run = tmp_path / "run"
    # The reward turns NaN at step 30 of each episode: the smoke preset's prefill is 5 policy steps and an
    # iteration 8, so the first NaN reward enters the buffer in iteration 4 and a batch meets it then or soon after.
    result = cli.run("train", *cli.toy, "--set", "env.overrides={nan_after_steps: 30}", "--timesteps", "6400",
                     "--set", "run.save_interval=2", "--run-dir", str(run))
    assert result.returncode == 3, result.stderr
    message = result.stderr.strip().splitlines()[-1]
    bad = int(re.search(r"non-finite at iteration (\d+)", message).group(1))
    assert 4 <= bad <= 8 and "loss/critic" in message
    assert message.endswith("lower fasttd3.learning_rate or set fasttd3.critic_layer_norm=true")
    last_good = (bad - 1) // 2 * 2
    assert f"last good checkpoint: iteration {last_good}" in message
    assert sorted(int(p.name) for p in (run / "checkpoints").iterdir())[-1] == last_good
    assert not (run / "summary.json").exists()
