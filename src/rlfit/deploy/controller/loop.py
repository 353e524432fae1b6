"""The controller: a bundle, a MuJoCo model standing in for the robot, and an ONNX policy (see the package docstring).

One control step (`step`), as on the robot, every ctrl_dt:

    reading = sensors()                         encoders (q, dq), IMU (gyro, orientation), others by name
    obs     = observation(reading, memory)      the bundle's layout, entry by entry
    action  = policy(obs)                       onnxruntime
    send(targets(action), kp, kd)               target = default_pos + scale * action, clipped to its range
    the motors' PD for `substeps` steps of sim_dt (here MuJoCo's position actuators and joint damping, with the
    gains the controller sent)
    memory: last action <- action, every clock advances (after the observation, as in training)

`Controller.reset` starts it from a given state; `observe` and `apply` are the two halves of a step for a caller
that chooses the actions itself (the observation test).
"""

from __future__ import annotations

import collections
import copy
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from rlfit.deploy.bundle import schema as s
from rlfit.deploy.controller.margins import Margins
from rlfit.errors import UserError


class Reading(NamedTuple):
    """What the robot's sensors report at one instant."""

    q: np.ndarray
    """[njoints] joint positions of the observation's joints (rad, m), in `Controller.joints` order."""
    dq: np.ndarray
    sensors: dict[str, np.ndarray]
    """Named sensor values (gyro [3] rad/s, framequat [4] w, x, y, z, ...)."""


class Controller:
    """The robot-side loop on a native MuJoCo model (see the module docstring)."""

    def __init__(self, bundle: s.Bundle, model: Any, policy: Callable[[np.ndarray], np.ndarray] | None = None,
                 margins: Margins = Margins(), clock_frequency_hz: float | None = None):
        import mujoco

        self.bundle, self.policy, self.margins = bundle, policy, margins
        self.model = copy.deepcopy(model)  # the motors' gains and limits are written into the controller's copy
        self.data = mujoco.MjData(self.model)
        check_model(bundle, self.model)
        self.joints = sorted({j for e in bundle.observation.layout for j in e.joints or []},
                             key=lambda name: int(self.model.joint(name).id))
        self.qpos_adr = np.array([self.model.jnt_qposadr[self.model.joint(j).id] for j in self.joints], int)
        self.dof_adr = np.array([self.model.jnt_dofadr[self.model.joint(j).id] for j in self.joints], int)
        self.default = dict(zip(bundle.action.joint_names, bundle.action.default_pos))
        self.frequency = {c.name: (clock_frequency_hz or c.deploy_frequency_hz) for c in bundle.clocks}
        self.repeat = max(1, int(round(bundle.ctrl_dt / (bundle.substeps * bundle.sim_dt))))
        send_gains(self.model, bundle, margins)
        self.command = np.zeros(len(bundle.command.names), np.float32)
        self.last_action = np.zeros(len(bundle.action.joint_names), np.float32)
        self.phase = {c.name: np.asarray(c.start_phase, np.float64) for c in bundle.clocks}
        self.readings: collections.deque[Reading] = collections.deque()
        self.actions: collections.deque[np.ndarray] = collections.deque()

    # -- the loop ---------------------------------------------------------------------------------------------
    def reset(self, qpos: np.ndarray, qvel: np.ndarray, command: np.ndarray | None = None,
              clock_frequency_hz: float | None = None) -> np.ndarray:
        """Puts the robot at (qpos [nq], qvel [nv]), clears the memory; the first observation [obs_size]."""
        import mujoco

        mujoco.mj_resetData(self.model, self.data)
        self.data.qpos[:], self.data.qvel[:] = qpos, qvel
        mujoco.mj_forward(self.model, self.data)
        if command is not None:
            self.command = np.asarray(command, np.float32).reshape(self.command.shape)
        if clock_frequency_hz is not None:
            self.frequency = dict.fromkeys(self.frequency, clock_frequency_hz)
        self.last_action[:] = 0
        self.phase = {c.name: np.asarray(c.start_phase, np.float64) for c in self.bundle.clocks}
        self.readings.clear()
        self.actions.clear()
        return self.observe()

    def step(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One control step from observation `obs`: (the policy's action [nu], the next observation)."""
        if self.policy is None:
            raise ValueError("this controller has no policy; call apply(action) instead")
        action = np.asarray(self.policy(obs), np.float32).reshape(self.last_action.shape)
        return action, self.apply(action)

    def apply(self, action: np.ndarray) -> np.ndarray:
        """Sends `action`'s motor commands (after the action delay), runs the motors for one control step, observes,
        then updates the memory; the observation [obs_size]."""
        import mujoco

        action = np.asarray(action, np.float32)
        self.actions.append(action)
        delay = self.margins.action_delay
        sent = self.actions[0] if len(self.actions) > delay else np.zeros_like(action)
        if len(self.actions) > delay:
            self.actions.popleft()
        self.data.ctrl[:] = self.targets(sent)
        for _ in range(self.bundle.substeps * self.repeat):
            mujoco.mj_step(self.model, self.data)
        obs = self.observe()
        self.last_action = action
        for clock in self.bundle.clocks:
            advanced = self.phase[clock.name] + 2 * math.pi * self.bundle.ctrl_dt * self.frequency[clock.name]
            self.phase[clock.name] = np.fmod(advanced + math.pi, 2 * math.pi) - math.pi
        return obs

    def targets(self, action: np.ndarray) -> np.ndarray:
        """The motors' commands [nu] for `action` [nu]: computed in float32 as training computed them, then clipped
        to the target range (as the model clips its control)."""
        spec = self.bundle.action
        scaled = np.float32(spec.scale) * np.asarray(action, np.float32)
        base = np.asarray(spec.default_pos, np.float32) if spec.kind == s.POSITION else np.float32(0)
        low, high = np.asarray(spec.target_range, np.float64).T
        return np.clip((base + scaled).astype(np.float64), low, high)

    # -- sensors and the observation --------------------------------------------------------------------------
    def sensors(self) -> Reading:
        """The encoders and the named sensors now (with the margins' IMU bias)."""
        import mujoco

        values = {}
        for entry in self.bundle.observation.layout:
            if entry.sensor:
                sensor = self.model.sensor(entry.sensor)
                value = np.array(self.data.sensordata[sensor.adr[0]:sensor.adr[0] + sensor.dim[0]], np.float64)
                if self.model.sensor_type[sensor.id] == mujoco.mjtSensor.mjSENS_GYRO:
                    value = value + self.margins.gyro_bias
                if entry.source == s.GRAVITY and self.margins.tilt_bias:
                    value = tilted(value, self.margins.tilt_bias)
                values[entry.sensor] = value
            if entry.bodies:  # a body's orientation, as MuJoCo computed it before the last physics step
                element = 8 if entry.source == s.BODY_ZZ else 2
                values[entry.name] = np.array([self.data.xmat[self.model.body(b).id][element] for b in entry.bodies])
        return Reading(self.data.qpos[self.qpos_adr].copy(), self.data.qvel[self.dof_adr].copy(), values)

    def observe(self) -> np.ndarray:
        """The observation [obs_size] float32 from the sensors (as delayed by the margins) and the memory."""
        self.readings.append(self.sensors())
        reading = self.readings[0]
        if len(self.readings) > self.margins.observation_delay:
            self.readings.popleft()
        parts = [self.entry(entry, reading) for entry in self.bundle.observation.layout]
        return np.concatenate(parts).astype(np.float32) if parts else np.zeros(0, np.float32)

    def entry(self, entry: s.ObsEntry, reading: Reading) -> np.ndarray:
        """One entry's values [stop - start]."""
        if entry.source == s.SENSOR:
            return reading.sensors[str(entry.sensor)]
        if entry.source == s.GRAVITY:
            return self.gravity(reading.sensors[str(entry.sensor)])
        if entry.source == s.COMMAND:
            return self.command.astype(np.float64)
        if entry.source == s.LAST_ACTION:
            return self.last_action.astype(np.float64)
        if entry.source == s.CLOCK:
            phase = self.phase[str(entry.clock)]
            return np.concatenate([np.cos(phase), np.sin(phase)])
        if entry.source in (s.BODY_ZZ, s.BODY_XZ):
            return reading.sensors[entry.name]
        index = [self.joints.index(j) for j in entry.joints or []]
        if entry.source == s.JOINT_VEL:
            return reading.dq[index]
        q = reading.q[index]
        return q - np.array([self.default[j] for j in entry.joints or []]) if entry.relative else q

    @staticmethod
    def gravity(quat: np.ndarray) -> np.ndarray:
        """The unit gravity direction [3] in the frame whose orientation is `quat` [4] (w, x, y, z): R^T [0, 0, -1]."""
        import mujoco

        matrix = np.zeros(9)
        mujoco.mju_quat2Mat(matrix, np.asarray(quat, np.float64))
        down: np.ndarray = -matrix.reshape(3, 3)[2]
        return down

    def fallen(self) -> bool:
        """The bundle's fall test on the current state (False when it has none)."""
        fall = self.bundle.fall
        if not fall:
            return False
        sensor = self.model.sensor(fall["sensor"])
        return bool(self.data.sensordata[sensor.adr[0] + int(fall["axis"])] < float(fall["below"]))


def tilted(quat: np.ndarray, roll: float) -> np.ndarray:
    """`quat` (w, x, y, z) followed by a rotation of `roll` rad about the body's x axis."""
    import mujoco

    out = np.zeros(4)
    mujoco.mju_mulQuat(out, np.asarray(quat, np.float64), np.array([math.cos(roll / 2), math.sin(roll / 2), 0, 0]))
    return out


def check_model(bundle: s.Bundle, model: Any) -> None:
    """A UserError when `model` lacks a joint, actuator or sensor the bundle names, or orders its actuators
    otherwise."""
    names = [model.actuator(a).name for a in range(model.nu)]
    if names != bundle.action.actuator_names:
        raise UserError(f"the model's actuators ({len(names)}) are not the bundle's {len(bundle.action.actuator_names)} "
                        "in the bundle's order: the bundle is for another robot; export the run of this robot")
    joints = [model.joint(int(j)).name for j in model.actuator_trnid[:, 0]]
    if joints != bundle.action.joint_names:
        raise UserError("the model's actuators drive other joints than the bundle's joint_names; the bundle is for "
                        "another robot")
    for entry in bundle.observation.layout:
        for name in [entry.sensor] if entry.sensor else []:
            if not _has(model.sensor, name):
                raise UserError(f"the model has no sensor '{name}', which observation entry '{entry.name}' reads; "
                                "add it to the model (or use the robot the bundle was exported for)")
        for name in entry.bodies or []:
            if not _has(model.body, name):
                raise UserError(f"the model has no body '{name}' (observation entry '{entry.name}'); the bundle is "
                                "for another robot")
        for name in entry.joints or []:
            if not _has(model.joint, name):
                raise UserError(f"the model has no joint '{name}' (observation entry '{entry.name}'); the bundle is "
                                "for another robot")
    if bundle.fall and not _has(model.sensor, bundle.fall["sensor"]):
        raise UserError(f"the model has no sensor '{bundle.fall['sensor']}', which the bundle's fall test reads")


def _has(lookup: Callable[[str], Any], name: str) -> bool:
    try:
        lookup(name)
    except KeyError:
        return False
    return True


def send_gains(model: Any, bundle: s.Bundle, margins: Margins) -> None:
    """Writes the gains and limits the controller commands into the model's motors: kp into the position
    actuators, kd into the joints' damping, the torque limits into the joints' actuator force range (each scaled
    by the margins)."""
    spec = bundle.action
    for actuator in range(model.nu):
        joint = int(model.actuator_trnid[actuator, 0])
        if spec.kind == s.POSITION:
            kp = spec.kp[actuator] * margins.kp_scale
            model.actuator_gainprm[actuator, 0], model.actuator_biasprm[actuator, 1] = kp, -kp
            model.actuator_biasprm[actuator, 2] = 0.0
        model.dof_damping[model.jnt_dofadr[joint]] = spec.kd[actuator] * margins.kd_scale
        limit = spec.torque_limit[actuator]
        if limit is not None and margins.torque_limit_scale != 1.0:
            model.jnt_actfrclimited[joint] = 1
            model.jnt_actfrcrange[joint] = (-limit * margins.torque_limit_scale, limit * margins.torque_limit_scale)


@dataclass(frozen=True)
class OnnxPolicy:
    """An exported policy: one observation [obs_size] -> action [nu] float32."""

    session: Any
    input_name: str

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        (action,) = self.session.run(["action"], {self.input_name: np.asarray(obs, np.float32)[None]})
        return np.asarray(action[0], np.float32)


def load_deployment(onnx_path: Path, bundle_file: Path | None = None) -> tuple[s.Bundle, OnnxPolicy]:
    """The bundle and the policy of an export: deploy.yaml beside the ONNX file (or `bundle_file`), checked against
    the bundle in the file's metadata and against its input and output sizes. UserError for any disagreement."""
    try:
        import onnxruntime
    except ImportError:
        raise UserError("the controller runs the exported policy with onnxruntime: pip install 'rlfit[export]'") \
            from None

    onnx_path = Path(onnx_path)
    yaml_path = Path(bundle_file) if bundle_file is not None else s.bundle_path(onnx_path)
    bundle = s.read_yaml(yaml_path)
    try:
        session = onnxruntime.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    except Exception as error:  # noqa: BLE001 - onnxruntime's own exception types
        raise UserError(f"{onnx_path} is not an ONNX model onnxruntime can load ({str(error).splitlines()[0]}); "
                        "export it again with `rlfit export RUN_DIR`") from None
    recorded = s.from_metadata(dict(session.get_modelmeta().custom_metadata_map), str(onnx_path))
    if recorded is None:
        raise UserError(f"{onnx_path} holds no deployment bundle in its metadata; export it again with "
                        "`rlfit export RUN_DIR`")
    s.check_same(bundle, recorded, yaml_path, onnx_path)
    inputs = session.get_inputs()
    if [(i.name, i.shape[-1]) for i in inputs] != [(bundle.observation.input_name, bundle.observation.size)]:
        raise UserError(f"{onnx_path} takes {[(i.name, i.shape) for i in inputs]}, but its bundle describes "
                        f"'{bundle.observation.input_name}' [{bundle.observation.size}]; export again")
    return bundle, OnnxPolicy(session, bundle.observation.input_name)
