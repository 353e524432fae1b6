"""The G1 humanoid end to end on CPU with the offline Menagerie copy: smoke training, play, ONNX export.

One training run (the `smoke` preset with `env.observation_set=robot`, driven through the CLI with
RLFIT_MENAGERIE_PATH; tests/g1_smoke.py, whose step tests/planning/test_randomization_memory.py compiles too) is
shared by the tests: the training check of the robot-measurable observation set, and the
play, export and transfer check of such a policy. G1 compiles for minutes on a 2-core CPU, hence `slow` (the full
set's observation is checked against the robot set's in tests/envs/test_observation_set.py).

`export`, `transfer-check` and `sim2sim` run in the test's own process (`cli_in_process`), which has imported JAX,
Playground and rlfit already: measured alone on the run's directory, 7.5 -> 3.9, 10.9 -> 7.0 and 27.4 -> 23.3 CPU s
(2026-12-07). `play` keeps a process of its own: MuJoCo picks its OpenGL backend when it is first imported.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import rlfit

from tests.conftest import cli_in_process
from tests.g1_smoke import G1, NEEDS_MENAGERIE, ROBOT_SET, SHARED_MENAGERIE, rlfit_cli

pytestmark = [pytest.mark.slow, NEEDS_MENAGERIE]


@pytest.fixture(scope="module")
def g1_run(g1_smoke_run) -> Path:
    """`rlfit train G1JoystickFlatTerrain --preset smoke --set env.observation_set=robot` with the offline assets
    (tests/g1_smoke.py: once per test session); the run directory. The commands run in this process load G1 from
    the offline assets too."""
    os.environ.setdefault("RLFIT_MENAGERIE_PATH", str(SHARED_MENAGERIE))
    return g1_smoke_run


def test_smoke_training_completes_and_saves_the_policy(g1_run):
    import json

    import yaml

    summary = json.loads((g1_run / "summary.json").read_text())
    assert summary["env"] == G1 and summary["env_steps"] == 64
    assert yaml.safe_load((g1_run / "config.yaml").read_text())["env"]["observation_set"] == "robot"
    chosen = summary["observation_set"]
    assert (chosen["name"], chosen["policy_key"], chosen["full_size"], chosen["dropped"]) == ("robot", "state", 103,
                                                                                              [0, 1, 2])
    assert chosen["kept"] == list(range(3, 103))
    policy = rlfit.load_policy(g1_run)
    assert policy.observation_shapes == {"state": (100,), "privileged_state": (216,)}  # the critic's unchanged
    assert policy.action_size == 29 and policy.obs_key == "state"
    action = np.asarray(policy(np.zeros((2, 100), np.float32)))
    assert action.shape == (2, 29) and np.all(np.isfinite(action)) and np.all(np.abs(action) <= 1.0)


def test_play_in_native_mujoco_writes_a_video_whose_frames_change(g1_run, tmp_path):
    from tests.deploy.play.support import headless_gl_reason

    reason = headless_gl_reason()
    if reason:
        pytest.skip(reason)
    import imageio.v3 as iio

    out = tmp_path / "g1.mp4"
    result = rlfit_cli("play", str(g1_run), "--seconds", "1", "--command", "0.5,0,0", "--out", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "native MuJoCo" in result.stdout
    frames = iio.imread(out, index=None)
    assert frames.shape[0] == 25  # 1 s at ctrl_dt 0.02, every 2nd control step: 25 fps
    assert np.abs(frames[-1].astype(int) - frames[0]).mean() > 1.0


@pytest.fixture(scope="module")
def g1_onnx(g1_run, tmp_path_factory) -> Path:
    """`rlfit export RUN --format onnx` of the smoke run (once for the module); the ONNX file."""
    pytest.importorskip("onnxruntime", reason="needs the export extra: pip install 'rlfit[export]'")
    workdir = tmp_path_factory.mktemp("g1-onnx")
    out = workdir / "g1.onnx"
    result = cli_in_process(None, "export", str(g1_run), "--format", "onnx", "--out", str(out), cwd=workdir)
    assert result.returncode == 0, result.stderr[-3000:]
    return out


def test_onnx_export_matches_load_policy(g1_run, g1_onnx):
    import onnxruntime

    session = onnxruntime.InferenceSession(str(g1_onnx), providers=["CPUExecutionProvider"])
    assert [(i.name, i.shape) for i in session.get_inputs()] == [("state", ["batch", 100])]
    obs = np.random.default_rng(0).normal(size=(256, 100)).astype(np.float32)
    (actions,) = session.run(["action"], {"state": obs})
    assert np.max(np.abs(actions - np.asarray(rlfit.load_policy(g1_run)(obs)))) <= 1e-4


def test_transfer_check_runs_the_exported_policy_on_randomized_models_with_pushes_and_noise(g1_run, g1_onnx, tmp_path,
                                                                                          capfd):
    """`rlfit transfer-check` on the CPU with a tiny budget: the exported file in native MuJoCo on the nominal model
    and two models of Playground's G1 randomizer, with G1's own pushes and observation noise on, beside the
    run's MJX evaluation; its figures follow from its per-episode records."""
    import json

    result = cli_in_process(capfd, "transfer-check", str(g1_run), "--onnx", str(g1_onnx), "--models", "2",
                            "--episodes-per-model", "1", "--max-steps", "10", "--out", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((tmp_path / "transfer_check.json").read_text())
    assert report["perturbations"] == {"pushes": True, "observation_noise_level": 1.0}
    assert "body_mass" in report["randomization"]["fields"] and report["control_dt"] == pytest.approx(0.02)
    # 10 steps of the run's 1000: the run's MJX evaluation of whole episodes is not compared, and the report says so
    assert set(report["conditions"]) == {"native_nominal", "native_randomized"} and "--max-steps" in report["mjx_left_out"]
    episodes = report["episodes"]
    assert [e["model_index"] for e in episodes if e["condition"] == "randomized"] == [0, 1]
    for name, condition in (("native_nominal", "nominal"), ("native_randomized", "randomized")):
        returns = [e["episode_return"] for e in episodes if e["condition"] == condition]
        assert report["conditions"][name]["return_mean"] == pytest.approx(np.mean(returns))
        assert all(0 < e["length"] <= 10 for e in episodes if e["condition"] == condition)
    assert (tmp_path / "transfer_check.md").is_file()


def test_g1_trains_on_playgrounds_randomized_models_drawn_from_the_seed(g1_run):
    """`env.randomization: auto` (the default) is Playground's G1 randomizer: the run says so, and the models of its
    starting state are exactly what Playground's own `get_domain_randomizer` returns for the keys rlfit documents
    (PPO's environment key from the seed, MODELS_STREAM folded in, split per environment)."""
    import json

    import jax
    from mujoco_playground import registry

    from rlfit.config.schema import resolve
    from rlfit.hardware.jax_setup import configure_jax
    from rlfit.planning.plan import config_sizes, make_plan
    from rlfit.envs.randomization import models_key
    from rlfit.run.trainer import Trainer

    summary = json.loads((g1_run / "summary.json").read_text())
    fields = ["body_mass", "dof_armature", "dof_frictionloss", "pair_friction", "qpos0"]
    assert summary["randomization"]["source"] == f"playground:{G1}" and summary["randomization"]["fields"] == fields
    assert summary["final_eval_reward_randomized"] is not None

    config = resolve(G1, "smoke", None, [ROBOT_SET])  # the run's config: its programs are in the cache
    # as `rlfit train` sets JAX up: the session's compile cache, and the matmul precision that is part of each
    # program's cache key (without it the starting state compiled again here: 18.5 s of 20.5, 2026-12-07)
    configure_jax(config.run.precision)
    trainer = Trainer.build(config, make_plan(config, config_sizes(config), devices=1))
    state = trainer.init_state()  # the run's starting-state program: from the compile cache the run filled
    env_key = jax.random.split(jax.random.PRNGKey(config.run.seed), 3)[2]
    keys = jax.random.split(models_key(env_key), trainer.train_env.num_envs)
    expected, in_axes = registry.get_domain_randomizer(G1)(trainer.env.mjx_model, keys)
    assert sorted(state.env_state.models) == fields
    for field in fields:
        assert getattr(in_axes, field) == 0
        np.testing.assert_array_equal(state.env_state.models[field], getattr(expected, field))


def test_export_writes_the_deployment_bundle_beside_the_model_and_in_its_metadata(g1_onnx):
    """Every field of deploy.yaml is the ONNX file's metadata too, and the per-joint fields are the model's."""
    import onnxruntime

    from rlfit.config.schema import resolve
    from rlfit.deploy.bundle.schema import first_difference, from_metadata, read_yaml
    from rlfit.envs import load_env
    from tests.deploy.controller.test_g1_observation import check_bundle_against_model

    bundle = read_yaml(g1_onnx.with_name("g1.deploy.yaml"))
    props = onnxruntime.InferenceSession(str(g1_onnx), providers=["CPUExecutionProvider"]).get_modelmeta()
    assert first_difference(from_metadata(dict(props.custom_metadata_map), "g1.onnx").to_dict(),
                            bundle.to_dict()) is None
    # the shared smoke run trains on the robot's observation set: 103 entries less the pelvis linear velocity
    assert bundle.env == G1 and bundle.observation_set == "robot" and bundle.observation.size == 100
    assert bundle.clocks[0].name == "gait_phase"
    env = load_env(resolve(G1, "smoke").env, "cpu")
    check_bundle_against_model(env, bundle)


def test_sim2sim_runs_the_controller_on_nominal_and_randomized_models(g1_run, g1_onnx, tmp_path, capfd):
    import json

    result = cli_in_process(capfd, "sim2sim", str(g1_run), "--onnx", str(g1_onnx), "--models", "2",
                            "--episodes-per-model", "1", "--max-steps", "10", "--no-video", "--out", str(tmp_path),
                            cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((tmp_path / "sim2sim.json").read_text())
    assert [(e["condition"], e["model_index"]) for e in report["episodes"]] == [
        ("nominal", -1), ("randomized", 0), ("randomized", 1)]
    assert all(0 < e["length"] <= 10 for e in report["episodes"]) and report["conditions"][0]["models"] == 3
