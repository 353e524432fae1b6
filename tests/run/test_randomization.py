"""Training with domain randomization, driven through the CLI with the tests' own randomizer
(`tests/envs/randomizers.py`) on the weighted toy (`tests.toy_env:make_weighted`: a MuJoCo model whose mass and
damping scale the point's moves, at the toy's compile cost; the environment layer is checked on CartpoleBalance
against Playground's own wrapper in tests/envs/test_randomization.py): on and off train differently, a resumed run is
bit-identical to a straight one, the evaluation reports nominal and randomized returns everywhere a metric goes, and
bad input writes nothing."""

from __future__ import annotations

import json

import pytest

from tests.conftest import cli_in_process
from tests.sinks.test_tensorboard import read_scalars

pytestmark = pytest.mark.slow

RANDOMIZED = ("--set", "env.randomization=tests.envs.randomizers:scaled_masses")
WEIGHTED = "tests.toy_env:make_weighted"
SMOKE = ("train", WEIGHTED, "--preset", "smoke", "--quiet", "--set", "run.save_interval=1")


def summary(run_dir) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def rows(run_dir, kind: str) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [row for row in map(json.loads, lines) if row["kind"] == kind]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Four runs: randomized straight to 128 steps, randomized to 64 then resumed to 128, the same with
    randomization off, and randomized with another seed."""
    root = tmp_path_factory.mktemp("randomized")
    paths = {name: root / name for name in ("straight", "split", "off", "seed1")}

    def train(*args: str) -> None:
        result = cli_in_process(None, *args, cwd=root)
        assert result.returncode == 0, result.stderr[-3000:]

    train(*SMOKE, *RANDOMIZED, "--timesteps", "128", "--run-dir", str(paths["straight"]))
    train(*SMOKE, *RANDOMIZED, "--timesteps", "64", "--run-dir", str(paths["split"]))
    train("resume", str(paths["split"]), "--timesteps", "128", "--quiet")
    train(*SMOKE, "--set", "env.randomization=off", "--timesteps", "128", "--run-dir", str(paths["off"]))
    train(*SMOKE, *RANDOMIZED, "--timesteps", "128", "--set", "run.seed=1", "--run-dir", str(paths["seed1"]))
    return paths


def test_a_resumed_randomized_run_is_bit_identical_to_a_straight_one(runs):
    split, straight = summary(runs["split"]), summary(runs["straight"])
    assert split["iterations"] == straight["iterations"] == 2
    assert split["params_digest"] == straight["params_digest"]
    assert [row["loss/total"] for row in rows(runs["split"], "train")] == \
        [row["loss/total"] for row in rows(runs["straight"], "train")]


def test_randomization_changes_training_and_follows_the_seed(runs):
    digests = {name: summary(path)["params_digest"] for name, path in runs.items()}
    assert digests["straight"] != digests["off"]
    assert digests["straight"] != digests["seed1"]


def test_evaluation_reports_nominal_and_randomized_returns_everywhere(runs):
    run = runs["straight"]
    described = summary(run)
    assert described["randomization"] == {
        "setting": "tests.envs.randomizers:scaled_masses", "source": "tests.envs.randomizers:scaled_masses",
        "fields": ["body_mass", "dof_damping"], "bytes_per_env": 12,  # 2 bodies' masses, 1 joint's damping
        "note": "domain randomization: tests.envs.randomizers:scaled_masses (2 fields, 12 bytes per environment: "
                "body_mass, dof_damping)"}
    last = rows(run, "eval")[-1]
    assert described["final_eval_reward"] == last["eval/episode_reward"]
    assert described["final_eval_reward_randomized"] == last["eval/randomized/episode_reward"]
    assert last["eval/randomized/episode_reward"] != last["eval/episode_reward"]  # other models, other returns
    assert {"eval/randomized/episode_reward_std", "eval/randomized/episode_length"} <= set(last)
    scalars = read_scalars(run / "tb")
    assert scalars["eval/randomized/episode_reward"][last["env_steps"]] == pytest.approx(
        last["eval/randomized/episode_reward"])

    off = summary(runs["off"])
    assert off["final_eval_reward_randomized"] is None and off["randomization"]["source"] is None
    assert not any(key.startswith("eval/randomized") for key in rows(runs["off"], "eval")[-1])


@pytest.mark.parametrize("setting, message", [
    ("tests.envs.randomizers:fails", "env.randomization: tests.envs.randomizers:fails failed: RuntimeError"),
    ("tests.envs.randomizers:unbatched", "returned 'body_mass' of shape (2,) for 8 keys"),
    ("tests.envs.nowhere:draw", "cannot import module 'tests.envs.nowhere'"),
    ("sometimes", "env.randomization must be auto, off or module:function, got 'sometimes'"),
])
def test_bad_randomization_is_one_line_exit_2_and_writes_nothing(capfd, tmp_path, setting, message):
    run_dir = tmp_path / "run"
    result = cli_in_process(capfd, *SMOKE, "--set", f"env.randomization={setting}", "--run-dir", str(run_dir),
                            cwd=tmp_path)
    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not run_dir.exists() and list(tmp_path.iterdir()) == []


def test_randomizing_an_environment_without_a_model_exits_2(capfd, tmp_path):
    result = cli_in_process(capfd, "train", "tests.toy_env:make", "--preset", "smoke", "--quiet",
                            *RANDOMIZED, "--run-dir", str(tmp_path / "run"), cwd=tmp_path)
    assert result.returncode == 2 and "has no MJX model to randomize" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_run_saved_before_randomization_existed_resumes_on_the_nominal_model():
    """A checkpoint's record (or config.yaml) without env.randomization was trained without it: `off`, not today's
    default `auto` (which for G1 would add a batch of models its checkpoint does not hold)."""
    from rlfit.config.schema import from_layers
    from rlfit.run.restore import as_saved

    old = {"algo": "ppo", "env": {"name": "G1JoystickFlatTerrain"}}
    assert from_layers([as_saved(old)]).env.randomization == "off"
    assert old == {"algo": "ppo", "env": {"name": "G1JoystickFlatTerrain"}}  # the record itself is left alone
    newer = {"algo": "ppo", "env": {"name": "G1JoystickFlatTerrain", "randomization": "auto"}}
    assert from_layers([as_saved(newer)]).env.randomization == "auto"


@pytest.mark.parametrize("algo", ["sac", "fasttd3"])
def test_the_off_policy_algorithms_train_on_randomized_models(capfd, tmp_path, algo):
    """The environment layer is shared: SAC and FastTD3 train on the batch and evaluate on both kinds of model."""
    run_dir = tmp_path / "run"
    result = cli_in_process(capfd, *SMOKE, "--algo", algo, *RANDOMIZED, "--run-dir", str(run_dir), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert summary(run_dir)["randomization"]["fields"] == ["body_mass", "dof_damping"]
    assert "eval/randomized/episode_reward" in rows(run_dir, "eval")[-1]


def test_a_seed_in_a_group_draws_the_models_its_solo_run_draws():
    """`rlfit experiment`'s seed groups stack each seed's fresh state from the solo run's starting-state program:
    each seed trains on exactly its solo run's models, and seeds differ."""
    import numpy as np

    from rlfit.config.schema import resolve
    from rlfit.planning.plan import config_sizes, make_plan
    from rlfit.run.trainer import Trainer
    from rlfit.run.seed_group import SeedGroup, lane

    config = resolve(WEIGHTED, "smoke", overrides=[RANDOMIZED[1]])
    trainer = Trainer.build(config, make_plan(config, config_sizes(config), devices=1))
    grouped = SeedGroup.build(trainer, (3, 4)).init()
    alone = trainer.starting_state_program(4)[0](np.int32(4))
    for field, models in lane(grouped, 1).env_state.models.items():
        np.testing.assert_array_equal(models, alone.env_state.models[field])
        assert not np.array_equal(lane(grouped, 0).env_state.models[field], models)
