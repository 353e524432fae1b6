"""`env.observation_set: robot`: the policy's observation without what needs a state estimator, the critic's
unchanged. The derivation on a small model built here (what it must find is known by construction), G1 against its
own full observation and native MuJoCo's pelvis velocity, and every environment where the set makes no sense
refused in one line. G1's smoke training on the set is tests/run/test_g1.py's shared run."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlfit.config.schema import EnvConfig, resolve
from rlfit.envs import load_env
from rlfit.envs.observation_set import derive_robot_set, estimator_sources, observation_set_of
from rlfit.errors import UserError
from tests.conftest import cli_in_process

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_MENAGERIE = (REPO_ROOT / ".." / "shared" / "assets" / "mujoco_menagerie").resolve()
G1 = "G1JoystickFlatTerrain"

FLOATING = """
<mujoco>
  <worldbody>
    <body name="base" pos="0 0 1">
      <freejoint name="root"/>
      <geom type="box" size="0.1 0.1 0.1" mass="1"/>
      <site name="imu" pos="0.05 0 0"/>
      <body name="leg" pos="0 0 -0.2">
        <joint name="knee" type="hinge" axis="0 1 0"/>
        <geom type="capsule" size="0.02 0.1" mass="0.2"/>
        <site name="foot" pos="0 0 -0.1"/>
      </body>
    </body>
  </worldbody>
  <sensor>
    <gyro name="gyro" site="imu"/>
    <velocimeter name="velocity" site="imu"/>
    <accelerometer name="accelerometer" site="imu"/>
    <framepos name="foot_in_world" objtype="site" objname="foot"/>
    <framepos name="foot_in_base" objtype="site" objname="foot" reftype="site" refname="imu"/>
  </sensor>
</mujoco>
"""
"""A floating base with an IMU site and a leg. Sensor values: gyro 0-2, velocity 3-5, accelerometer 6-8, foot
position in the world 9-11, foot position in the base's frame 12-14 (kinematics: measurable). qpos: 7 root + knee;
qvel: 6 root + knee."""


def floating_obs(data, info):
    """Policy entries by construction: [0:3] gyro, [3:6] velocimeter, [6:9] accelerometer, [9] knee angle,
    [10:13] the root's world linear velocity times 2, [13] knee velocity, [14:17] foot in the base (measurable),
    [17:20] foot in the world, [20] the root's height."""
    s = data.sensordata
    state = jnp.concatenate([s[0:3], s[3:6], s[6:9], data.qpos[7:8], 2 * data.qvel[0:3], data.qvel[6:7], s[12:15],
                             s[9:12], data.qpos[2:3]])
    return {"state": state, "privileged_state": jnp.concatenate([state, data.qvel])}


def test_the_derivation_finds_exactly_the_entries_that_need_an_estimator():
    import mujoco
    from mujoco import mjx

    model = mujoco.MjModel.from_xml_string(FLOATING)
    labels = [source.label for source in estimator_sources(model)]
    assert labels == ["sensor velocity (velocimeter)", "sensor foot_in_world (framepos)", "free joint root position",
                      "free joint root linear velocity"]
    found = derive_robot_set(floating_obs, model, mjx.make_data(model), {}, ())
    assert found.full_size == 21
    assert found.dropped == (3, 4, 5, 10, 11, 12, 17, 18, 19, 20)
    assert found.kept == (0, 1, 2, 6, 7, 8, 9, 13, 14, 15, 16)
    assert found.sources[0] == ("sensor velocity (velocimeter)",)
    assert found.sources[3] == ("free joint root linear velocity",)
    assert found.sources[-1] == ("free joint root position",)


class FloatingEnv:
    """The floating model as a Playground-style environment: `mj_model`, `_get_obs(data, info)` (`floating_obs`), and a
    reset that builds its observation through `_get_obs`."""

    def __init__(self, xml: str = FLOATING):
        import mujoco
        from mujoco import mjx

        self.mj_model = mujoco.MjModel.from_xml_string(xml)
        self.mjx_model = mjx.put_model(self.mj_model)

    def _get_obs(self, data, info):
        return floating_obs(data, info)

    def reset(self, rng):
        from mujoco import mjx

        data = mjx.make_data(self.mjx_model)
        data = mjx.forward(self.mjx_model, data.replace(qvel=jax.random.normal(rng, data.qvel.shape)))
        return self._get_obs(data, {})


def test_a_derived_set_is_kept_in_the_program_store_and_read_back_for_the_same_model_only(tmp_path, monkeypatch):
    """With a store key, the set derived by tracing the reset is kept in rlfit's program store; a later load of the
    same environment and model reads it (no derivation) and observes the same entries; another model, or no key,
    derives again."""
    from rlfit.envs import observation_set as module
    from rlfit.hardware import program_store

    monkeypatch.setattr(program_store, "store_dir", lambda: tmp_path)
    derivations, derive = [], module.derive_robot_set
    monkeypatch.setattr(module, "derive_robot_set", lambda *args: derivations.append(1) or derive(*args))
    env = FloatingEnv()
    first = module.apply_observation_set(env, "robot", "Floating", store_key="Floating (jax)")
    chosen = observation_set_of(first)
    assert chosen.dropped == (3, 4, 5, 10, 11, 12, 17, 18, 19, 20) and len(derivations) == 1
    assert len(list(tmp_path.glob("*.value"))) == 1

    again = module.apply_observation_set(FloatingEnv(), "robot", "Floating", store_key="Floating (jax)")
    assert observation_set_of(again) == chosen and len(derivations) == 1
    read_back, derived = jax.jit(lambda key: (again.reset(key)["state"], first.reset(key)["state"]))(
        jax.random.PRNGKey(1))  # one program (MJX's forward run eagerly is hundreds of small ones: 20 s)
    np.testing.assert_array_equal(read_back, derived)
    assert read_back.shape == (len(chosen.kept),)

    heavier = FloatingEnv(FLOATING.replace('mass="1"', 'mass="2"'))
    module.apply_observation_set(heavier, "robot", "Floating", store_key="Floating (jax)")
    assert len(derivations) == 2 and len(list(tmp_path.glob("*.value"))) == 2
    module.apply_observation_set(FloatingEnv(), "robot", "Floating")
    assert len(derivations) == 3


def test_environments_where_the_set_makes_no_sense_are_refused_in_one_line(capfd, tmp_path):
    result = cli_in_process(capfd, "train", "CartpoleBalance", "--preset", "smoke", "--set", "env.observation_set=robot",
                            "--run-dir", str(tmp_path / "run"), cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert ("needs an observation with the policy's entry 'state' and a privileged entry for the critic; "
            "CartpoleBalance's observation is one array: use env.observation_set=full") in result.stderr
    assert not (tmp_path / "run" / "checkpoints").exists()
    with pytest.raises(UserError, match="'gridworld:empty' is a gridworld environment: use env.observation_set=full"):
        load_env(EnvConfig(name="gridworld:empty", observation_set="robot"))
    with pytest.raises(UserError, match="needs a MuJoCo Playground environment .* use env.observation_set=full"):
        load_env(EnvConfig(name="tests.toy_env:make", observation_set="robot"))


@pytest.mark.parametrize("overrides, message", [
    (["env.observation_set=estimated"], "env.observation_set must be one of full, robot, got 'estimated'"),
    (["env.observation_set=robot", "env.observation=pixels"], "with env.observation=pixels the policy sees frames"),
    (["env.observation_set=robot", "ppo.policy_obs_key=privileged_state"],
     "ppo.policy_obs_key is 'privileged_state': set ppo.policy_obs_key=state or env.observation_set=full"),
])
def test_bad_settings_are_refused_before_anything_loads(overrides, message):
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        resolve(G1, "smoke", None, overrides)


needs_g1 = pytest.mark.skipif(not (SHARED_MENAGERIE / "unitree_g1" / "assets").is_dir(),
                              reason=f"the offline Menagerie copy is absent ({SHARED_MENAGERIE}); see its README")


@pytest.fixture(scope="module")
def g1_pair():
    """(full G1, robot G1) without observation noise: the same environment but for the set."""
    config = EnvConfig(name=G1, impl="jax", menagerie_path=str(SHARED_MENAGERIE),
                       overrides={"noise_config.level": 0.0})
    full = load_env(config, "cpu")
    robot = load_env(dataclasses.replace(config, observation_set="robot"), "cpu")
    return full, robot


@pytest.mark.slow
@needs_g1
def test_g1_robot_policy_obs_is_the_full_one_less_the_pelvis_linear_velocity(g1_pair):
    import mujoco

    full, robot = g1_pair
    assert full.observation_size == {"state": (103,), "privileged_state": (216,)}
    assert robot.observation_size == {"state": (100,), "privileged_state": (216,)}
    chosen = observation_set_of(robot)
    assert observation_set_of(full) is None
    assert chosen.dropped == (0, 1, 2) and chosen.sources == (("sensor local_linvel_pelvis (velocimeter)",),) * 3

    @jax.jit
    def both(key):
        a, b = full.reset(key), robot.reset(key)
        return a.obs, b.obs, a.data.qpos, a.data.qvel

    full_obs, robot_obs, qpos, qvel = both(jax.random.PRNGKey(3))
    np.testing.assert_array_equal(robot_obs["state"], full_obs["state"][3:])
    np.testing.assert_array_equal(robot_obs["privileged_state"], full_obs["privileged_state"])
    # What was dropped is the pelvis IMU's linear velocity in its own frame, as native MuJoCo computes it.
    model = full.mj_model
    data = mujoco.MjData(model)
    data.qpos[:], data.qvel[:] = np.asarray(qpos), np.asarray(qvel)
    mujoco.mj_forward(model, data)
    velocity = np.zeros(6)
    mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_SITE, model.site("imu_in_pelvis").id, velocity, 1)
    assert np.linalg.norm(velocity[3:]) > 0.05  # the reset's random root velocity: a value to compare
    np.testing.assert_allclose(full_obs["state"][:3], velocity[3:], rtol=1e-4, atol=1e-5)
