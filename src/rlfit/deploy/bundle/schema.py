"""The deployment bundle's fields, read and written without JAX (numpy and pyyaml only), so that the controller
(`rlfit.deploy.controller`) and a robot-side port can load it.

deploy.yaml (beside policy.onnx) and the ONNX file's `metadata_props` hold the same fields: the YAML file as a
mapping, the ONNX file one JSON string per top-level key (`to_metadata`). `check_same` compares the two and names
the first field where they differ.

Units: angles in rad, angular velocities in rad/s, torques in N·m (force in N for a slider), gains in N·m/rad and
N·m·s/rad, times in s, frequencies in Hz.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from rlfit.errors import UserError

FORMAT = "rlfit-deploy/1"
BUNDLE_FILE = "deploy.yaml"
METADATA_PREFIX = "deploy."
"""ONNX metadata keys of the bundle: 'deploy.<top-level field>' -> JSON."""

# What an observation entry is computed from (`ObsEntry.source`):
SENSOR = "sensor"
"""A MuJoCo sensor's value as it is (`sensor` names it): gyro, velocimeter."""
GRAVITY = "gravity"
"""The unit gravity direction in the frame of an orientation sensor (framequat `sensor`): R^T [0, 0, -1]."""
JOINT_POS = "joint_pos"
"""Joint encoders' positions (`joints`), minus the default pose where `relative`."""
JOINT_VEL = "joint_vel"
BODY_ZZ = "body_zz"
"""Element zz of each body's orientation matrix in the world (`bodies`): cos of a pole's angle from upright."""
BODY_XZ = "body_xz"
"""Element xz: sin of that angle."""
COMMAND = "command"
"""The operator's command (`Bundle.command`)."""
LAST_ACTION = "last_action"
"""The policy's previous output, as the controller keeps it (`Bundle.memory` says when it updates)."""
CLOCK = "clock"
"""cos of every phase of a clock, then sin (`clock` names it in `Bundle.clocks`)."""
SOURCES = (SENSOR, GRAVITY, JOINT_POS, JOINT_VEL, BODY_ZZ, BODY_XZ, COMMAND, LAST_ACTION, CLOCK)

# What a robot needs for an entry (`ObsEntry.needs`):
IMU = "imu"
ENCODERS = "joint_encoders"
STATE_ESTIMATOR = "state_estimator"
"""Not measured on the robot: an estimator (or motion capture) must supply it."""
OPERATOR = "operator"
CONTROLLER = "controller"
"""Kept by the controller itself (the last action, a clock)."""

POSITION = "position"
"""Position actuators: target = default + scale * action, clipped to the target range; the motor's PD makes torque."""
DIRECT = "direct"
"""Motors: ctrl = scale * action, clipped to the target range; torque = gear * ctrl."""


@dataclass(frozen=True)
class Noise:
    """The noise training added to an entry: uniform in [-half_width, half_width], per value."""

    kind: str
    half_width: float


@dataclass(frozen=True)
class ObsEntry:
    """One entry of the policy's observation vector: values [start, stop)."""

    name: str
    start: int
    stop: int
    units: str
    frame: str
    source: str
    """One of SOURCES: how the controller computes it."""
    needs: str
    """IMU, ENCODERS, STATE_ESTIMATOR, OPERATOR or CONTROLLER: what a robot must have for it."""
    sensor: str | None = None
    """The MuJoCo sensor read (SENSOR, GRAVITY)."""
    joints: list[str] | None = None
    """Joint names in the entry's order (JOINT_*); relative entries subtract `Action.default_pos` of each."""
    relative: bool = False
    clock: str | None = None
    noise: Noise | None = None
    bodies: list[str] | None = None
    """Body names (BODY_*), read from the poses MuJoCo computed at the start of the last physics step."""


@dataclass(frozen=True)
class Clock:
    """A periodic signal the observation holds (G1's gait phase), which the controller keeps itself."""

    name: str
    start_phase: list[float]
    """rad, one per phase, at reset."""
    frequency_range_hz: list[float]
    """[low, high]: training drew the frequency f uniformly from it per episode."""
    deploy_frequency_hz: float
    """The f to use when deployed (the middle of the training range)."""
    increment: str
    """How the phase advances per control step (in words): phase += 2 pi ctrl_dt f, wrapped to [-pi, pi)."""
    increment_per_step_at_deploy: float
    """rad per control step at deploy_frequency_hz."""


@dataclass(frozen=True)
class Action:
    """The policy's output and how it becomes the motors' commands (all lists in action order)."""

    joint_names: list[str]
    actuator_names: list[str]
    kind: str
    """POSITION or DIRECT."""
    scale: float
    mapping: str
    """The mapping in words."""
    default_pos: list[float]
    """rad (m for a slider): the default pose, in action order."""
    default_pose_source: str
    target_range: list[list[float]]
    """[[low, high]] per actuator: the model clips its control to it."""
    kp: list[float]
    """Position gain per joint (the actuator's), 0 for motors."""
    kd: list[float]
    """Damping per joint: the joint's own damping plus the actuator's velocity gain (what the PD relies on)."""
    torque_limit: list[float | None]
    """|torque| at most, from the joint's actuatorfrcrange or the actuator's forcerange (None: unlimited)."""
    gear: list[float]


@dataclass(frozen=True)
class Observation:
    """The policy's observation vector."""

    input_name: str
    size: int
    joint_names: list[str]
    """Joints in the order the observation lists them (its joint entries)."""
    layout: list[ObsEntry]


@dataclass(frozen=True)
class Command:
    """The command the policy follows (empty names: none)."""

    names: list[str]
    units: list[str]
    ranges: list[list[float]]
    """[[low, high]] per value, as training drew it."""
    note: str = ""


@dataclass(frozen=True)
class Bundle:
    """Everything deploy.yaml holds (see the module docstring)."""

    format: str
    env: str
    robot: str
    observation_set: str
    versions: dict[str, str]
    ctrl_dt: float
    sim_dt: float
    substeps: int
    """sim_dt steps per control step."""
    action: Action
    observation: Observation
    command: Command
    clocks: list[Clock]
    memory: str
    """When the controller's own state (last action, clocks) updates relative to the observation."""
    fall: dict[str, Any] = field(default_factory=dict)
    """How a fall is detected in simulation: {'sensor': name, 'axis': 2, 'below': 0.0} (empty: none)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def bundle_from_dict(data: Any, where: str) -> Bundle:
    """A Bundle from its mapping (deploy.yaml); a UserError naming `where` for anything malformed."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise UserError(f"{where} is not an rlfit deployment bundle (format {FORMAT}); write it with `rlfit export`")
    try:
        layout = [ObsEntry(**{**e, "noise": Noise(**e["noise"]) if e.get("noise") else None})
                  for e in data["observation"]["layout"]]
        values = {**data, "action": Action(**data["action"]),
                  "observation": Observation(**{**data["observation"], "layout": layout}),
                  "command": Command(**data["command"]), "clocks": [Clock(**c) for c in data["clocks"]]}
        known = {f.name for f in fields(Bundle)}
        return Bundle(**{k: v for k, v in values.items() if k in known})
    except (KeyError, TypeError) as error:
        raise UserError(f"{where} is missing or misnames a field ({error}); write it again with `rlfit export`") \
            from None


def bundle_path(onnx_path: Path) -> Path:
    """Where the bundle of `onnx_path` lives: deploy.yaml beside policy.onnx, else <stem>.deploy.yaml."""
    onnx_path = Path(onnx_path)
    return onnx_path.with_name(BUNDLE_FILE if onnx_path.stem == "policy" else f"{onnx_path.stem}.{BUNDLE_FILE}")


def to_yaml(bundle: Bundle) -> str:
    import yaml

    header = ("# rlfit deployment bundle: generated by `rlfit export` from the run's environment, model and config.\n"
              "# The ONNX file beside it holds the same fields (metadata_props 'deploy.*'); do not edit one alone.\n")
    body: str = yaml.safe_dump(bundle.to_dict(), sort_keys=False, default_flow_style=None, width=120)
    return header + body


def read_yaml(path: Path) -> Bundle:
    """The bundle at `path`; a UserError for a missing or unreadable file."""
    import yaml

    if not Path(path).is_file():
        raise UserError(f"{path} does not exist; `rlfit export RUN_DIR` writes it beside the ONNX file")
    try:
        data = yaml.safe_load(Path(path).read_text())
    except yaml.YAMLError as error:
        raise UserError(f"{path} is not valid YAML ({str(error).splitlines()[0]}); export again") from None
    return bundle_from_dict(data, str(path))


def to_metadata(bundle: Bundle) -> dict[str, str]:
    """The bundle as ONNX metadata_props: 'deploy.<field>' -> JSON of that field."""
    return {METADATA_PREFIX + key: json.dumps(value, sort_keys=True) for key, value in bundle.to_dict().items()}


def from_metadata(props: dict[str, str], where: str) -> Bundle | None:
    """The bundle recorded in ONNX metadata_props; None when the file holds none (exported before bundles)."""
    data = {key[len(METADATA_PREFIX):]: json.loads(value) for key, value in props.items()
            if key.startswith(METADATA_PREFIX)}
    return bundle_from_dict(data, f"{where}'s metadata") if data else None


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """The path of the first value where `a` and `b` (nested dicts, lists, numbers) differ; None when equal.
    Numbers compare within 1e-9 relative (YAML and JSON both keep a float's digits)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(a) + [k for k in b if k not in a]:
            found = first_difference(a.get(key), b.get(key), f"{path}.{key}" if path else str(key))
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path} (length {len(a)} vs {len(b)})"
        for index, (x, y) in enumerate(zip(a, b)):
            found = first_difference(x, y, f"{path}[{index}]")
            if found:
                return found
        return None
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and not isinstance(b, bool):
        return None if math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) else f"{path} ({a!r} vs {b!r})"
    return None if a == b else f"{path} ({a!r} vs {b!r})"


def check_same(yaml_bundle: Bundle, onnx_bundle: Bundle, yaml_path: Path, onnx_path: Path) -> None:
    """A UserError naming the first field where deploy.yaml and the ONNX file's metadata disagree."""
    where = first_difference(yaml_bundle.to_dict(), onnx_bundle.to_dict())
    if where:
        raise UserError(f"{yaml_path} disagrees with the metadata of {onnx_path} at {where}: one of them was edited "
                        "or they come from different exports; export again with `rlfit export RUN_DIR`")
