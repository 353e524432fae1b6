"""The deployable policy file: save_policy / load_policy against the training maths and a plain-numpy reference."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rlfit
from rlfit.algos.ppo.config import PPOConfig
from rlfit.envs.action_space import ActionSpace
from rlfit.errors import UserError
from rlfit.algos.ppo.networks import make_agent
from rlfit.networks import TanhGaussian
from rlfit.algos.common.normalizer import RunningStats, normalize
from rlfit.deploy.policy_file import DESCRIPTION_FILE, WEIGHTS_FILE, save_policy
from rlfit.algos.contract import PolicySpec

ACTION_SIZE = 3
DICT_OBS = {"state": jnp.zeros(7), "privileged_state": jnp.zeros(11)}
NETWORK = PPOConfig(policy_hidden=(16, 8), value_hidden=(8,), activation="swish")


def make_stats(obs_example, seed=0, count=50.0) -> RunningStats:
    leaves, treedef = jax.tree.flatten(obs_example)
    rng = np.random.default_rng(seed)
    means = [jnp.asarray(rng.normal(size=x.shape), jnp.float32) for x in leaves]
    m2 = [jnp.asarray(count * rng.uniform(0.25, 4.0, size=x.shape), jnp.float32) for x in leaves]
    return RunningStats(jnp.asarray(count, jnp.float32), jax.tree.unflatten(treedef, means),
                        jax.tree.unflatten(treedef, m2))


def saved_policy(directory: Path, obs_example=DICT_OBS, network=NETWORK, seed=0):
    """Saves a freshly initialized policy; returns (agent, params, stats)."""
    agent = make_agent(obs_example, ACTION_SIZE, network)
    params = agent.init(jax.random.PRNGKey(seed))
    stats = make_stats(obs_example, seed)
    save_policy(directory, params.policy, stats, spec_of(network), obs_example, ActionSpace("continuous", ACTION_SIZE),
                "TestEnv", "fp32", "ppo")
    return agent, params, stats


def numpy_reference(policy_dir: Path, obs: np.ndarray) -> np.ndarray:
    """The deterministic action computed from the files alone with numpy (swish MLP, tanh of the mean half)."""
    description = json.loads((policy_dir / DESCRIPTION_FILE).read_text())
    weights = np.load(policy_dir / WEIGHTS_FILE)
    count = float(weights["normalizer/count"])
    std = np.clip(np.sqrt(weights["normalizer/sum_sq_dev"] / count), 1e-6, 1e6)
    x = (obs - weights["normalizer/mean"]) / std
    layers = len(description["network"]["layer_sizes"])
    for index in range(layers):
        x = x @ weights[f"params/params/dense_{index}/kernel"] + weights[f"params/params/dense_{index}/bias"]
        if index < layers - 1:
            x = x / (1.0 + np.exp(-x))
    return np.tanh(x[..., :description["action_size"]])


def test_round_trip_matches_the_training_mean_action_and_a_numpy_reference(tmp_path):
    agent, params, stats = saved_policy(tmp_path / "policy")
    policy = rlfit.load_policy(tmp_path / "policy")
    rng = np.random.default_rng(1)
    obs = {"state": rng.normal(size=(5, 7)).astype(np.float32),
           "privileged_state": rng.normal(size=(5, 11)).astype(np.float32)}
    action = np.asarray(policy(obs))
    training = TanhGaussian.from_logits(agent.policy_logits(params.policy, normalize(stats, obs))).mode()
    assert action.shape == (5, ACTION_SIZE)
    np.testing.assert_allclose(action, np.asarray(training), atol=1e-6)
    np.testing.assert_allclose(action, numpy_reference(tmp_path / "policy", obs["state"]), atol=1e-5)
    np.testing.assert_allclose(np.asarray(policy(obs["state"])), action)  # the entry alone works too


def test_description_holds_the_network_observations_and_versions(tmp_path):
    saved_policy(tmp_path / "policy")
    policy = rlfit.load_policy(tmp_path / "policy")
    assert policy.action_size == ACTION_SIZE
    assert policy.observation_shapes == {"state": (7,), "privileged_state": (11,)}
    assert policy.obs_key == "state" and policy.input_shape == (7,)
    description = policy.description
    assert description["network"]["layer_sizes"] == [16, 8, 2 * ACTION_SIZE]
    assert description["network"]["activation"] == "swish"
    assert description["env_name"] == "TestEnv" and description["rlfit_version"] == rlfit.__version__


def test_array_observations_and_leading_batch_axes(tmp_path):
    saved_policy(tmp_path / "policy", obs_example=jnp.zeros(4))
    policy = rlfit.load_policy(tmp_path / "policy")
    assert policy.observation_shapes == {"obs": (4,)} and policy.obs_key is None
    obs = np.random.default_rng(2).normal(size=(2, 3, 4)).astype(np.float32)
    action = np.asarray(policy(obs))
    assert action.shape == (2, 3, ACTION_SIZE) and np.all(np.abs(action) <= 1.0)
    np.testing.assert_allclose(action, numpy_reference(tmp_path / "policy", obs), atol=1e-5)


def test_loads_from_run_dir_checkpoint_dir_policy_dir_and_description_file(tmp_path):
    saved_policy(tmp_path / "run" / "policy", seed=0)
    saved_policy(tmp_path / "run" / "checkpoints" / "00000050" / "policy", seed=1)
    obs = np.ones((1, 7), np.float32)
    newest = np.asarray(rlfit.load_policy(tmp_path / "run")(obs))
    for path in (tmp_path / "run" / "policy", tmp_path / "run" / "policy" / DESCRIPTION_FILE):
        np.testing.assert_array_equal(np.asarray(rlfit.load_policy(path)(obs)), newest)
    older = np.asarray(rlfit.load_policy(tmp_path / "run" / "checkpoints" / "00000050")(obs))
    assert not np.allclose(older, newest)


def test_saving_again_replaces_atomically_and_leaves_no_temporary_folders(tmp_path):
    saved_policy(tmp_path / "policy", seed=0)
    saved_policy(tmp_path / "policy", seed=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy"]
    assert sorted(p.name for p in (tmp_path / "policy").iterdir()) == [DESCRIPTION_FILE, WEIGHTS_FILE]


def test_a_failed_save_keeps_the_previous_policy(tmp_path, monkeypatch):
    from rlfit.deploy import policy_file as policy_io

    saved_policy(tmp_path / "policy", seed=0)
    before = (tmp_path / "policy" / WEIGHTS_FILE).read_bytes()

    def disk_full(path, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(policy_io, "write_synced", disk_full)
    with pytest.raises(OSError):
        saved_policy(tmp_path / "policy", seed=1)
    assert (tmp_path / "policy" / WEIGHTS_FILE).read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy"]


def test_a_save_killed_between_the_renames_still_loads(tmp_path):
    saved_policy(tmp_path / "policy")
    (tmp_path / "policy").rename(tmp_path / ".policy.old")  # the instant between moving aside and renaming in
    assert rlfit.load_policy(tmp_path).action_size == ACTION_SIZE


def test_corrupt_weights_are_one_line(tmp_path):
    saved_policy(tmp_path / "policy")
    weights = tmp_path / "policy" / WEIGHTS_FILE
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(UserError, match="corrupt") as error:
        rlfit.load_policy(tmp_path)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("text", ["{not json", '{"format": "something else"}', "[]"])
def test_damaged_description_is_a_user_error(tmp_path, text):
    saved_policy(tmp_path / "policy")
    (tmp_path / "policy" / DESCRIPTION_FILE).write_text(text)
    with pytest.raises(UserError):
        rlfit.load_policy(tmp_path)


def test_missing_paths_are_one_line(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        rlfit.load_policy(tmp_path / "nowhere")
    (tmp_path / "run").mkdir()
    with pytest.raises(UserError, match="no saved policy"):
        rlfit.load_policy(tmp_path / "run")


def spec_of(network) -> PolicySpec:
    """The acting network's description from a PPO network config."""
    return PolicySpec(tuple(network.policy_hidden), network.activation, network.policy_obs_key)


# ---------------------------------------------------------------- action heads

FORMAT1 = Path(__file__).parent / "data" / "policy_format1"
"""Policy files written by rlfit before heads were recorded (commit d818702): a PPO policy on the toy env's
observation [2] for 2 continuous actions and for 3 discrete ones, with the actions that rlfit computed."""


@pytest.mark.parametrize("kind, head", [("continuous", "tanh_gaussian"), ("discrete", "categorical")])
def test_a_policy_file_without_a_head_reads_as_before(kind, head):
    assert "head" not in json.loads((FORMAT1 / kind / DESCRIPTION_FILE).read_text())["network"]
    expected = json.loads((FORMAT1 / "expected_actions.json").read_text())
    policy = rlfit.load_policy(FORMAT1 / kind)
    assert policy.head.name == head
    actions = np.asarray(policy(np.asarray(expected["observations"], np.float32)))
    np.testing.assert_allclose(actions, np.asarray(expected[kind]), atol=1e-6)


def head_numpy(head: str, y: np.ndarray) -> np.ndarray:
    """The deterministic action of each head, written independently of rlfit.networks.heads."""
    if head == "tanh_gaussian":
        return np.tanh(y[..., : y.shape[-1] // 2])
    if head == "deterministic_tanh":
        return np.tanh(y)
    return np.argmax(y, axis=-1)


@pytest.mark.parametrize("head, space", [("tanh_gaussian", ActionSpace("continuous", 3)),
                                         ("deterministic_tanh", ActionSpace("continuous", 3)),
                                         ("categorical", ActionSpace("discrete", 4)),
                                         ("q_argmax", ActionSpace("discrete", 4))])
def test_each_head_is_recorded_and_loads_as_numpy_computes_it(tmp_path, head, space):
    from rlfit.networks import MLP

    width = {"tanh_gaussian": 6}.get(head, space.size)
    mlp = MLP((16, width), "swish")
    obs_example = jnp.zeros(5)
    params = mlp.init(jax.random.PRNGKey(1), obs_example)
    stats = make_stats(obs_example, seed=2)
    save_policy(tmp_path, params, stats, PolicySpec((16,), "swish", "state", None, head), obs_example, space, "Env",
                "fp32", "test")
    description = json.loads((tmp_path / DESCRIPTION_FILE).read_text())
    assert description["network"]["head"] == head and description["network"]["layer_sizes"] == [16, width]
    assert description["format_version"] == (1 if head in ("tanh_gaussian", "categorical") else 2)
    obs = np.random.default_rng(3).normal(size=(32, 5)).astype(np.float32)
    normalized = (obs - np.asarray(stats.mean)) / np.sqrt(np.asarray(stats.sum_sq_dev) / float(stats.count))
    y = np.asarray(mlp.apply(params, jnp.asarray(normalized)))
    np.testing.assert_allclose(np.asarray(rlfit.load_policy(tmp_path)(obs)), head_numpy(head, y), atol=1e-5)


def test_a_head_that_does_not_fit_the_actions_or_the_outputs_is_refused(tmp_path):
    with pytest.raises(UserError, match="acts on discrete actions"):
        saved = PolicySpec((8,), "swish", "state", None, "q_argmax")
        save_policy(tmp_path, {}, make_stats(jnp.zeros(2)), saved, jnp.zeros(2), ActionSpace("continuous", 2), "E",
                    "fp32", "test")
    saved_policy(tmp_path / "policy")
    path = tmp_path / "policy" / DESCRIPTION_FILE
    description = json.loads(path.read_text())
    path.write_text(json.dumps({**description, "network": {**description["network"], "head": "deterministic_tanh"}}))
    with pytest.raises(UserError, match="has 6 outputs, but its action head 'deterministic_tanh' reads 3"):
        rlfit.load_policy(tmp_path)
    path.write_text(json.dumps({**description, "network": {**description["network"], "head": "beta"}}))
    with pytest.raises(UserError, match="unknown action head 'beta'"):
        rlfit.load_policy(tmp_path)
