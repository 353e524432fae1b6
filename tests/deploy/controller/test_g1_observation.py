"""G1: the deployment bundle against the environment itself, and the controller's observation against the
environment's own, step by step, on the nominal and on randomized models; each injected fault must show.

Reference: Playground's G1JoystickFlatTerrain `reset` and `step` code (jitted once each), its physics run by native
MuJoCo (`rlfit.deploy.sim2sim.native_env`, OWN mode: the environment's own control, its own MjData), observation
noise and pushes off. The controller runs its own MjData with the motor commands it computes from the same actions.
No training: the bundle is built from the environment as `rlfit export` builds it. About 60 s on 2 cores, most of it
loading G1 twice and compiling reset and step (6 s each).
"""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]
SHARED_MENAGERIE = (REPO_ROOT / ".." / "shared" / "assets" / "mujoco_menagerie").resolve()
G1 = "G1JoystickFlatTerrain"
STEPS = 200
TOLERANCE = 1e-4
"""Measured on the nominal model (2026-12-06): the largest |controller - environment| over 200 steps was 9.8e-6, in
the clock's sin entry, whose phase the environment accumulates in float32 (the controller in float64); every other
entry differs by less than 1e-6 (float32 evaluation of the same float64 state). A tenth of the smallest fault."""

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (SHARED_MENAGERIE / "unitree_g1" / "assets").is_dir(),
                       reason=f"the offline Menagerie copy is absent ({SHARED_MENAGERIE}); see its README"),
]


def load_g1(overrides: dict):
    from rlfit.config.schema import resolve
    from rlfit.envs import load_env

    os.environ.setdefault("RLFIT_MENAGERIE_PATH", str(SHARED_MENAGERIE))
    config = resolve(G1, "smoke")
    env_config = dataclasses.replace(config.env, impl="jax", overrides=overrides)
    return load_env(env_config, "cpu"), env_config, config


@pytest.fixture(scope="module")
def g1_trained_config():
    """G1 as a run trains it (noise and pushes on) and its bundle."""
    from rlfit.deploy.bundle.build import build_bundle

    env, env_config, _ = load_g1({})
    return env, build_bundle(env, env_config, "state", 103)


@pytest.fixture(scope="module")
def g1_quiet():
    """G1 with observation noise and pushes off, its bundle, the randomized models, and the environment's own reset
    and step over native MuJoCo."""
    import jax

    from rlfit.deploy.bundle.build import build_bundle
    from rlfit.deploy.sim2sim.native_env import NativeEnv, NativePhysics
    from rlfit.deploy.transfer.models import draw_check_models, native_copy, row
    from rlfit.envs.randomization import resolve_randomization

    env, env_config, config = load_g1({"noise_config.level": 0.0, "push_config.enable": False})
    bundle = build_bundle(env, env_config, "state", 103)
    randomization = resolve_randomization(config.env.randomization, G1, env, 2)
    batch = draw_check_models(randomization.function, env.mjx_model, 0, 2)
    models = {"nominal": env.mj_model, **{f"randomized {i}": native_copy(env.mj_model, row(batch, i))
                                          for i in range(2)}}
    physics = NativePhysics(env.mj_model)
    return env, bundle, models, NativeEnv(env, physics), jax


def largest_gaps(env_and_more, model_name: str, fault: str = "") -> np.ndarray:
    """|controller - environment| [STEPS + 1, 103], the observation at reset and after each step, on `model_name`,
    with `fault` injected into the controller."""
    from rlfit.deploy.controller.loop import Controller

    env, bundle, models, native, jax = env_and_more
    model = models[model_name]
    native.physics.use_model(model)
    state = native.reset(jax.random.PRNGKey(3))
    frequency = float(state.info["phase_dt"][0]) / (2 * math.pi * env.dt)
    bundle, frequency = inject(bundle, fault, frequency)
    controller = Controller(bundle, model)
    if fault == "gravity in the world frame":
        controller.gravity = lambda quat: np.array([0.0, 0.0, -1.0])
    qpos, qvel = np.asarray(state.data.qpos, np.float64), np.asarray(state.data.qvel, np.float64)
    gaps = [np.abs(controller.reset(qpos, qvel, np.asarray(state.info["command"]), frequency)
                   - np.asarray(state.obs["state"]))]
    actions = np.random.default_rng(7).uniform(-0.5, 0.5, (STEPS, 29)).astype(np.float32)
    for action in actions:
        state = native.step(state, action)
        gaps.append(np.abs(controller.apply(action) - np.asarray(state.obs["state"])))
    return np.stack(gaps)


def inject(bundle, fault: str, frequency: float):
    """The bundle and clock frequency the controller gets with `fault`."""
    layout = bundle.observation.layout
    if fault == "two joints swapped":  # left hip pitch and left knee, in the observation's joint entries
        def swapped(names):
            names = list(names)
            names[0], names[3] = names[3], names[0]
            return names
        layout = [dataclasses.replace(e, joints=swapped(e.joints)) if e.joints else e for e in layout]
        bundle = dataclasses.replace(bundle, observation=dataclasses.replace(bundle.observation, layout=layout))
    elif fault == "the clock at the wrong rate":  # the deployed frequency where training drew another
        frequency = frequency * 1.1
    elif fault == "the wrong default pose":  # zeros (the model's qpos0) instead of the knees_bent keyframe
        bundle = dataclasses.replace(bundle, action=dataclasses.replace(
            bundle.action, default_pos=[0.0] * len(bundle.action.default_pos)))
    return bundle, frequency


@pytest.mark.parametrize("model_name", ["nominal", "randomized 0", "randomized 1"])
def test_the_controllers_observation_is_the_environments_at_every_step(g1_quiet, model_name):
    gaps = largest_gaps(g1_quiet, model_name)
    assert gaps.shape == (STEPS + 1, 103)
    worst = gaps.max(axis=1)
    assert np.all(worst <= TOLERANCE), f"step {int(np.argmax(worst > TOLERANCE))}: {worst.max():.2e}"


def test_the_randomized_models_differ_from_the_nominal_one(g1_quiet):
    _, _, models, _, _ = g1_quiet
    masses = [np.asarray(m.body_mass) for m in models.values()]
    assert not np.allclose(masses[0], masses[1]) and not np.allclose(masses[1], masses[2])


FAULTS = ["two joints swapped", "gravity in the world frame", "the clock at the wrong rate", "the wrong default pose"]


@pytest.mark.parametrize("fault", FAULTS)
def test_each_injected_fault_breaks_the_equality(g1_quiet, fault):
    gaps = largest_gaps(g1_quiet, "nominal", fault)
    with pytest.raises(AssertionError):
        assert np.all(gaps.max(axis=1) <= TOLERANCE)
    assert gaps.max() > 10 * TOLERANCE


def test_the_gait_clock_in_the_bundle_is_the_one_the_environments_reset_draws(g1_quiet):
    """Start phase and the training frequency range, typed in Playground's reset code, against 64 resets."""
    env, bundle, _, native, jax = g1_quiet
    (clock,) = bundle.clocks
    native.physics.use_model(env.mj_model)
    frequencies = []
    for seed in range(64):
        state = native.reset(jax.random.PRNGKey(seed))
        np.testing.assert_allclose(np.asarray(state.info["phase"]), clock.start_phase, atol=1e-6)
        frequencies.append(float(state.info["phase_dt"][0]) / (2 * math.pi * env.dt))
    low, high = clock.frequency_range_hz
    assert low <= min(frequencies) < low + 0.03 and high - 0.03 < max(frequencies) <= high
    assert clock.increment_per_step_at_deploy == pytest.approx(2 * math.pi * bundle.ctrl_dt * clock.deploy_frequency_hz)


def test_every_field_of_the_g1_bundle_against_the_model(g1_trained_config):
    env, bundle = g1_trained_config
    check_bundle_against_model(env, bundle)
    m, config, action = env.mj_model, env._config, bundle.action
    np.testing.assert_array_equal(action.default_pos, m.keyframe("knees_bent").qpos[7:])
    assert action.default_pose_source == "keyframe knees_bent" and action.scale == config.action_scale
    assert bundle.ctrl_dt == config.ctrl_dt and bundle.sim_dt == config.sim_dt and bundle.substeps == 10
    layout = {e.name: e for e in bundle.observation.layout}
    assert [(e.name, e.start, e.stop) for e in bundle.observation.layout] == [
        ("linvel", 0, 3), ("gyro", 3, 6), ("gravity", 6, 9), ("command", 9, 12), ("joint_pos", 12, 41),
        ("joint_vel", 41, 70), ("last_action", 70, 99), ("gait_phase", 99, 103)]
    for name in ("linvel", "gyro", "gravity", "joint_pos", "joint_vel"):
        assert layout[name].noise.half_width == config.noise_config.level * config.noise_config.scales[name]
    assert layout["linvel"].needs == "state_estimator" and layout["gyro"].needs == "imu"
    pelvis = m.site("imu_in_pelvis").id
    for name in ("gyro", "gravity", "linvel"):
        sensor = m.sensor(layout[name].sensor)
        assert sensor.objid[0] == pelvis
    assert bundle.observation.joint_names == [m.joint(j).name for j in range(1, m.njnt)]
    assert bundle.command.ranges == [list(config.lin_vel_x), list(config.lin_vel_y), list(config.ang_vel_yaw)]
    assert bundle.observation_set == "full" and bundle.env == G1 and bundle.robot == "g1 scene"


def check_bundle_against_model(env, bundle) -> None:
    """Per-joint fields against the compiled model: joint names from the actuators' transmissions, kp against the
    position actuators' gains, kd against the joints' damping, torque limits against actuatorfrcrange."""
    m = env.mj_model
    action = bundle.action
    joints = [int(j) for j in m.actuator_trnid[:, 0]]
    assert action.joint_names == [m.joint(j).name for j in joints]
    assert len(action.kp) == len(action.kd) == len(action.torque_limit) == m.nu
    for a, j in enumerate(joints):
        if action.kind == "position":
            assert action.kp[a] == m.actuator_gainprm[a, 0] == -m.actuator_biasprm[a, 1]
        assert action.kd[a] == pytest.approx(m.dof_damping[m.jnt_dofadr[j]] - m.actuator_biasprm[a, 2])
        assert action.target_range[a] == list(m.actuator_ctrlrange[a])
        if m.jnt_actfrclimited[j]:
            assert action.torque_limit[a] == m.jnt_actfrcrange[j][1] == -m.jnt_actfrcrange[j][0]


def test_the_deployment_docs_g1_tables_are_the_bundles(g1_trained_config):
    """docs/deployment.md's G1 gains table is what `tools/deployment_tables.py` generates from the bundle."""
    from tools.deployment_tables import check_docs

    _, bundle = g1_trained_config
    problems = check_docs(bundle, REPO_ROOT / "docs" / "deployment.md")
    assert not problems, problems


def test_the_robot_observation_set_drops_what_needs_a_state_estimator_and_the_controller_builds_the_rest(g1_quiet):
    """A bundle for observation set `robot` (env.observation_set) has no pelvis linear velocity: its layout is the full
    one without entries 0-2, and the controller's 100 values are the environment's full observation without them."""
    from types import SimpleNamespace

    from rlfit.deploy.bundle.build import build_bundle
    from rlfit.deploy.controller.loop import Controller

    env, full, models, native, jax = g1_quiet
    robot = build_bundle(env, SimpleNamespace(name=G1, action_repeat=1, observation_set="robot"), "state", 100)
    assert robot.observation_set == "robot" and robot.observation.size == 100
    assert [e.name for e in robot.observation.layout] == [e.name for e in full.observation.layout][1:]
    assert all(e.needs != "state_estimator" for e in robot.observation.layout)
    native.physics.use_model(env.mj_model)
    state = native.reset(jax.random.PRNGKey(5))
    controller = Controller(robot, env.mj_model)
    frequency = float(state.info["phase_dt"][0]) / (2 * math.pi * env.dt)
    obs = controller.reset(np.asarray(state.data.qpos, np.float64), np.asarray(state.data.qvel, np.float64),
                           np.asarray(state.info["command"]), frequency)
    for action in np.random.default_rng(1).uniform(-0.5, 0.5, (20, 29)).astype(np.float32):
        np.testing.assert_allclose(obs, np.asarray(state.obs["state"])[3:], atol=TOLERANCE)
        state = native.step(state, action)
        obs = controller.apply(action)
