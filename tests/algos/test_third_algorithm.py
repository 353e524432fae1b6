"""A third algorithm, defined only in tests/algos/detpg/ (a deterministic tanh actor), goes through every stage
of rlfit without a line of rlfit changed for it: registered, it trains, evaluates and writes a policy file that
names its head. What every algorithm guarantees (exact resume, stops, the NaN guard, play, export, refusals) it is
checked for in tests/conformance/, parametrized over the registered algorithms and detpg."""

from __future__ import annotations

import json

import jax.numpy as jnp
import numpy as np
import pytest

import rlfit
from rlfit.algos.registry import ALGORITHMS, register_algorithm, register_from_environment, unregister_algorithm
from rlfit.errors import UserError
from tests.conftest import cli_in_process

TOY = "tests.toy_env:make"
EPISODE_LENGTH = 50
OVERRIDES = ("algo=detpg", f"env.episode_length={EPISODE_LENGTH}", "detpg.num_envs=32", "detpg.unroll_length=25",
             "run.eval_every=4", "run.save_interval=4", "run.num_eval_envs=64")
STEPS_PER_ITERATION = 32 * 25
ITERATIONS = 10
STANDING_STILL = EPISODE_LENGTH * (1 - 2 / 3)
"""The toy env's return without moving: reward 1 - |p - t| per step, E|p - t| = 2/3 for p, t uniform on [-1, 1]."""


@pytest.fixture(scope="module", autouse=True)
def detpg():
    register_algorithm("detpg", "tests.algos.detpg")
    yield
    unregister_algorithm("detpg")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """(a straight run of ITERATIONS,); resuming it exactly is tests/conformance/test_resume.py's."""
    root = tmp_path_factory.mktemp("detpg")
    total = f"run.num_timesteps={ITERATIONS * STEPS_PER_ITERATION}"
    return (rlfit.train(TOY, overrides=[*OVERRIDES, total], run_dir=root / "straight"),)


def test_it_trains_and_evaluates_above_standing_still(runs):
    (straight,) = runs
    rows = [json.loads(line) for line in straight.run_dir.metrics.read_text().splitlines()]
    evals = [row["eval/episode_reward"] for row in rows if row["kind"] == "eval"]
    assert [row["iteration"] for row in rows if row["kind"] == "eval"] == [4, 8, 10]
    assert all("loss/policy" in row for row in rows if row["kind"] == "train")
    assert straight.summary["final_eval_reward"] == evals[-1] > STANDING_STILL + 15  # about 43 of at most 50


def actor_actions(result, obs: np.ndarray) -> np.ndarray:
    """tanh(actor(normalized obs)) from the final training state, through the Learner (not the policy file)."""
    from rlfit.config.schema import from_layers, read_yaml
    from rlfit.algos.common.normalizer import normalize
    from rlfit.planning.plan import make_plan
    from rlfit.run.trainer import Trainer

    config = from_layers([read_yaml(result.run_dir.config)])
    learner = Trainer.build(config, make_plan(config)).learner
    params, stats = learner.acting(result.state)
    return np.asarray(jnp.tanh(learner.policy_logits(params, normalize(stats, jnp.asarray(obs)))))


def test_the_policy_file_names_a_deterministic_tanh_head_and_loads_as_the_actor(runs):
    (straight,) = runs
    description = json.loads((straight.run_dir.path / "policy" / "policy.json").read_text())
    assert description["algorithm"] == "detpg" and description["network"]["head"] == "deterministic_tanh"
    assert description["network"]["layer_sizes"] == [32, 32, 1]  # A outputs: no scale head faked
    assert description["format_version"] == 2  # an older rlfit would misread it, so it refuses it
    obs = np.random.default_rng(0).uniform(-1.5, 1.5, (64, 2)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(rlfit.load_policy(straight.run_dir.path)(obs)), actor_actions(straight, obs),
                               atol=1e-6)


def test_registering_is_checked_and_the_environment_variable_registers(monkeypatch):
    with pytest.raises(UserError, match="taken"):
        register_algorithm("ppo", "somewhere.else")
    with pytest.raises(UserError, match="cannot name"):
        register_algorithm("run", "tests.algos.detpg")
    with pytest.raises(UserError, match="name=package"):
        register_from_environment("detpg")
    register_from_environment("detpg_copy=tests.algos.detpg, ")
    try:
        assert ALGORITHMS["detpg_copy"] == "tests.algos.detpg"
    finally:
        unregister_algorithm("detpg_copy")
    assert "detpg_copy" not in ALGORITHMS


def test_an_unregistered_algorithm_is_one_line():
    unregister_algorithm("detpg")
    try:
        with pytest.raises(UserError, match="unknown algo 'detpg'"):
            rlfit.config.schema.resolve(TOY, overrides=["algo=detpg"])
    finally:
        register_algorithm("detpg", "tests.algos.detpg")
    assert rlfit.config.schema.resolve(TOY, overrides=["algo=detpg"]).detpg.num_envs == 16


def test_the_command_line_registers_from_the_environment_variable(tmp_path, capfd, monkeypatch):
    unregister_algorithm("detpg")
    try:
        monkeypatch.setenv("RLFIT_ALGORITHMS", "detpg=tests.algos.detpg")
        listed = cli_in_process(capfd, "keys", cwd=tmp_path)
        assert listed.returncode == 0 and "detpg.exploration_std" in listed.stdout
        unregister_algorithm("detpg")
        monkeypatch.setenv("RLFIT_ALGORITHMS", "detpg")
        refused = cli_in_process(capfd, "keys", cwd=tmp_path)
        assert refused.returncode == 2 and refused.stderr.strip().splitlines() == [
            "rlfit: error: RLFIT_ALGORITHMS holds 'detpg'; write name=package (e.g. td3=my_pkg.td3)"]
        monkeypatch.setenv("RLFIT_ALGORITHMS", "detpg=tests.algos.nowhere")
        missing = cli_in_process(capfd, "train", TOY, "--algo", "detpg", cwd=tmp_path)
        assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1
        assert "registered as tests.algos.nowhere, but tests.algos.nowhere cannot be imported" in missing.stderr
        assert not list(tmp_path.glob("runs/*"))
    finally:
        unregister_algorithm("detpg")
        register_algorithm("detpg", "tests.algos.detpg")


def test_a_head_that_cannot_act_on_the_environment_is_one_line_before_anything_is_written(tmp_path):
    with pytest.raises(UserError, match="'deterministic_tanh' acts on continuous actions but the environment has 3 "
                                        "discrete actions"):
        rlfit.train("tests.toy_env:make_discrete", "smoke", overrides=["algo=detpg"], run_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_it_is_planned_for_a_device_by_its_own_choose(tmp_path, capfd):
    """`rlfit plan` asks the algorithm's `choose` (the contract's `Choice`): the config's sizes and their halvings,
    the largest that fits chosen."""
    planned = cli_in_process(capfd, "plan", TOY, "--algo", "detpg", "--device-memory", "1GiB", "--json",
                             "--set", "detpg.num_envs=32", cwd=tmp_path)
    assert planned.returncode == 0, planned.stderr[-2000:]
    plan = json.loads(planned.stdout)
    sizes = [candidate["num_envs"] for candidate in plan["candidates"]]
    assert sizes == sorted(sizes) and sizes[-1] == 32 and all(b == 2 * a for a, b in zip(sizes, sizes[1:]))
    assert plan["chosen"]["num_envs"] == 32 and plan["chosen"]["fits"]
