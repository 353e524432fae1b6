"""Stopping safely: a failed save keeps earlier checkpoints and stops the run. SIGTERM, SIGINT, kill -9 and the NaN
guard, for every algorithm, are tests/conformance/test_stops.py's (which uses LONG and `wait_for_rows` from here)."""

from __future__ import annotations

import errno
import json
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
