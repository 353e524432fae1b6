"""`rlfit transfer-check`: randomized native models, the ONNX policy in native MuJoCo, the report on disk, and every
bad input refused in one line with nothing written. CartpoleBalance with the tests' own randomizer
(`tests/envs/randomizers.py`), a policy saved without training (`tests/deploy/play/support.py`)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
import scipy.stats

from tests.conftest import cli_in_process
from tests.deploy.play.support import make_policy_run
from tests.envs import randomizers

onnx = pytest.importorskip("onnx", reason="needs the export extra: pip install 'rlfit[export]'")
pytest.importorskip("onnxruntime", reason="needs the export extra: pip install 'rlfit[export]'")

CARTPOLE = "CartpoleBalance"
RANDOMIZER = "tests.envs.randomizers:scaled_masses"
EVAL_ROW = {"iteration": 4, "env_steps": 400, "eval/episode_reward": 20.0, "eval/episode_reward_std": 3.0,
            "eval/episode_length": 50.0, "eval/randomized/episode_reward": 18.0,
            "eval/randomized/episode_reward_std": 5.0, "eval/randomized/episode_length": 50.0}


@pytest.fixture(scope="module")
def cartpole_run(tmp_path_factory) -> Path:
    """A CartpoleBalance run dir (randomized by the tests' randomizer) with its policy exported and one MJX
    evaluation recorded in metrics.jsonl."""
    from rlfit.deploy.export.onnx import export_onnx

    run_dir = make_policy_run(tmp_path_factory.mktemp("transfer") / "run", CARTPOLE,
                              overrides=[f"env.randomization={RANDOMIZER}", "run.num_eval_envs=8"])
    export_onnx(run_dir)
    (run_dir / "metrics.jsonl").write_text(json.dumps(EVAL_ROW) + "\n")
    return run_dir


@pytest.fixture(scope="module")
def cartpole_env():
    from rlfit.config.schema import EnvConfig
    from rlfit.envs import load_env

    return load_env(EnvConfig(name=CARTPOLE, impl="jax"), "cpu")


def gravity_and_masses(model, keys):
    """The tests' masses and dampings, and a gravity vector per model (a field of `opt`)."""
    scaled, axes = randomizers.scaled_masses(model, keys)
    gravity = model.opt.gravity * jax.random.uniform(keys[0], (keys.shape[0], 1), minval=0.5, maxval=1.5)
    return scaled.tree_replace({"opt.gravity": gravity}), axes.tree_replace({"opt.gravity": 0})


def test_a_native_copy_holds_row_i_of_each_batched_field_and_the_nominal_rest(cartpole_env):
    from rlfit.deploy.transfer.models import draw_check_models, native_copy, row

    mj_model = cartpole_env.mj_model
    before = {name: np.copy(getattr(mj_model, name)) for name in ("body_mass", "dof_damping", "geom_size")}
    batch = draw_check_models(gravity_and_masses, cartpole_env.mjx_model, seed=0, count=3)
    assert sorted(batch) == ["body_mass", "dof_damping", "opt.gravity"]
    for i in range(3):
        copied = native_copy(mj_model, row(batch, i))
        np.testing.assert_allclose(copied.body_mass, np.asarray(batch["body_mass"][i]), rtol=1e-6)
        np.testing.assert_allclose(copied.dof_damping, np.asarray(batch["dof_damping"][i]), rtol=1e-6)
        np.testing.assert_allclose(copied.opt.gravity, np.asarray(batch["opt.gravity"][i]), rtol=1e-6)
        np.testing.assert_array_equal(copied.geom_size, mj_model.geom_size)  # not batched: nominal
        np.testing.assert_array_equal(copied.opt.timestep, mj_model.opt.timestep)
    assert not np.allclose(batch["body_mass"][0], batch["body_mass"][1])  # models differ from one another
    for name, value in before.items():  # the environment's own model is untouched
        np.testing.assert_array_equal(getattr(mj_model, name), value)



def test_the_native_simulator_integrates_the_model_it_is_switched_to(cartpole_env):
    import mujoco

    from rlfit.deploy.play.native import NativeSimulator
    from rlfit.deploy.transfer.models import native_copy

    nominal = cartpole_env.mj_model
    heavy = native_copy(nominal, {"body_mass": nominal.body_mass * 3.0, "dof_damping": nominal.dof_damping + 0.5})
    start = mujoco.MjData(nominal)
    start.qvel[:] = 0.3
    ctrl = np.full(nominal.nu, 0.7)

    def simulate(simulator):
        return simulator.simulate(start.qpos, start.qvel, start.act, ctrl, start.mocap_pos, start.mocap_quat,
                                  start.xfrc_applied, 0.0, n_substeps=5)[4]  # qpos after the last substep

    simulator = NativeSimulator(nominal)
    on_nominal = simulate(simulator)
    simulator.use_model(heavy)
    on_heavy = simulate(simulator)
    reference = mujoco.MjData(heavy)  # independent: the C simulator driven directly on the heavy model
    reference.qvel[:], reference.ctrl[:] = 0.3, ctrl
    for _ in range(5):
        mujoco.mj_step(heavy, reference)
    np.testing.assert_allclose(on_heavy, reference.qpos, atol=1e-6)
    assert not np.allclose(on_heavy, on_nominal, atol=1e-6)

def test_the_checks_models_are_drawn_apart_from_training_and_evaluation(cartpole_env):
    from rlfit.deploy.transfer.models import draw_check_models
    from rlfit.envs.randomization import draw_models, models_key

    ours = draw_check_models(randomizers.scaled_masses, cartpole_env.mjx_model, seed=0, count=4)["body_mass"]
    training = draw_models(randomizers.scaled_masses, cartpole_env.mjx_model,
                           models_key(jax.random.PRNGKey(0)), 4)["body_mass"]
    assert not np.allclose(ours, training)
    again = draw_check_models(randomizers.scaled_masses, cartpole_env.mjx_model, seed=0, count=4)["body_mass"]
    np.testing.assert_array_equal(ours, again)  # the same seed draws the same models


@pytest.fixture(scope="module")
def checked(cartpole_run, tmp_path_factory):
    """`rlfit transfer-check --json` on the run, report in its own folder: (CompletedProcess, report folder). Whole
    episodes (no --max-steps), so that the run's MJX evaluation is compared."""
    out = tmp_path_factory.mktemp("report")
    result = cli_in_process(None, "transfer-check", str(cartpole_run), "--models", "2", "--episodes-per-model", "2",
                            "--out", str(out), "--json", cwd=out)
    return result, out


def test_the_report_is_written_and_its_figures_follow_from_its_episodes(checked):
    result, out = checked
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)  # --json: stdout is the one object, the report with the files' paths
    assert printed["json"] == str(out / "transfer_check.json") and printed["markdown"] == str(out / "transfer_check.md")
    report = json.loads((out / "transfer_check.json").read_text())
    assert printed["conditions"] == report["conditions"]
    assert (out / "transfer_check.md").read_text().startswith("# Transfer check: CartpoleBalance")
    assert set(report["conditions"]) == {"native_nominal", "native_randomized", "mjx_nominal", "mjx_randomized"}
    episodes = report["episodes"]
    nominal = [e for e in episodes if e["condition"] == "nominal"]
    randomized = [e for e in episodes if e["condition"] == "randomized"]
    assert len(nominal) == len(randomized) == 4 and {e["model_index"] for e in randomized} == {0, 1}
    assert all(0 < e["length"] <= 100 for e in episodes) and report["mjx_left_out"] is None
    for name, mine in (("native_nominal", nominal), ("native_randomized", randomized)):
        returns = np.array([e["episode_return"] for e in mine])
        figures = report["conditions"][name]
        units = returns  # nominal: the episode is the unit; randomized: the model (two models of two episodes)
        if name == "native_randomized":
            units = np.array([np.mean([e["episode_return"] for e in mine if e["model_index"] == m]) for m in (0, 1)])
        low, high = scipy.stats.t.interval(0.95, units.size - 1, loc=units.mean(),
                                           scale=units.std(ddof=1) / np.sqrt(units.size))
        assert figures["return_mean"] == pytest.approx(returns.mean())
        assert (figures["return_low"], figures["return_high"]) == pytest.approx((low, high))
        assert figures["terminated"] == sum(e["terminated"] for e in mine)
    mjx = report["conditions"]["mjx_nominal"]
    assert (mjx["return_mean"], mjx["episodes"]) == (20.0, 8)
    assert report["randomization"]["fields"] == ["body_mass", "dof_damping"]


def test_randomized_models_change_what_native_mujoco_does(checked):
    _, out = checked
    report = json.loads((out / "transfer_check.json").read_text())
    nominal = [e["episode_return"] for e in report["episodes"] if e["condition"] == "nominal"]
    randomized = [e["episode_return"] for e in report["episodes"] if e["condition"] == "randomized"]
    # Episode j of both conditions starts from the same reset: only the model differs.
    assert not np.allclose(nominal, randomized, rtol=1e-3)


def one_line_error(capfd, *argv: str, cwd: Path) -> str:
    result = cli_in_process(capfd, *argv, cwd=cwd)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("rlfit: error: ")
    return result.stderr


def write_onnx(path: Path, input_name: str, obs_size: int, action_size: int, env_name: str = CARTPOLE,
               action_type: int | None = None) -> Path:
    """A one-layer model in the exported file's form: `input_name` [batch, obs_size] -> 'action'."""
    from onnx import TensorProto, helper, numpy_helper

    weights = numpy_helper.from_array(np.zeros((obs_size, action_size), np.float32), "W")
    nodes = [helper.make_node("MatMul", [input_name, "W"], ["y"])]
    if action_type == TensorProto.INT64:
        nodes.append(helper.make_node("ArgMax", ["y"], ["action"], axis=1, keepdims=0))
        output = helper.make_tensor_value_info("action", TensorProto.INT64, ["batch"])
    else:
        nodes.append(helper.make_node("Tanh", ["y"], ["action"]))
        output = helper.make_tensor_value_info("action", TensorProto.FLOAT, ["batch", action_size])
    graph = helper.make_graph(nodes, "other", [helper.make_tensor_value_info(input_name, TensorProto.FLOAT,
                                                                               ["batch", obs_size])],
                              [output], initializer=[weights])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    helper.set_model_props(model, {"env_name": env_name})
    path.write_bytes(model.SerializeToString())
    return path


@pytest.mark.parametrize("kind, message", [
    ("obs_size", "takes observation 'obs' of size 7, but the run's environment gives 'obs' [5]"),
    ("action_size", "outputs 'action' tensor(float) ['batch', 3]"),
    ("discrete", "outputs 'action' tensor(int64) ['batch']"),
    ("env_name", "exported from a policy for G1JoystickFlatTerrain, but the run is CartpoleBalance"),
    ("garbage", "is not an ONNX model onnxruntime can load"),
])
def test_an_onnx_file_from_another_run_is_one_line_and_nothing_is_written(capfd, cartpole_run, tmp_path, kind,
                                                                          message):
    from onnx import TensorProto

    path = tmp_path / "other.onnx"
    if kind == "obs_size":
        write_onnx(path, "obs", 7, 1)
    elif kind == "action_size":
        write_onnx(path, "obs", 5, 3)
    elif kind == "discrete":
        write_onnx(path, "obs", 5, 2, action_type=TensorProto.INT64)
    elif kind == "env_name":
        write_onnx(path, "obs", 5, 1, env_name="G1JoystickFlatTerrain")
    else:
        path.write_bytes(b"not a model")
    err = one_line_error(capfd, "transfer-check", str(cartpole_run), "--onnx", str(path), "--out", str(tmp_path),
                         cwd=tmp_path)
    assert message in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.onnx"]


def test_a_missing_onnx_file_says_to_export_and_writes_nothing(capfd, cartpole_run, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(cartpole_run, run_dir, ignore=shutil.ignore_patterns("policy.onnx", "transfer_check.*"))
    err = one_line_error(capfd, "transfer-check", str(run_dir), cwd=tmp_path)
    assert f"run `rlfit export {run_dir}` first" in err
    assert not list(run_dir.glob("transfer_check*"))
    assert "--onnx" in one_line_error(capfd, "transfer-check", str(run_dir), "--onnx", str(tmp_path / "none.onnx"),
                                      cwd=tmp_path)


def test_a_folder_that_is_not_a_run_and_bad_counts_are_one_line(capfd, cartpole_run, tmp_path):
    assert "has no config.yaml" in one_line_error(capfd, "transfer-check", str(tmp_path), cwd=tmp_path)
    assert "does not exist" in one_line_error(capfd, "transfer-check", str(tmp_path / "nowhere"), cwd=tmp_path)
    assert "--models must be at least 1" in one_line_error(capfd, "transfer-check", str(cartpole_run), "--models",
                                                           "0", cwd=tmp_path)
    assert "--out" in one_line_error(capfd, "transfer-check", str(cartpole_run), "--out", str(tmp_path / "no"),
                                     cwd=tmp_path)
    assert "--max-steps 101 is longer than the run's episodes (100 policy steps" in one_line_error(
        capfd, "transfer-check", str(cartpole_run), "--max-steps", "101", "--out", str(tmp_path), cwd=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_without_onnxruntime_it_names_the_extra_in_one_line_and_writes_nothing(capfd, cartpole_run, tmp_path,
                                                                                  monkeypatch):
    """A plain `pip install .` has no onnxruntime: the check says which extra it needs."""
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # `import onnxruntime` raises ImportError
    run_dir = tmp_path / "run"
    shutil.copytree(cartpole_run, run_dir, ignore=shutil.ignore_patterns("transfer_check.*"))
    err = one_line_error(capfd, "transfer-check", str(run_dir), cwd=tmp_path)
    assert "pip install 'rlfit[export]'" in err
    assert not list(run_dir.glob("transfer_check*"))
