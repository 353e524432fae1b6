"""What each entry of an environment's observation is, for the environments rlfit can describe to a robot.

A recipe reads the environment object (its MuJoCo model, config and attributes; no JAX program runs) and lists the
entries of the full observation in order, with the command and the clocks they use. `layout_of` drops the entries
an observation set leaves out (`robot`: everything that needs a state estimator), and the bundle's builder checks
the sizes against the observation the environment actually returns.

Recipes: Playground's G1 joystick (G1JoystickFlatTerrain, G1JoystickRoughTerrain) and DM Control's cart-pole
(CartpoleBalance, CartpoleSwingup and their sparse variants).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from rlfit.deploy.bundle import schema as s

G1_JOYSTICK = "mujoco_playground._src.locomotion.g1.joystick.Joystick"
CARTPOLE = "mujoco_playground._src.dm_control_suite.cartpole.Balance"
G1_GAIT_FREQUENCY_HZ = (1.25, 1.5)
"""Playground 0.2.0's G1 reset draws the gait frequency from U(1.25, 1.5) in its code, not its config; the
observation test checks this range against the environment's own resets."""
G1_GAIT_START = (0.0, math.pi)
"""G1's reset starts the phases of the left and right foot at 0 and pi (checked the same way)."""
FULL = "full"
ROBOT = "robot"
DROPPED_BY = {ROBOT: (s.STATE_ESTIMATOR,)}
"""Observation sets and what a policy trained on them does not see."""


def entry(name: str, size: int, *details: Any, **named: Any) -> s.ObsEntry:
    """An observation entry of `size` values before its position is known (placed at 0; `layout_of` places it):
    `details` and `named` are `s.ObsEntry`'s fields after `stop` (units, frame, source, needs, sensor, ...)."""
    return s.ObsEntry(name, 0, size, *details, **named)


class Recipe(NamedTuple):
    """An environment's full observation, its command, clocks, action mapping and fall test."""

    entries: list[s.ObsEntry]
    """The full observation's entries in order, each placed at 0 (`entry`)."""
    command: s.Command
    clocks: list[s.Clock]
    kind: str
    """s.POSITION or s.DIRECT."""
    scale: float
    default_pos: np.ndarray
    """[nu] in action order."""
    default_pose_source: str
    fall: dict[str, Any]
    memory: str


def class_path(cls: type) -> str:
    return f"{cls.__module__}.{cls.__name__}"


def known_class(env: Any) -> str | None:
    """The class path of `env`'s class, or of the nearest base class, that has a recipe (a subclass of Playground's
    G1 joystick reads as one)."""
    return next((class_path(cls) for cls in type(env).__mro__ if class_path(cls) in RECIPES), None)


def base_env(env: Any) -> Any:
    """The environment under rlfit's or Brax's wrappers (`env`, `_env`), the object a recipe reads."""
    seen = 0
    while known_class(env) is None and seen < 8:
        inner = getattr(env, "env", None) or getattr(env, "_env", None)
        if inner is None:
            break
        env, seen = inner, seen + 1
    return env


def recipe_for(env: Any, ctrl_dt: float) -> Recipe | None:
    """The recipe of `env` (or of the environment it wraps); None when rlfit has none."""
    base = base_env(env)
    known = known_class(base)
    return RECIPES[known](base, ctrl_dt) if known else None


def layout_of(recipe: Recipe, observation_set: str) -> list[s.ObsEntry]:
    """The entries of `observation_set`, in order, with their slices."""
    dropped = DROPPED_BY.get(observation_set, ())
    layout, start = [], 0
    for item in recipe.entries:
        if item.needs in dropped:
            continue
        size = item.stop - item.start
        layout.append(dataclasses.replace(item, start=start, stop=start + size))
        start += size
    return layout


def joint_names(model: Any, first: int = 0) -> list[str]:
    """Names of the model's joints from index `first`, in the model's (qpos) order."""
    return [model.joint(j).name for j in range(first, model.njnt)]


def site_sensor(model: Any, kind: int, site: int) -> str:
    """The name of the model's sensor of type `kind` on site `site` (the one the environment reads)."""
    import mujoco

    for index in range(model.nsensor):
        if (model.sensor_type[index] == kind and model.sensor_objtype[index] == mujoco.mjtObj.mjOBJ_SITE
                and model.sensor_objid[index] == site):
            name: str = model.sensor(index).name
            return name
    return ""


def keyframe_named(model: Any, joint_qpos: np.ndarray, offset: int) -> tuple[str, np.ndarray]:
    """('keyframe <name>', its qpos[offset:] in float64) for the keyframe whose joints are `joint_qpos` (the
    environment's float32 copy), else ("the environment's default pose", `joint_qpos`)."""
    for key in range(model.nkey):
        if np.allclose(model.key_qpos[key][offset:], joint_qpos, atol=1e-6):
            return f"keyframe {model.key(key).name}", np.asarray(model.key_qpos[key][offset:], np.float64)
    return "the environment's default pose", np.asarray(joint_qpos, np.float64)


def _noise(config: Any, name: str) -> s.Noise | None:
    noise = getattr(config, "noise_config", None)
    if noise is None:
        return None
    return s.Noise("uniform", float(noise.level) * float(noise.scales[name]))


def g1_joystick(env: Any, ctrl_dt: float) -> Recipe:
    """Playground's G1 joystick observation `state` (joystick.py `_get_obs`)."""
    import mujoco

    from mujoco_playground._src.locomotion.g1 import g1_constants as consts

    model, config = env.mj_model, env._config
    pelvis_site = int(env._pelvis_imu_site_id)
    imu_frame = f"pelvis IMU (site {model.site(pelvis_site).name})"
    joints = joint_names(model, 1)
    nu = model.nu
    sensor = mujoco.mjtSensor
    entries = [
        entry("linvel", 3, "m/s", imu_frame, s.SENSOR, s.STATE_ESTIMATOR, f"{consts.LOCAL_LINVEL_SENSOR}_pelvis",
              noise=_noise(config, "linvel")),
        entry("gyro", 3, "rad/s", imu_frame, s.SENSOR, s.IMU, site_sensor(model, sensor.mjSENS_GYRO, pelvis_site),
              noise=_noise(config, "gyro")),
        entry("gravity", 3, "unit vector ([0, 0, -1] upright)", imu_frame, s.GRAVITY, s.IMU,
              site_sensor(model, sensor.mjSENS_FRAMEQUAT, pelvis_site), noise=_noise(config, "gravity")),
        entry("command", 3, "m/s, m/s, rad/s", "the robot's heading", s.COMMAND, s.OPERATOR),
        entry("joint_pos", len(joints), "rad, minus the default pose", "joint", s.JOINT_POS, s.ENCODERS,
              joints=joints, relative=True, noise=_noise(config, "joint_pos")),
        entry("joint_vel", len(joints), "rad/s", "joint", s.JOINT_VEL, s.ENCODERS, joints=joints,
              noise=_noise(config, "joint_vel")),
        entry("last_action", nu, "the policy's output, in [-1, 1]", "action order", s.LAST_ACTION, s.CONTROLLER),
        entry("gait_phase", 4, "cos of the left and right phase, then sin", "-", s.CLOCK, s.CONTROLLER,
              clock="gait_phase"),
    ]
    ranges = [list(map(float, config.lin_vel_x)), list(map(float, config.lin_vel_y)),
              list(map(float, config.ang_vel_yaw))]
    command = s.Command(["vx", "vy", "wz"], ["m/s", "m/s", "rad/s"], ranges,
                        "training drew each value uniformly in its range, all three zero with probability 0.1, "
                        "anew every 500 control steps")
    low, high = G1_GAIT_FREQUENCY_HZ
    deploy = (low + high) / 2
    clock = s.Clock("gait_phase", list(G1_GAIT_START), [low, high], deploy,
                    "phase += 2 pi ctrl_dt f per control step, wrapped to [-pi, pi)", 2 * math.pi * ctrl_dt * deploy)
    source, default = keyframe_named(model, np.asarray(env._default_pose, np.float64), 7)
    fall = {"sensor": f"{consts.GRAVITY_SENSOR}_torso", "axis": 2, "below": 0.0,
            "note": "the environment also ends an episode when a foot touches the other foot or shin"}
    return Recipe(entries, command, [clock], s.POSITION, float(config.action_scale), default, source, fall,
                  MEMORY_AFTER_OBSERVING)


MEMORY_AFTER_OBSERVING = ("the observation after control step k holds the action of step k-1 and the clock before "
                          "its step-k advance (the environment updates both after observing); at reset the last "
                          "action is zeros and the clock its start phase")


def cartpole(env: Any, ctrl_dt: float) -> Recipe:
    """DM Control's cart-pole observation (cartpole.py `_get_obs`): cart position, cos and sin of each pole's
    angle, every velocity. The pole's angle comes from its body pose (`xmat[2:]`), which MuJoCo (and MJX) computed
    before the last physics step: one sim_dt older than the cart position and the velocities."""
    model = env.mj_model
    joints = joint_names(model)
    slider = joints[0]
    poles = [model.body(b).name for b in range(2, model.nbody)]
    entries = [entry("cart_position", 1, "m", "world x", s.JOINT_POS, s.ENCODERS, joints=[slider]),
               entry("pole_cos", len(poles), "-", "pole orientation in the world, before the last physics step",
                     s.BODY_ZZ, s.IMU, bodies=poles),
               entry("pole_sin", len(poles), "-", "pole orientation in the world, before the last physics step",
                     s.BODY_XZ, s.IMU, bodies=poles),
               entry("velocities", len(joints), "m/s, rad/s", "joint", s.JOINT_VEL, s.ENCODERS, joints=joints)]
    default = np.asarray(model.qpos0[model.jnt_qposadr[model.actuator_trnid[:, 0]]], np.float64)
    return Recipe(entries, s.Command([], [], []), [], s.DIRECT, 1.0, default,
                  "model qpos0 (a direct mapping does not use it)", {}, MEMORY_AFTER_OBSERVING)


RECIPES: dict[str, Callable[[Any, float], Recipe]] = {G1_JOYSTICK: g1_joystick, CARTPOLE: cartpole}
