"""Observation sets: what the policy may observe (`env.observation_set`).

`full` is the environment's own observation. `robot` keeps only what a robot measures: it drops from the POLICY's
observation every entry that needs a state estimator, while the critic keeps the privileged state. It takes a
Playground environment whose observation is a dict with the policy's entry `state` and a privileged entry for the
critic (`privileged_state`), as Playground's locomotion environments have.

Which entries need an estimator is derived from the environment's own observation code, not typed by hand: the
Jacobian of its `_get_obs(data, info, ...)['state']` with respect to the quantities a robot does not measure (its
inputs built at their traced shapes, random values; noise draws do not depend on them). Those quantities are:

- the values of the model's sensors of types `velocimeter`, `framelinvel`, `subtreelinvel` (linear velocities),
  `subtreecom` and `framepos` in the world frame (positions in the world), which on a robot come from a state
  estimator, not from an IMU or joint encoders;
- a free joint's position (`qpos[0:3]`) and linear velocity (`qvel[0:3]`, the world frame).

An entry whose derivative with respect to any of them is not zero is dropped. For G1JoystickFlatTerrain those are
entries 0-2 (the pelvis linear velocity, read from the velocimeter `local_linvel_pelvis`): its `robot` policy
observes 100 entries (gyro, gravity, command, joint angles, joint velocities, last action, gait phase), the critic
all 216 of `privileged_state`.

The set is applied by a subclass of the environment's class whose `_get_obs` slices `state` (reset and step both
build their observation through `_get_obs`), so every copy of the environment (a randomized model's, the pixels'
wrapper) keeps it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rlfit.errors import UserError

SETS = ("full", "robot")
"""`env.observation_set` values."""
POLICY_KEY = "state"
"""The observation entry the policy sees (Playground's convention; `ppo.policy_obs_key` and the others' default)."""
ESTIMATED_SENSORS = ("VELOCIMETER", "FRAMELINVEL", "SUBTREELINVEL", "SUBTREECOM")
"""MuJoCo sensor types (`mujoco.mjtSensor.mjSENS_<type>`) whose values a robot gets from a state estimator."""
WORLD_POSITION_SENSORS = ("FRAMEPOS",)
"""Sensor types that need an estimator when measured in the world frame (no reference object)."""


class ObservationSet(NamedTuple):
    """What `env.observation_set` selected for one environment."""

    name: str
    """`full` or `robot`."""
    policy_key: str
    """The observation entry it slices (`state`)."""
    full_size: int
    """Entries of the environment's own policy observation."""
    dropped: tuple[int, ...]
    """Indices into the full policy observation that are dropped (needing an estimator), ascending."""
    sources: tuple[tuple[str, ...], ...]
    """For each dropped entry, what it depends on that a robot does not measure (e.g. `sensor local_linvel_pelvis
    (velocimeter)`)."""

    @property
    def kept(self) -> tuple[int, ...]:
        """Indices into the full policy observation that the policy sees, ascending."""
        return tuple(i for i in range(self.full_size) if i not in set(self.dropped))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready record (summary.json, the deployment bundle)."""
        return {"name": self.name, "policy_key": self.policy_key, "full_size": self.full_size,
                "dropped": list(self.dropped), "kept": list(self.kept),
                "dropped_because": [list(s) for s in self.sources]}


class Source(NamedTuple):
    """One quantity a robot does not measure: where it is in mjx.Data and what to call it."""

    field: str
    """`sensordata`, `qpos` or `qvel`."""
    indices: tuple[int, ...]
    label: str


def estimator_sources(mj_model: Any) -> list[Source]:
    """The quantities of `mj_model` that need a state estimator (see the module docstring)."""
    import mujoco

    types = {int(getattr(mujoco.mjtSensor, f"mjSENS_{name}")): name.lower() for name in ESTIMATED_SENSORS}
    world = {int(getattr(mujoco.mjtSensor, f"mjSENS_{name}")): name.lower() for name in WORLD_POSITION_SENSORS}
    sources = []
    for i in range(mj_model.nsensor):
        kind = int(mj_model.sensor_type[i])
        if kind in types or (kind in world and int(mj_model.sensor_refid[i]) < 0):
            adr, dim = int(mj_model.sensor_adr[i]), int(mj_model.sensor_dim[i])
            name = mujoco.mj_id2name(mj_model, mujoco.mjtObj.mjOBJ_SENSOR, i) or f"#{i}"
            sources.append(Source("sensordata", tuple(range(adr, adr + dim)),
                                  f"sensor {name} ({types.get(kind) or world[kind]})"))
    for j in range(mj_model.njnt):
        if int(mj_model.jnt_type[j]) == int(mujoco.mjtJoint.mjJNT_FREE):
            name = mujoco.mj_id2name(mj_model, mujoco.mjtObj.mjOBJ_JOINT, j) or f"#{j}"
            qpos, qvel = int(mj_model.jnt_qposadr[j]), int(mj_model.jnt_dofadr[j])
            sources.append(Source("qpos", tuple(range(qpos, qpos + 3)), f"free joint {name} position"))
            sources.append(Source("qvel", tuple(range(qvel, qvel + 3)), f"free joint {name} linear velocity"))
    return sources


def derive_robot_set(get_obs: Callable[..., Any], mj_model: Any, data: Any, info: Mapping[str, Any],
                     extras: tuple[Any, ...]) -> ObservationSet:
    """The `robot` set of an environment whose observation `get_obs(data, info, *extras)` builds, from its Jacobian
    with respect to `estimator_sources(mj_model)`. `data`, `info`, `extras` may be tracers or shape structs: only
    their shapes and dtypes are read (the Jacobian is taken at random values). Runs eagerly, also inside a trace."""
    inputs = _concrete((data, dict(info), tuple(extras)))

    def policy_obs(sensordata: jax.Array, qpos: jax.Array, qvel: jax.Array, inputs: Any) -> jax.Array:
        """[n] the policy's observation at `inputs` with these sensor values and positions, velocities."""
        data, info, extras = inputs
        return jnp.ravel(get_obs(data.replace(sensordata=sensordata, qpos=qpos, qvel=qvel), info, *extras)[POLICY_KEY])

    data = inputs[0]
    with jax.ensure_compile_time_eval():  # computed now, also inside the trace of the environment's reset
        jacobians = jax.jit(jax.jacfwd(policy_obs, argnums=(0, 1, 2)))(data.sensordata, data.qpos, data.qvel, inputs)
    by_field = dict(zip(("sensordata", "qpos", "qvel"), (np.asarray(j) for j in jacobians), strict=True))
    full_size = int(by_field["qpos"].shape[0])
    depends = {source.label: np.any(by_field[source.field][:, list(source.indices)] != 0, axis=1)
               for source in estimator_sources(mj_model)}
    dropped = [i for i in range(full_size) if any(mask[i] for mask in depends.values())]
    sources = tuple(tuple(label for label, mask in depends.items() if mask[i]) for i in dropped)
    return ObservationSet("robot", POLICY_KEY, full_size, tuple(dropped), sources)


def _concrete(tree: Any) -> Any:
    """Concrete arrays in the shapes and dtypes of `tree`'s leaves (numpy, so nothing compiles): floats drawn from
    N(0, 1) (so that no derivative vanishes at a special point), integers and booleans zero (a uint32 key: key 0)."""
    leaves, treedef = jax.tree.flatten(tree)
    rng = np.random.default_rng(0)
    made = []
    for leaf in leaves:
        dtype = np.dtype(getattr(leaf, "dtype", None) or np.asarray(leaf).dtype)  # a leaf may be a Python number
        made.append(rng.standard_normal(np.shape(leaf)).astype(dtype) if np.issubdtype(dtype, np.floating)
                    else np.zeros(np.shape(leaf), dtype))
    return jax.tree.unflatten(treedef, made)


def check_observation(obs: Any, env_name: str) -> None:
    """UserError unless `obs` (the environment's unbatched observation) has the policy's entry and one for the
    critic."""
    if not isinstance(obs, Mapping) or POLICY_KEY not in obs or len(obs) < 2:
        what = (f"entries {', '.join(map(str, obs))}" if isinstance(obs, Mapping) else "one array")
        raise UserError(f"env.observation_set=robot needs an observation with the policy's entry '{POLICY_KEY}' and a "
                        f"privileged entry for the critic; {env_name}'s observation is {what}: use "
                        "env.observation_set=full")


def robot_class(base: type, env_name: str) -> type:
    """A subclass of Playground environment class `base` whose `_get_obs` keeps the `robot` set of entries of the
    policy's observation (derived at its first call, kept on the class as `rlfit_observation_set`)."""
    original: Callable[..., Any] = base._get_obs  # type: ignore[attr-defined]  # a Playground environment's

    def _get_obs(self: Any, data: Any, info: Any, *extras: Any) -> Any:
        obs = original(self, data, info, *extras)
        chosen = type(self).rlfit_observation_set
        if chosen is None:
            check_observation(obs, env_name)
            chosen = derive_robot_set(lambda *a: original(self, *a), self.mj_model, data, info, extras)
            if not chosen.dropped:
                raise UserError(f"env.observation_set=robot: no entry of {env_name}'s policy observation needs a state "
                                "estimator (none depends on a linear velocity or a position in the world): use "
                                "env.observation_set=full")
            type(self).rlfit_observation_set = chosen
        return {**obs, POLICY_KEY: jnp.take(obs[POLICY_KEY], jnp.asarray(chosen.kept), axis=-1)}

    return type(f"Robot{base.__name__}", (base,), {"_get_obs": _get_obs, "rlfit_observation_set": None,
                                                   "__module__": __name__})


def apply_observation_set(env: Any, name: str, env_name: str, store_key: str | None = None) -> Any:
    """`env` for `env.observation_set` `name`: itself for `full`; for `robot`, a copy of it whose policy observation
    drops what needs a state estimator (derived here: the reset is traced, not compiled, and only the small program
    of the observation's Jacobian compiles). With `store_key` (what the environment's code depends on besides the
    installed packages: its name and settings), the derived set is kept in rlfit's program store beside the model's
    digest, and a later process reads it instead of tracing the reset (G1's trace is most of its loading time).
    UserError where the set makes no sense for the environment."""
    if name == "full":
        return env
    if not callable(getattr(type(env), "_get_obs", None)) or not hasattr(env, "mj_model"):
        raise UserError(f"env.observation_set=robot needs a MuJoCo Playground environment (its _get_obs builds the "
                        f"observation); '{env_name}' is not one: use env.observation_set=full")
    robot = copy.copy(env)
    robot.__class__ = robot_class(type(env), env_name)

    def derive() -> ObservationSet:
        jax.eval_shape(robot.reset, jax.random.PRNGKey(0))
        return type(robot).rlfit_observation_set

    if store_key is None:
        derive()
    else:
        from rlfit.envs.fingerprint import model_digest
        from rlfit.hardware.program_store import kept_value

        key = f"observation set {name} of {store_key}, model {model_digest(env)}"
        type(robot).rlfit_observation_set = kept_value(key, derive)
    return robot


def observation_set_of(env: Any) -> ObservationSet | None:
    """The `robot` set `env` (or the environment a wrapper of it holds, as `env`) applies; None for `full`."""
    while env is not None:
        found = getattr(type(env), "rlfit_observation_set", None)
        if found is not None:
            return found
        env = env.__dict__.get("env") if hasattr(env, "__dict__") else None
    return None
