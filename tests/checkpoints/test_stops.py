"""Stopping safely: SIGTERM/SIGINT save and exit 143/130; NaN stops with exit 3 and no NaN checkpoint;
a failed save keeps earlier checkpoints and stops the run."""

from __future__ import annotations

import errno
import re
import json
import signal
import time

import numpy as np
import pytest

LONG = ("--timesteps", "6400000", "--set", "run.save_interval=1000", "--set", "run.eval_every=0")


def wait_for_rows(run_dir, count: int, process, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    metrics = run_dir / "metrics.jsonl"
    while time.monotonic() < deadline:
        if metrics.exists() and metrics.read_text().count('"kind": "train"') >= count:
            return
        assert process.poll() is None, process.communicate()
        time.sleep(0.2)
    raise AssertionError("training did not start")


@pytest.mark.parametrize("algo, signum, code", [("ppo", signal.SIGTERM, 143), ("ppo", signal.SIGINT, 130),
                                               ("sac", signal.SIGTERM, 143)])
def test_signal_saves_a_resumable_checkpoint(tmp_path, capfd, algo, signum, code):
    from tests.checkpoints.conftest import ToyCli

    cli = ToyCli(tmp_path, algo, capfd=capfd)  # the signalled run is a real process (`start`), the resume not
    run = cli.tmp_path / "run"
    process = cli.start("train", *cli.toy, *LONG, "--run-dir", str(run), "--quiet")
    wait_for_rows(run, 3, process)
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == code, stderr
    assert "Traceback" not in stderr
    logged = cli.train_rows(run)[-1]["iteration"]
    saved = sorted(int(p.name) for p in (run / "checkpoints").iterdir())
    assert saved == [0, logged]  # the start, and the iteration in flight: finished, logged and saved
    summary = cli.summary(run)  # the session so far, written before exiting
    assert summary["stopped_by"] == signum.name and summary["iterations"] == logged
    resumed = cli.run("resume", str(run), "--iterations", str(logged + 2), "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert cli.summary(run)["iterations"] == logged + 2
    assert cli.summary(run)["stopped_by"] is None


def test_non_finite_loss_stops_with_exit_3_and_no_nan_checkpoint(any_cli):
    cli = any_cli
    run = cli.tmp_path / "run"
    # The reward turns NaN at step 30 of each episode; an iteration is 8 steps per env, so PPO's first bad
    # iteration is 4; SAC learns from replayed NaN rewards once a batch samples one (iteration 4 or soon after).
    result = cli.run("train", *cli.toy, "--set", "env.overrides={nan_after_steps: 30}", "--timesteps", "6400",
                     "--set", "run.save_interval=2", "--run-dir", str(run))
    assert result.returncode == 3, result.stderr
    message = result.stderr.strip().splitlines()[-1]
    bad = int(re.search(r"non-finite at iteration (\d+)", message).group(1))
    assert (bad == 4) if cli.algo == "ppo" else (4 <= bad <= 8)
    assert "loss/" in message
    last_good = (bad - 1) // 2 * 2
    assert f"last good checkpoint: iteration {last_good}" in message
    saved = sorted(int(p.name) for p in (run / "checkpoints").iterdir())
    assert saved[-1] == last_good
    assert not (run / "summary.json").exists()


def test_failed_save_keeps_earlier_checkpoints_and_stops(tmp_path, monkeypatch):
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[2]))
    import rlfit.checkpoints.format as checkpoint
    from rlfit.api import train
    from rlfit.checkpoints.schedule import SaveFailed

    real_save = checkpoint.save_checkpoint
    calls = []

    def disk_full_on_third(directory, state, meta, *args, **kwargs):
        calls.append(meta["iteration"])
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_save(directory, state, meta, *args, **kwargs)

    monkeypatch.setattr("rlfit.checkpoints.schedule.save_checkpoint", disk_full_on_third)
    run = tmp_path / "run"
    with pytest.raises(SaveFailed, match="No space left on device; earlier checkpoints are intact"):
        train("tests.toy_env:make", "smoke", overrides=["env.episode_length=50", "run.num_timesteps=640",
                                                         "run.save_interval=2"], run_dir=run)
    assert calls == [0, 2, 4]
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["00000000", "00000002"]
    meta = json.loads((run / "checkpoints" / "00000002" / "meta.json").read_text())
    assert meta["iteration"] == 2
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert max(r["iteration"] for r in rows) == 4  # stopped at the failed save, did not train on
    assert np.isfinite([r["loss/total"] for r in rows if r["kind"] == "train"]).all()
