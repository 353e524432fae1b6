"""Exact resume of a seed group, for every algorithm: two seeds trained in one program, stopped after 5 of 10
iterations (the loop takes the stop as a SIGTERM's: every lane saves and says so) and continued together, end
bit-identical to the same group trained straight (parameters, every checkpointed array, every logged loss). A single
run is a group of one lane through the same loop: test_resume.py checks it the same way."""

from __future__ import annotations

import pytest

from tests.checkpoints.conftest import ToyCli
from tests.conformance.conftest import ALGORITHM_NAMES, checkpoint_arrays, has_replay
from tests.conformance.test_resume import COMPARED

NOTE = {"seeds": [0, 1], "size": 2, "reason": "test"}


def group_config(algo: str):
    from rlfit.config.schema import resolve
    from rlfit.hardware.jax_setup import configure_jax

    settings = [f"algo={algo}", "env.episode_length=50", "run.save_interval=3", "run.eval_every=4",
                "run.num_timesteps=640"]
    if has_replay(algo):
        settings.append(f"{algo}.max_replay_size=32000")
    config = resolve("tests.toy_env:make", "smoke", overrides=settings)
    configure_jax(config.run.precision)
    return config


def train_group(config, root):
    """Seeds 0 and 1 of `config` in one program, their run directories in `root`."""
    from rlfit.planning.plan import make_plan
    from rlfit.run.seed_group import SeedGroup
    from rlfit.run.trainer import Trainer
    from rlfit.study.group_runner import train_seed_group

    group = SeedGroup.build(Trainer.build(config, make_plan(config)), (0, 1))
    return train_seed_group(group, [config.replace(run={"seed": seed}) for seed in group.seeds],
                            [root / f"seed-{seed}" for seed in group.seeds], lambda _: None, NOTE)


@pytest.mark.parametrize("algo", ALGORITHM_NAMES)
def test_a_seed_group_stopped_and_continued_is_bit_identical_to_a_straight_group(tmp_path, monkeypatch, algo):
    from rlfit.run import loop
    from rlfit.run.signals import StopRequested
    from rlfit.study.group_runner import continue_seed_group

    config = group_config(algo)
    asked = []
    real = loop.stop_before_next

    def sigterm_after_five(rules, elapsed_s, slowest_step_s, signal):  # asked after each iteration but the last
        asked.append(True)
        return "SIGTERM" if len(asked) == 5 else real(rules, elapsed_s, slowest_step_s, signal)

    monkeypatch.setattr(loop, "stop_before_next", sigterm_after_five)
    with pytest.raises(StopRequested):
        train_group(config, tmp_path / "stopped")
    monkeypatch.undo()
    cli = ToyCli(tmp_path, algo)
    for seed in (0, 1):
        assert cli.summary(tmp_path / "stopped" / f"seed-{seed}")["stopped_by"] == "SIGTERM"
        assert cli.summary(tmp_path / "stopped" / f"seed-{seed}")["iterations"] == 5
    assert continue_seed_group([tmp_path / "stopped" / f"seed-{seed}" for seed in (0, 1)], lambda _: None, NOTE)
    train_group(config, tmp_path / "straight")
    for seed in (0, 1):
        stopped, straight = tmp_path / "stopped" / f"seed-{seed}", tmp_path / "straight" / f"seed-{seed}"
        ours, theirs = cli.summary(stopped), cli.summary(straight)
        assert ours["iterations"] == theirs["iterations"] == 10 and ours["stopped_by"] is None
        assert ours["params_digest"] == theirs["params_digest"]
        assert ours["final_eval_reward"] == theirs["final_eval_reward"] is not None
        assert checkpoint_arrays(stopped, 10) == checkpoint_arrays(straight, 10)
        split_rows, straight_rows = cli.train_rows(stopped), cli.train_rows(straight)
        assert [r["iteration"] for r in split_rows] == list(range(1, 11))
        for a, b in zip(split_rows, straight_rows, strict=True):
            assert {k: v for k, v in a.items() if k.startswith("loss/") or k in COMPARED} == \
                {k: v for k, v in b.items() if k.startswith("loss/") or k in COMPARED}
