"""The bundle of a run, read from its environment (the object, its compiled MuJoCo model and its config) and the
run's config; nothing in it is typed by hand (see `rlfit.deploy.bundle.recipes` for what each entry is).

    per joint, in action order:  the actuator's joint; kp = gainprm[0] of a position actuator; kd = the joint's
                                 damping + the actuator's velocity gain (-biasprm[2]); torque limit = the joint's
                                 actuatorfrcrange, else the actuator's forcerange (times its gear), else none;
                                 target range = ctrlrange
    timing:                      sim_dt = the model's timestep, ctrl_dt = env.dt * env.action_repeat
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from rlfit.deploy.bundle import schema as s
from rlfit.deploy.bundle.recipes import FULL, Recipe, layout_of, recipe_for
from rlfit.errors import UserError


def observation_set_of(env_config: Any) -> str:
    """The run's observation set (`env.observation_set`; 'full' for configs from before the key existed)."""
    return str(getattr(env_config, "observation_set", FULL) or FULL)


def build_bundle(env: Any, env_config: Any, input_name: str, obs_size: int) -> s.Bundle | None:
    """The bundle of `env` as the run configured it (`env_config`), for a policy reading observation entry
    `input_name` of `obs_size` values; None when rlfit has no recipe for the environment. A UserError when the
    environment's observation is not the size its recipe gives."""
    model = getattr(env, "mj_model", None)
    if model is None:
        return None
    ctrl_dt = float(env.dt) * int(env_config.action_repeat)
    recipe = recipe_for(env, ctrl_dt)
    if recipe is None:
        return None
    observation_set = observation_set_of(env_config)
    layout = layout_of(recipe, observation_set)
    size = layout[-1].stop if layout else 0
    if size != obs_size:
        raise UserError(f"{env_config.name}'s observation '{input_name}' has {obs_size} values, but its layout for "
                        f"observation set '{observation_set}' has {size}; rlfit cannot describe it to a robot")
    return s.Bundle(s.FORMAT, env_config.name, model_name(model), observation_set, versions(),
                    ctrl_dt, float(model.opt.timestep), int(round(float(env.dt) / float(model.opt.timestep))),
                    action_of(model, recipe), s.Observation(input_name, obs_size, observation_joints(layout), layout),
                    recipe.command, recipe.clocks, recipe.memory, recipe.fall)


def model_name(model: Any) -> str:
    """The compiled model's name (its MJCF `model` attribute)."""
    return bytes(model.names).split(b"\0", 1)[0].decode()


def versions() -> dict[str, str]:
    from rlfit.versions import package_versions

    found = package_versions()
    return {name: found[name] for name in ("rlfit", "playground", "mujoco")}


def observation_joints(layout: list[s.ObsEntry]) -> list[str]:
    """The joints the observation's joint entries list, in their first order."""
    names: list[str] = []
    for entry in layout:
        names += [name for name in entry.joints or [] if name not in names]
    return names


def action_of(model: Any, recipe: Recipe) -> s.Action:
    """Per-actuator fields in action (actuator) order, from the compiled model."""
    joints = [int(j) for j in model.actuator_trnid[:, 0]]
    kp = [float(g) if recipe.kind == s.POSITION else 0.0 for g in model.actuator_gainprm[:, 0]]
    dofs = [int(model.jnt_dofadr[j]) for j in joints]
    kd = [float(model.dof_damping[d]) - float(model.actuator_biasprm[a, 2]) * (recipe.kind == s.POSITION)
          for a, d in enumerate(dofs)]
    gear = [float(g) for g in model.actuator_gear[:, 0]]
    if recipe.kind == s.POSITION:
        mapping = (f"target = default_pos + {recipe.scale:g} * action, clipped to target_range; the motor's PD "
                   "makes torque = kp (target - q) - kd dq, clipped to torque_limit")
    else:
        mapping = f"ctrl = {recipe.scale:g} * action, clipped to target_range; torque = gear * ctrl"
    return s.Action([model.joint(j).name for j in joints], [model.actuator(a).name for a in range(model.nu)],
                    recipe.kind, recipe.scale, mapping, [float(v) for v in recipe.default_pos],
                    recipe.default_pose_source, [[float(lo), float(hi)] for lo, hi in model.actuator_ctrlrange],
                    kp, kd, torque_limits(model, joints), gear)


def torque_limits(model: Any, joints: list[int]) -> list[float | None]:
    """|torque| at most per actuator: the joint's actuatorfrcrange, else forcerange, else gear * ctrlrange for a
    motor whose control is limited, else None."""
    limits: list[float | None] = []
    for actuator, joint in enumerate(joints):
        if model.jnt_actfrclimited[joint]:
            limits.append(float(np.max(np.abs(model.jnt_actfrcrange[joint]))))
        elif model.actuator_forcelimited[actuator]:
            limits.append(float(np.max(np.abs(model.actuator_forcerange[actuator]))))
        elif model.actuator_ctrllimited[actuator] and model.actuator_biastype[actuator] == 0:
            limits.append(float(abs(model.actuator_gear[actuator, 0]) *
                                np.max(np.abs(model.actuator_ctrlrange[actuator]))))
        else:
            limits.append(None)
    return limits


def bundle_of_run(run_dir: Path, input_name: str, obs_size: int) -> tuple[s.Bundle | None, str]:
    """(bundle, why not) of the run in `run_dir`: loads its environment (MJX on the CPU, nothing compiled). Only the
    config's `env` section is read, so a run of an algorithm not registered here exports too."""
    import dataclasses

    from rlfit.config.schema import from_layers, read_yaml
    from rlfit.envs import load_env

    env_config = from_layers([{"env": read_yaml(Path(run_dir) / "config.yaml").get("env") or {}}]).env
    env = load_env(dataclasses.replace(env_config, impl="jax"), "cpu")
    bundle = build_bundle(env, env_config, input_name, obs_size)
    if bundle is None and getattr(env, "mj_model", None) is None:
        return None, f"{env_config.name} has no MuJoCo model"
    if bundle is None:
        return None, (f"rlfit has no observation layout for {env_config.name} (it has one for G1Joystick* and "
                      "Cartpole*)")
    return bundle, ""
