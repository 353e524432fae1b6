"""`rlfit export --format onnx`: the ONNX model against a plain-numpy MLP and rlfit.load_policy; refusals."""

from __future__ import annotations

import math
import os
import subprocess
import sys
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
from rlfit.deploy.policy_file import save_policy
from rlfit.algos.contract import PolicySpec
from tests.deploy.play.support import make_policy_run, random_stats

onnxruntime = pytest.importorskip("onnxruntime", reason="needs the export extra: pip install 'rlfit[export]'")
REPO_ROOT = Path(__file__).resolve().parents[3]

NUMPY_ACTIVATIONS = {
    "swish": lambda x: x / (1.0 + np.exp(-x)),
    "relu": lambda x: np.maximum(x, 0.0),
    "tanh": np.tanh,
    "elu": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0.0))),
    "gelu": lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3))),
}


def numpy_policy(params, stats_mean, stats_m2, count, activation, obs, action_size):
    """Independent reference: normalize, dense layers with `activation`, tanh of the mean half."""
    x = (obs - stats_mean) / np.clip(np.sqrt(stats_m2 / count), 1e-6, 1e6)
    layers = params["params"]
    for index in range(len(layers)):
        x = x @ np.asarray(layers[f"dense_{index}"]["kernel"]) + np.asarray(layers[f"dense_{index}"]["bias"])
        if index < len(layers) - 1:
            x = NUMPY_ACTIVATIONS[activation](x)
    return np.tanh(x[..., :action_size])


def save_dict_obs_policy(run_dir: Path, activation: str, action_size: int = 4):
    """A run dir with a policy on dict observations {'state': [9], 'privileged_state': [13]}."""
    obs_example = {"state": jnp.zeros(9), "privileged_state": jnp.zeros(13)}
    network = PPOConfig(policy_hidden=(32, 16), value_hidden=(8,), activation=activation)
    params = make_agent(obs_example, action_size, network).init(jax.random.PRNGKey(5)).policy
    stats = random_stats(obs_example, seed=7)
    save_policy(run_dir / "policy", params, stats, spec_of(network), obs_example, ActionSpace("continuous", action_size),
                "DictEnv", "fp32", "ppo")
    return params, stats


@pytest.mark.parametrize("activation", sorted(NUMPY_ACTIVATIONS))
def test_onnx_matches_a_numpy_mlp_for_each_activation(tmp_path, activation):
    from rlfit.deploy.export.onnx import export_onnx

    params, stats = save_dict_obs_policy(tmp_path, activation)
    result = export_onnx(tmp_path)
    assert result.path == tmp_path / "policy.onnx" and result.input_name == "state"
    assert result.input_shape == (9,) and result.action_size == 4 and result.max_abs_diff <= 1e-4
    session = onnxruntime.InferenceSession(str(result.path), providers=["CPUExecutionProvider"])
    (inp,), (out,) = session.get_inputs(), session.get_outputs()
    assert (inp.name, inp.shape, out.name, out.shape) == ("state", ["batch", 9], "action", ["batch", 4])
    obs = np.random.default_rng(0).normal(scale=3.0, size=(64, 9)).astype(np.float32)
    (actions,) = session.run(["action"], {"state": obs})
    expected = numpy_policy(params, np.asarray(stats.mean["state"]), np.asarray(stats.sum_sq_dev["state"]),
                            float(stats.count), activation, obs, 4)
    np.testing.assert_allclose(actions, expected, atol=1e-5)


@pytest.fixture(scope="module")
def cartpole_run(tmp_path_factory) -> Path:
    return make_policy_run(tmp_path_factory.mktemp("export") / "run", "CartpoleBalance")


def test_cli_export_writes_a_model_onnxruntime_runs_like_load_policy(cartpole_run, tmp_path):
    out = tmp_path / "cartpole.onnx"
    result = subprocess.run([sys.executable, "-m", "rlfit", "export", str(cartpole_run), "--format", "onnx",
                             "--out", str(out)], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert result.returncode == 0, result.stderr
    assert "input 'obs' float32 [batch, 5]" in result.stdout and "'action' float32 [batch, 1]" in result.stdout
    session = onnxruntime.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    obs = np.random.default_rng(1).normal(scale=2.0, size=(128, 5)).astype(np.float32)
    (actions,) = session.run(["action"], {"obs": obs})
    np.testing.assert_allclose(actions, np.asarray(rlfit.load_policy(cartpole_run)(obs)), atol=1e-4)


def test_a_model_that_disagrees_is_refused_and_nothing_is_written(tmp_path, monkeypatch):
    from rlfit.deploy.export import onnx as export_onnx_module

    save_dict_obs_policy(tmp_path, "swish")
    (tmp_path / "policy.onnx").write_bytes(b"previous")
    monkeypatch.setattr(export_onnx_module, "max_abs_difference", lambda *args: 0.5)
    with pytest.raises(UserError, match="differs from rlfit.load_policy"):
        export_onnx_module.export_onnx(tmp_path)
    assert (tmp_path / "policy.onnx").read_bytes() == b"previous"


def one_line_error(capsys, *argv: str) -> str:
    from rlfit.cli import main

    try:
        code = main(list(argv))
    except SystemExit as stop:  # argparse's own usage errors
        code = stop.code
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    return err


def test_unknown_format_is_one_line(capsys, tmp_path):
    save_dict_obs_policy(tmp_path, "swish")
    assert "invalid choice: 'tflite'" in one_line_error(capsys, "export", str(tmp_path), "--format", "tflite")


def test_missing_policy_and_corrupt_policy_are_one_line(capsys, tmp_path):
    (tmp_path / "empty").mkdir()
    assert "no saved policy" in one_line_error(capsys, "export", str(tmp_path / "empty"))
    save_dict_obs_policy(tmp_path / "run", "swish")
    (tmp_path / "run" / "policy" / "weights.npz").write_bytes(b"garbage")
    assert "corrupt" in one_line_error(capsys, "export", str(tmp_path / "run"))
    assert not (tmp_path / "run" / "policy.onnx").exists()


def spec_of(network) -> PolicySpec:
    """The acting network's description from a PPO network config."""
    return PolicySpec(tuple(network.policy_hidden), network.activation, network.policy_obs_key)


@pytest.mark.parametrize("head, space, second", [("tanh_gaussian", ActionSpace("continuous", 2), None),
                                                 ("deterministic_tanh", ActionSpace("continuous", 2), None),
                                                 ("categorical", ActionSpace("discrete", 5), "logits"),
                                                 ("q_argmax", ActionSpace("discrete", 5), "q_values")])
def test_each_action_head_exports_as_numpy_computes_it(tmp_path, head, space, second):
    from rlfit.deploy.export.onnx import export_onnx
    from rlfit.networks import MLP

    width = 2 * space.size if head == "tanh_gaussian" else space.size
    mlp = MLP((16, width), "relu")
    obs_example = jnp.zeros(6)
    params = mlp.init(jax.random.PRNGKey(4), obs_example)
    stats = random_stats(obs_example, seed=3)
    save_policy(tmp_path / "policy", params, stats, PolicySpec((16,), "relu", "state", None, head), obs_example, space,
                "Env", "fp32", "test")
    result = export_onnx(tmp_path)
    assert result.discrete == space.discrete and result.max_abs_diff <= 1e-4
    session = onnxruntime.InferenceSession(str(result.path), providers=["CPUExecutionProvider"])
    assert [output.name for output in session.get_outputs()] == ["action"] + ([second] if second else [])
    obs = np.random.default_rng(2).normal(scale=2.0, size=(64, 6)).astype(np.float32)
    outputs = session.run(None, {"obs": obs})
    x = (obs - np.asarray(stats.mean)) / np.clip(np.sqrt(np.asarray(stats.sum_sq_dev) / float(stats.count)), 1e-6, 1e6)
    layers = params["params"]
    y = np.maximum(x @ np.asarray(layers["dense_0"]["kernel"]) + np.asarray(layers["dense_0"]["bias"]), 0.0)
    y = y @ np.asarray(layers["dense_1"]["kernel"]) + np.asarray(layers["dense_1"]["bias"])
    if space.discrete:
        np.testing.assert_allclose(outputs[1], y, atol=1e-4)
        np.testing.assert_array_equal(outputs[0], np.argmax(outputs[1], axis=-1))
    else:
        expected = np.tanh(y[:, :2]) if head == "tanh_gaussian" else np.tanh(y)
        np.testing.assert_allclose(outputs[0], expected, atol=1e-5)
