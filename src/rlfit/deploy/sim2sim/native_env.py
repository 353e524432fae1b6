"""The environment's own reset and step code, with MJX's physics replaced by native MuJoCo (nothing of MJX's
physics compiles: `mjx_env.step` and `mjx.forward` become `jax.pure_callback`s).

Two ways to supply the physics:

    OWN     the environment's step integrates its own native `MjData` with the control its code computes
            (`n_substeps` mj_step calls), as `rlfit play` does; between calls the float64 state is kept when the
            environment hands back the float32 copy unchanged (no pushes), so the trajectory is native MuJoCo's
            to the last bit. This is the reference of the observation test.
    FOLLOW  the environment's step reads the state of another `MjData` (the controller's), integrated by someone
            else; the environment's code then computes its reward, termination and bookkeeping on that trajectory.
            This scores `rlfit sim2sim`'s episodes.

What the environment's code reads from its `mjx.Data` after physics, every field in `FIELDS`, comes from native
MuJoCo: qpos, qvel (after the last substep), and the quantities `mj_step` computed before integrating it (sensors,
poses, accelerations, actuator forces), which is where `mjx.step` leaves them too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

OWN = "own"
FOLLOW = "follow"
FIELDS = ("qpos", "qvel", "qacc", "act", "time", "sensordata", "xpos", "xquat", "xmat", "site_xpos", "site_xmat",
          "actuator_force")
"""The mjx.Data fields native MuJoCo supplies."""


class NativePhysics:
    """Native MuJoCo behind the environment's physics calls (see the module docstring)."""

    def __init__(self, model: Any, mode: str = OWN, follow: Any = None):
        import mujoco

        self.model, self.mode = model, mode
        self.data = mujoco.MjData(model)
        self.follow = follow
        """The MjData to read in FOLLOW mode (the controller's); set before each step."""
        self.calls = 0

    def use_model(self, model: Any) -> None:
        """Simulates `model` (the same sizes, e.g. a randomized copy) from now on, in fresh data; the compiled reset
        and step keep working, as they call back into this object."""
        import mujoco

        self.model, self.data = model, mujoco.MjData(model)

    def shapes(self) -> list[jax.ShapeDtypeStruct]:
        m = self.model
        sizes = {"qpos": (m.nq,), "qvel": (m.nv,), "qacc": (m.nv,), "act": (m.na,), "time": (),
                 "sensordata": (m.nsensordata,), "xpos": (m.nbody, 3), "xquat": (m.nbody, 4),
                 "xmat": (m.nbody, 3, 3), "site_xpos": (m.nsite, 3), "site_xmat": (m.nsite, 3, 3),
                 "actuator_force": (m.nu,)}
        return [jax.ShapeDtypeStruct(sizes[name], jnp.float32) for name in FIELDS]

    def fields_of(self, data: Any) -> tuple[np.ndarray, ...]:
        m = self.model
        shapes = {"xmat": (m.nbody, 3, 3), "site_xmat": (m.nsite, 3, 3)}
        return tuple(np.asarray(getattr(data, name), np.float32).reshape(shapes.get(name, np.shape(getattr(data, name))))
                     for name in FIELDS)

    def set_state(self, qpos: np.ndarray, qvel: np.ndarray, act: np.ndarray, time: np.ndarray) -> None:
        """The environment's float32 state, unless it is the float32 copy of the state held (then kept)."""
        d = self.data
        same = (np.array_equal(np.float32(d.qpos), qpos) and np.array_equal(np.float32(d.qvel), qvel))
        if not same:
            d.qpos[:], d.qvel[:] = qpos, qvel
            if self.model.na:
                d.act[:] = act
            d.time = float(time)

    def forward(self, qpos: np.ndarray, qvel: np.ndarray, act: np.ndarray, ctrl: np.ndarray, time: np.ndarray
                ) -> tuple[np.ndarray, ...]:
        import mujoco

        self.set_state(qpos, qvel, act, time)
        self.data.ctrl[:] = ctrl
        mujoco.mj_forward(self.model, self.data)
        return self.fields_of(self.data)

    def step(self, qpos: np.ndarray, qvel: np.ndarray, act: np.ndarray, ctrl: np.ndarray, time: np.ndarray,
             xfrc: np.ndarray, n_substeps: int) -> tuple[np.ndarray, ...]:
        import mujoco

        if self.mode == FOLLOW:
            return self.fields_of(self.follow)
        self.set_state(qpos, qvel, act, time)
        self.data.ctrl[:], self.data.xfrc_applied[:] = ctrl, xfrc
        for _ in range(n_substeps):
            mujoco.mj_step(self.model, self.data)
        return self.fields_of(self.data)


def replaced_forward(physics: NativePhysics) -> Any:
    """A drop-in for `mjx.forward(model, data)`."""
    def forward(model: Any, data: Any) -> Any:
        out = jax.pure_callback(physics.forward, physics.shapes(), data.qpos, data.qvel, data.act, data.ctrl,
                                data.time)
        return data.replace(**dict(zip(FIELDS, out)))

    return forward


def replaced_step(physics: NativePhysics) -> Any:
    """A drop-in for `mjx_env.step(model, data, action, n_substeps)`."""
    def step(model: Any, data: Any, action: jax.Array, n_substeps: int = 1) -> Any:
        physics.calls += 1

        def run(qpos: np.ndarray, qvel: np.ndarray, act: np.ndarray, ctrl: np.ndarray, time: np.ndarray,
                xfrc: np.ndarray) -> tuple[np.ndarray, ...]:
            return physics.step(qpos, qvel, act, ctrl, time, xfrc, int(n_substeps))

        out = jax.pure_callback(run, physics.shapes(), data.qpos, data.qvel, data.act, action, data.time,
                                data.xfrc_applied)
        return data.replace(ctrl=action, **dict(zip(FIELDS, out)))

    return step


@contextlib.contextmanager
def native_physics(physics: NativePhysics) -> Iterator[None]:
    """Within the block, Playground environments step and forward through `physics`."""
    from mujoco import mjx
    from mujoco_playground._src import mjx_env

    saved = mjx_env.step, mjx.forward
    mjx_env.step, mjx.forward = replaced_step(physics), replaced_forward(physics)
    try:
        yield
    finally:
        mjx_env.step, mjx.forward = saved


class NativeEnv:
    """The environment's reset and step, each traced and compiled once, over `physics`."""

    def __init__(self, env: Any, physics: NativePhysics):
        from rlfit.deploy.play.session import strong_types

        self.env, self.physics = env, physics
        with native_physics(physics):
            self._reset = jax.jit(lambda rng: strong_types(env.reset(rng)))
            self._step = jax.jit(lambda state, action: strong_types(env.step(state, action)))
            self.state_type: Any = None

    def reset(self, key: jax.Array) -> Any:
        with native_physics(self.physics):
            return self._reset(key)

    def step(self, state: Any, action: np.ndarray) -> Any:
        with native_physics(self.physics):
            return self._step(state, jnp.asarray(action, jnp.float32))
