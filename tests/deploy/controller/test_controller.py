"""The bundle of a DM Control environment (CartpoleBalance) against its model, `rlfit export` writing it, the
controller with JAX made unimportable, `rlfit sim2sim` and its refusals. No training: a policy run made by
`make_policy_run` (about 60 s on 2 cores, most of it the CLI's processes starting)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.deploy.play.support import make_policy_run

pytest.importorskip("onnxruntime", reason="needs the export extra: pip install 'rlfit[export]'")
REPO_ROOT = Path(__file__).resolve().parents[3]


def rlfit_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT / "src"), str(REPO_ROOT)])}
    return subprocess.run([sys.executable, "-m", "rlfit", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


@pytest.fixture(scope="module")
def cartpole_export(tmp_path_factory) -> Path:
    """A CartpoleBalance policy run, exported by the CLI; the run directory."""
    run = make_policy_run(tmp_path_factory.mktemp("cartpole") / "run", "CartpoleBalance")
    result = rlfit_cli("export", str(run), cwd=run)
    assert result.returncode == 0, result.stderr
    assert "deploy.yaml" in result.stdout
    return run


def test_the_cartpole_bundle_against_the_environment(cartpole_export):
    from mujoco_playground import registry

    from rlfit.deploy.bundle.schema import read_yaml

    bundle = read_yaml(cartpole_export / "deploy.yaml")
    env = registry.load("CartpoleBalance", config_overrides={"impl": "jax"})
    m = env.mj_model
    assert bundle.env == "CartpoleBalance" and bundle.robot == "cart-pole" and bundle.observation_set == "full"
    assert bundle.ctrl_dt == env.dt and bundle.sim_dt == m.opt.timestep and bundle.substeps == 1
    action = bundle.action
    assert action.kind == "direct" and action.joint_names == ["slider"] and action.kp == [0.0]
    assert action.gear == [m.actuator_gear[0, 0]] and action.kd == [m.dof_damping[0]]
    assert action.torque_limit == [m.actuator_gear[0, 0] * m.actuator_ctrlrange[0, 1]]
    assert action.target_range == [list(m.actuator_ctrlrange[0])]
    assert [(e.name, e.start, e.stop) for e in bundle.observation.layout] == [
        ("cart_position", 0, 1), ("pole_cos", 1, 2), ("pole_sin", 2, 3), ("velocities", 3, 5)]
    assert bundle.observation.joint_names == ["slider", "hinge_1"] and bundle.clocks == []
    assert bundle.versions["rlfit"] == __import__("rlfit").__version__


def test_the_onnx_metadata_holds_the_same_bundle(cartpole_export):
    import onnxruntime

    from rlfit.deploy.bundle.schema import first_difference, from_metadata, read_yaml

    session = onnxruntime.InferenceSession(str(cartpole_export / "policy.onnx"), providers=["CPUExecutionProvider"])
    props = session.get_modelmeta().custom_metadata_map
    assert props["env_name"] == "CartpoleBalance" and "deploy.action" in props
    recorded = from_metadata(dict(props), "policy.onnx")
    assert first_difference(recorded.to_dict(), read_yaml(cartpole_export / "deploy.yaml").to_dict()) is None


def test_the_controllers_observation_is_the_cartpole_environments(cartpole_export):
    """Cart-pole's own reset and step over native MuJoCo against the controller, 200 steps (see the G1 test)."""
    import jax
    from mujoco_playground import registry

    from rlfit.deploy.bundle.schema import read_yaml
    from rlfit.deploy.controller.loop import Controller
    from rlfit.deploy.sim2sim.native_env import NativeEnv, NativePhysics

    env = registry.load("CartpoleBalance", config_overrides={"impl": "jax"})
    native = NativeEnv(env, NativePhysics(env.mj_model))
    state = native.reset(jax.random.PRNGKey(0))
    controller = Controller(read_yaml(cartpole_export / "deploy.yaml"), env.mj_model)
    gaps = [controller.reset(np.asarray(state.data.qpos, np.float64), np.asarray(state.data.qvel, np.float64))
            - np.asarray(state.obs)]
    for action in np.random.default_rng(0).uniform(-1, 1, (200, 1)).astype(np.float32):
        state = native.step(state, action)
        gaps.append(controller.apply(action) - np.asarray(state.obs))
    assert np.max(np.abs(gaps)) < 1e-5


BLOCK_JAX = textwrap.dedent("""
    import importlib.abc, json, sys

    class NoJax(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("jax", "jaxlib", "flax", "mujoco_playground"):
                raise ImportError(f"{name} is blocked in this test")
            return None

    sys.meta_path.insert(0, NoJax())
    import mujoco, numpy as np
    from rlfit.deploy.controller.loop import Controller, load_deployment

    bundle, policy = load_deployment(sys.argv[1])
    controller = Controller(bundle, mujoco.MjModel.from_binary_path(sys.argv[2]), policy)
    obs = controller.reset(np.zeros(2), np.zeros(2))
    for _ in range(50):
        action, obs = controller.step(obs)
    assert not any(name.split(".")[0] == "jax" for name in sys.modules)
    print(json.dumps({"obs": obs.tolist(), "action": action.tolist()}))
""")


def test_the_controller_runs_with_jax_unimportable(cartpole_export, tmp_path):
    import mujoco
    from mujoco_playground import registry

    from rlfit.deploy.controller.loop import Controller, load_deployment

    model_file = tmp_path / "cartpole.mjb"
    mujoco.mj_saveModel(registry.load("CartpoleBalance", config_overrides={"impl": "jax"}).mj_model,
                        str(model_file), None)
    script = tmp_path / "robot.py"
    script.write_text(BLOCK_JAX)
    result = subprocess.run([sys.executable, str(script), str(cartpole_export / "policy.onnx"), str(model_file)],
                            capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "src")})
    assert result.returncode == 0, result.stderr[-2000:]
    out = json.loads(result.stdout.splitlines()[-1])
    bundle, policy = load_deployment(cartpole_export / "policy.onnx")  # the same loop here, JAX loaded
    controller = Controller(bundle, mujoco.MjModel.from_binary_path(str(model_file)), policy)
    obs = controller.reset(np.zeros(2), np.zeros(2))
    for _ in range(50):
        action, obs = controller.step(obs)
    np.testing.assert_allclose(out["obs"], obs, rtol=1e-6, atol=1e-6)


def test_sim2sim_with_the_sweep_writes_its_table_and_video_or_says_why_not(cartpole_export, tmp_path):
    result = rlfit_cli("sim2sim", str(cartpole_export), "--max-steps", "10", "--episodes-per-model", "1", "--sweep",
                       "--out", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((tmp_path / "sim2sim.json").read_text())
    labels = [row["margins"] for row in report["conditions"]]
    assert labels[0] == "nominal" and "action_delay=1" in labels and "kp_scale=0.8" in labels and len(labels) == 11
    for row in report["conditions"]:
        episodes = [e for e in report["episodes"] if e["margins"] == row["margins"]]
        assert len(episodes) == 1 and row["return_mean"] == pytest.approx(np.mean([e["episode_return"]
                                                                                   for e in episodes]))
    assert report["interval_unit"].startswith("model")
    table = (tmp_path / "sim2sim.md").read_text()
    assert "| action_delay=2 |" in table and "| tilt_bias=0.05 |" in table
    assert (tmp_path / "sim2sim.mp4").is_file() or report["video_note"].startswith("no video")


def test_sim2sim_margins_change_what_the_robot_does(cartpole_export):
    """An action delay of 2 steps holds the first two commands at the default: the trajectory differs."""
    import mujoco
    from mujoco_playground import registry

    from rlfit.deploy.controller.loop import Controller, load_deployment
    from rlfit.deploy.controller.margins import Margins

    bundle, policy = load_deployment(cartpole_export / "policy.onnx")
    model = registry.load("CartpoleBalance", config_overrides={"impl": "jax"}).mj_model
    delayed = Controller(bundle, model, policy, Margins(action_delay=2))
    plain = Controller(bundle, model, policy)
    obs_d, obs_p = delayed.reset(np.zeros(2), np.zeros(2)), plain.reset(np.zeros(2), np.zeros(2))
    sent = []
    for _ in range(3):
        action, obs_p = plain.step(obs_p)
        sent.append(action)
        obs_d = delayed.apply(action)
        assert not np.shares_memory(obs_d, obs_p)
    np.testing.assert_array_equal(delayed.data.ctrl, delayed.targets(sent[0]))
    assert isinstance(mujoco.MjData(model), mujoco.MjData)


def edit(path: Path, change) -> None:
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


@pytest.mark.parametrize("change, says", [
    (lambda d: d["action"]["kd"].__setitem__(0, 9.0), "disagrees with the metadata of"),
    (lambda d: d.__setitem__("env", "CartpoleSwingup"), "at env"),
])
def test_an_edited_bundle_is_one_line_exit_2_and_nothing_is_written(cartpole_export, tmp_path, capsys, change, says):
    import shutil

    from rlfit.cli import main

    run = tmp_path / "run"
    shutil.copytree(cartpole_export, run)
    for name in ("sim2sim.json", "sim2sim.md", "sim2sim.mp4"):
        (run / name).unlink(missing_ok=True)
    edit(run / "deploy.yaml", change)
    capsys.readouterr()
    code = main(["sim2sim", str(run), "--max-steps", "5"])
    err = capsys.readouterr().err
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1
    assert not (run / "sim2sim.json").exists() and not (run / "sim2sim.mp4").exists()


def test_a_bundle_for_another_environment_or_observation_set_is_refused(cartpole_export, tmp_path):
    """The same edit in both files (deploy.yaml and the metadata agree) still disagrees with the run."""
    from rlfit.deploy.bundle.schema import read_yaml
    from rlfit.deploy.sim2sim.check import check_bundle_matches_run
    from rlfit.deploy.play.session import read_run_config
    from rlfit.errors import UserError
    import dataclasses
    from mujoco_playground import registry

    bundle = read_yaml(cartpole_export / "deploy.yaml")
    config = read_run_config(cartpole_export)
    model = registry.load("CartpoleBalance", config_overrides={"impl": "jax"}).mj_model
    check_bundle_matches_run(bundle, config, model, Path("deploy.yaml"))
    for field, value, says in (("env", "G1JoystickFlatTerrain", "environment 'G1JoystickFlatTerrain'"),
                               ("robot", "g1 scene", "robot 'g1 scene'"),
                               ("observation_set", "robot", "observation set 'robot'")):
        with pytest.raises(UserError, match=says):
            check_bundle_matches_run(dataclasses.replace(bundle, **{field: value}), config, model, Path("deploy.yaml"))


def test_a_model_missing_a_sensor_the_layout_reads_is_refused(cartpole_export):
    import dataclasses

    from mujoco_playground import registry

    from rlfit.deploy.bundle.schema import read_yaml
    from rlfit.deploy.controller.loop import Controller
    from rlfit.errors import UserError

    bundle = read_yaml(cartpole_export / "deploy.yaml")
    layout = [dataclasses.replace(bundle.observation.layout[0], source="sensor", sensor="gyro_pelvis"),
              *bundle.observation.layout[1:]]
    bundle = dataclasses.replace(bundle, observation=dataclasses.replace(bundle.observation, layout=layout))
    model = registry.load("CartpoleBalance", config_overrides={"impl": "jax"}).mj_model
    with pytest.raises(UserError, match="the model has no sensor 'gyro_pelvis'"):
        Controller(bundle, model)
