"""The runner's out-of-memory back-off continues from the newest checkpoint, and keeps no host copy of the
training state when there is a checkpoint to load (a replay buffer can be most of the host's memory)."""

from __future__ import annotations

import json

import jax
import pytest

import rlfit
import rlfit.runner as runner_module
from rlfit.runner import Runner

TOY = "tests.toy_env:make"


@pytest.mark.parametrize("fail_at_call", [1, 3])
def test_a_back_off_restarts_from_the_newest_checkpoint_without_a_host_copy(tmp_path, monkeypatch, fail_at_call):
    calls, copied = [], []
    real_step, real_get = Runner._step, jax.device_get

    def failing_step(self, compiled, state):
        calls.append(state)
        if len(calls) == fail_at_call:
            raise RuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1.00GiB (injected)")
        return real_step(self, compiled, state)

    def spying_get(tree):
        copied.append(type(tree).__name__)
        return real_get(tree)

    monkeypatch.setattr(Runner, "_step", failing_step)
    monkeypatch.setattr(runner_module.jax, "device_get", spying_get)
    run = tmp_path / "run"
    result = rlfit.train(TOY, preset="smoke", overrides=["run.num_timesteps=256", "run.save_interval=1"],
                         run_dir=run)
    state_type = type(calls[0]).__name__
    assert state_type not in copied, "the starting state was copied to the host although a checkpoint holds it"
    (event,) = result.summary["events"]
    assert event["event"] == "out_of_memory_backoff" and event["to"]["num_envs"] == event["from"]["num_envs"] // 2
    assert event["iteration"] == fail_at_call - 1  # the checkpoint of the iteration before the failed one
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in rows if r["kind"] == "train"] == list(range(1, result.progress.iteration + 1))
    assert result.progress.env_steps >= 256
