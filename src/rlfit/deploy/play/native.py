"""The environment's own step, with its physics run by native MuJoCo (the C simulator) instead of MJX.

Every Playground environment advances its physics through one module function,
`mujoco_playground._src.mjx_env.step(mjx_model, data, ctrl, n_substeps)`, and computes its observation,
reward, termination and bookkeeping around it. `compile_native_step` traces the environment's `step` with that
function replaced by `native_physics_step`, which

    1. hands qpos, qvel, act, ctrl, mocap and applied forces to native MuJoCo through `jax.pure_callback`,
       where `mujoco.mj_step` runs `n_substeps` times on the environment's `mj_model`;
    2. rebuilds the MJX Data the way `mjx.step` leaves it: `mjx.forward` at the state before the last
       substep (sensors, contacts, body poses; what observations read), then the native integration's
       final qpos, qvel, act and time.

So the observation pipeline, the action -> ctrl mapping, rewards and terminations are the environment's own
code, unchanged, while the trajectory is the one native MuJoCo integrates.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from rlfit.errors import UserError

NATIVE_FIELDS = ("qpos", "qvel", "act", "time")
"""The state native MuJoCo hands back, once before the last substep and once after it."""


@dataclass
class NativeSimulator:
    """Native MuJoCo on the environment's model: state in, `n_substeps` of `mj_step`, states out."""

    model: Any
    """mujoco.MjModel of the environment (its `mj_model`, timestep = sim_dt)."""
    data: Any = None
    """mujoco.MjData the simulation runs in (keeps the solver's warm start between calls)."""
    calls: int = field(default=0)
    """How often the environment's step called the physics while being traced (0: not through mjx_env.step)."""

    def __post_init__(self) -> None:
        import mujoco

        if self.data is None:
            self.data = mujoco.MjData(self.model)

    def use_model(self, model: Any) -> None:
        """Simulates `model` (a mujoco.MjModel of the same sizes, e.g. a randomized copy) from now on, in fresh data;
        a step traced before keeps working, as it reads the simulator's model at each call."""
        import mujoco

        self.model, self.data = model, mujoco.MjData(model)

    def simulate(self, qpos, qvel, act, ctrl, mocap_pos, mocap_quat, xfrc_applied, time, n_substeps: int):
        """Runs `n_substeps` native steps from the given state; returns (qpos, qvel, act, time) before the last
        substep, then after it, as float32 arrays: [nq], [nv], [na], [] twice."""
        import mujoco

        data = self.data
        data.qpos[:], data.qvel[:], data.ctrl[:] = qpos, qvel, ctrl
        if self.model.na:
            data.act[:] = act
        if self.model.nmocap:
            data.mocap_pos[:], data.mocap_quat[:] = mocap_pos, mocap_quat
        data.xfrc_applied[:] = xfrc_applied
        data.time = float(time)
        before = self._snapshot()
        for _ in range(n_substeps):
            before = self._snapshot()
            mujoco.mj_step(self.model, data)
        return before + self._snapshot()

    def _snapshot(self) -> tuple[np.ndarray, ...]:
        d = self.data
        return (d.qpos.astype(np.float32), d.qvel.astype(np.float32), d.act.astype(np.float32),
                np.asarray(d.time, np.float32))


def native_physics_step(simulator: NativeSimulator) -> Callable[..., Any]:
    """A drop-in for `mjx_env.step(model, data, ctrl, n_substeps)` whose integration is native MuJoCo."""
    from mujoco import mjx

    def step(model: Any, data: Any, action: jax.Array, n_substeps: int = 1) -> Any:
        simulator.calls += 1
        m = simulator.model
        shapes = [jax.ShapeDtypeStruct(shape, jnp.float32) for shape in ((m.nq,), (m.nv,), (m.na,), ())] * 2

        def callback(*arrays):
            return simulator.simulate(*arrays, n_substeps=int(n_substeps))

        out = jax.pure_callback(callback, shapes, data.qpos, data.qvel, data.act, action, data.mocap_pos,
                                data.mocap_quat, data.xfrc_applied, data.time)
        before, after = dict(zip(NATIVE_FIELDS, out[:4])), dict(zip(NATIVE_FIELDS, out[4:]))
        data = mjx.forward(model, data.replace(ctrl=action, **before))
        return data.replace(**after)

    return step


@contextlib.contextmanager
def physics_replaced(step: Callable[..., Any]) -> Iterator[None]:
    """Within the block, Playground environments advance their physics with `step`."""
    from mujoco_playground._src import mjx_env

    original = mjx_env.step
    mjx_env.step = step
    try:
        yield
    finally:
        mjx_env.step = original


def check_physics_replaced(simulator: NativeSimulator, env_name: str) -> None:
    """A UserError when tracing the environment's step never reached `mjx_env.step` (physics not replaceable)."""
    if simulator.calls == 0:
        raise UserError(f"{env_name} does not step its physics through mujoco_playground's mjx_env.step, so rlfit "
                        "cannot run it in native MuJoCo; derive it from Playground's MjxEnv and call mjx_env.step")


def native_model(env: Any, env_name: str) -> Any:
    """The environment's native `mujoco.MjModel`; a UserError for environments without one."""
    model = getattr(env, "mj_model", None)
    import mujoco

    if not isinstance(model, mujoco.MjModel):
        raise UserError(f"{env_name} has no MuJoCo model (an `mj_model` attribute), so it cannot run in native "
                        "MuJoCo; `rlfit play` needs a Playground-style MuJoCo environment")
    return model
