"""Exact resume, for every algorithm: trained 5 iterations and resumed to 10, a run ends bit-identical to a straight
10-iteration run (parameters, every checkpointed array, every logged loss, the evaluation), its metrics appended
without a duplicated step. PPO also in fp16, where the loss scale is part of the state. Algorithms with a replay
buffer checkpoint only its filled rows. Covers the test-only detpg too: resuming needs nothing of rlfit's own
algorithms."""

from __future__ import annotations

import json

import pytest

from tests.checkpoints.conftest import ToyCli
from tests.conformance.conftest import ALGORITHM_NAMES, checkpoint_arrays, has_replay

SMALL = ("--set", "run.save_interval=3", "--set", "run.eval_every=4", "--quiet")
CASES = [*((algo, "fp32") for algo in ALGORITHM_NAMES), ("ppo", "fp16")]
COMPARED = ("env_steps", "loss_scale", "noise_std", "replay_size", "updates", "actor_updates")
"""Keys of a train row that must agree (with every `loss/...`), where the algorithm logs them; the rest time."""


@pytest.mark.parametrize(("algo", "precision"), CASES, ids=[f"{a}-{p}" for a, p in CASES])
def test_a_split_run_resumed_is_bit_identical_to_a_straight_run(tmp_path, capfd, algo, precision):
    cli = ToyCli(tmp_path, algo, capfd=capfd)
    settings = (*SMALL, "--set", f"run.precision={precision}")
    if has_replay(algo):  # 4,000 rows of 8 environments, of which only 82 get filled
        settings += ("--set", f"{algo}.max_replay_size=32000")
    half, full = tmp_path / "half", tmp_path / "full"
    first = cli.run("train", *cli.toy, *settings, "--timesteps", "320", "--run-dir", str(half))
    assert first.returncode == 0, first.stderr
    assert cli.summary(half)["iterations"] == 5
    resumed = cli.run("resume", str(half), "--timesteps", "640", "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    straight = cli.run("train", *cli.toy, *settings, "--timesteps", "640", "--run-dir", str(full))
    assert straight.returncode == 0, straight.stderr

    split_summary, straight_summary = cli.summary(half), cli.summary(full)
    assert split_summary["params_digest"] == straight_summary["params_digest"]
    assert split_summary["env_steps"] == straight_summary["env_steps"] == 640
    assert split_summary["iterations"] == straight_summary["iterations"] == 10
    assert split_summary["final_eval_reward"] == straight_summary["final_eval_reward"] is not None
    ours, theirs = checkpoint_arrays(half, 10), checkpoint_arrays(full, 10)
    assert ours and ours == theirs
    split_rows, straight_rows = cli.train_rows(half), cli.train_rows(full)
    assert [r["iteration"] for r in split_rows] == list(range(1, 11))  # appended, no duplicated steps
    assert any(key.startswith("loss/") for key in split_rows[-1])
    for a, b in zip(split_rows, straight_rows, strict=True):
        assert {k: v for k, v in a.items() if k.startswith("loss/") or k in COMPARED} == \
            {k: v for k, v in b.items() if k.startswith("loss/") or k in COMPARED}
    assert ("loss_scale" in split_rows[-1]) == (precision == "fp16")

    if has_replay(algo):
        newest = sorted((full / "checkpoints").iterdir())[-1]
        meta = json.loads((newest / "meta.json").read_text())
        assert {info["rows"] for info in meta["trimmed"].values()} == {4_000}  # only the filled rows were written
        assert {info["fill"] for info in meta["trimmed"].values()} <= {0, -1}  # zeros; final_slot's -1
        stored = sum(p.stat().st_size for p in (newest / "state").rglob("*") if p.is_file())
        # about 135 kB; the whole buffer would be > 4,000 rows x 8 envs x 20 bytes = 640 kB more
        assert stored < 400_000
