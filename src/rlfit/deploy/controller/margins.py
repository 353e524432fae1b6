"""What a robot has and training may not have seen: delays, other gains and limits, a biased IMU."""

from __future__ import annotations

from dataclasses import dataclass, fields

from rlfit.errors import UserError


@dataclass(frozen=True)
class Margins:
    """Departures from the bundle the controller applies (all off by default)."""

    action_delay: int = 0
    """Control steps between the policy's output and the motors receiving it."""
    observation_delay: int = 0
    """Control steps between the sensors' reading and the policy seeing it (encoders and IMU alike)."""
    kp_scale: float = 1.0
    """The motors' position gain, times the bundle's kp."""
    kd_scale: float = 1.0
    """The motors' damping, times the bundle's kd."""
    torque_limit_scale: float = 1.0
    """The motors' torque limits, times the bundle's."""
    gyro_bias: float = 0.0
    """rad/s added to every axis of every gyro reading."""
    tilt_bias: float = 0.0
    """rad: the orientation sensor reads the body rolled by this much (a constant attitude error)."""

    def __post_init__(self) -> None:
        for name in ("action_delay", "observation_delay"):
            if int(getattr(self, name)) < 0:
                raise UserError(f"{name} must be at least 0 control steps, got {getattr(self, name)}")
        for name in ("kp_scale", "kd_scale", "torque_limit_scale"):
            if not float(getattr(self, name)) > 0:
                raise UserError(f"{name} must be positive, got {getattr(self, name)}")

    def label(self) -> str:
        """'nominal', or the fields that differ from the defaults, e.g. 'action_delay=1, kp_scale=0.8'."""
        changed = [f"{f.name}={getattr(self, f.name):g}" for f in fields(self) if getattr(self, f.name) != f.default]
        return ", ".join(changed) or "nominal"
