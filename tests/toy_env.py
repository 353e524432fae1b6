"""A tiny environment with Playground's API, for fast tests: move a point on a line to a target.

obs = [position, target] in [-1, 1]; action in [-1, 1] moves the point by 0.2 * action;
reward = 1 - |position - target| each step; terminal when the point leaves [-2, 2].
With `nan_after_steps` > 0 the reward turns NaN from that step of an episode on (to test the NaN guard).
"""

from __future__ import annotations

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp


@flax.struct.dataclass
class ToyState:
    data: Any
    obs: jax.Array
    reward: jax.Array
    done: jax.Array
    metrics: dict
    info: dict


class PointReach:
    action_size = 1
    observation_size = 2

    def __init__(self, speed: float = 0.2, nan_after_steps: int = 0):
        self.speed = speed
        self.nan_after_steps = nan_after_steps

    def reset(self, rng: jax.Array) -> ToyState:
        position, target = jax.random.uniform(rng, (2,), minval=-1.0, maxval=1.0)
        obs = jnp.stack([position, target])
        return ToyState(obs, obs, jnp.zeros(()), jnp.zeros(()), {}, {"steps": jnp.zeros((), jnp.int32)})

    def step(self, state: ToyState, action: jax.Array) -> ToyState:
        position = state.obs[0] + self.speed * jnp.clip(action[0], -1.0, 1.0)
        target = state.obs[1]
        obs = jnp.stack([position, target])
        reward = 1.0 - jnp.abs(position - target)
        done = (jnp.abs(position) > 2.0).astype(jnp.float32)
        steps = state.info["steps"] + 1
        if self.nan_after_steps > 0:
            reward = jnp.where(steps >= self.nan_after_steps, jnp.nan, reward)
        return state.replace(data=obs, obs=obs, reward=reward, done=done, info={"steps": steps})


def make(**overrides: Any) -> PointReach:
    """Factory for `--env tests.toy_env:make`."""
    return PointReach(**overrides)


class PointChoice(PointReach):
    """PointReach with three discrete actions: 0 moves left, 1 stays, 2 moves right (by `speed`)."""

    num_actions = 3

    def step(self, state: ToyState, action: jax.Array) -> ToyState:
        direction = jnp.asarray(action, jnp.float32).reshape(()) - 1.0
        return super().step(state, direction[None])


def make_discrete(**overrides: Any) -> PointChoice:
    """Factory for `--env tests.toy_env:make_discrete`."""
    return PointChoice(**overrides)


STEPS_TAKEN = {"count": 0}
"""Steps of single environments that `CountingPointReach` took in this process (every copy, every program)."""


class CountingPointReach(PointReach):
    """PointReach that counts each step of each environment on the host (a callback: slow, for small runs)."""

    def step(self, state: ToyState, action: jax.Array) -> ToyState:
        jax.debug.callback(lambda _: STEPS_TAKEN.__setitem__("count", STEPS_TAKEN["count"] + 1), action)
        return super().step(state, action)


def make_counting(**overrides: Any) -> CountingPointReach:
    """Factory for `--env tests.toy_env:make_counting`."""
    return CountingPointReach(**overrides)


class SlowPointReach(PointReach):
    """PointReach whose every step of every environment sleeps `delay_s` on the host (a callback): iterations that
    take seconds with tiny sizes, to test what happens during a long iteration."""

    def __init__(self, delay_s: float = 0.15, **overrides: Any):
        super().__init__(**overrides)
        self.delay_s = delay_s

    def step(self, state: ToyState, action: jax.Array) -> ToyState:
        import time

        jax.debug.callback(lambda _: time.sleep(self.delay_s), action)
        return super().step(state, action)


def make_slow(**overrides: Any) -> SlowPointReach:
    """Factory for `--env tests.toy_env:make_slow`."""
    return SlowPointReach(**overrides)


WEIGHTED_POINT_XML = """
<mujoco>
  <statistic center="0 0 0" extent="2"/>
  <worldbody>
    <body name="point">
      <joint name="slide" type="slide" axis="1 0 0" damping="1"/>
      <geom type="sphere" size="0.3" mass="1"/>
    </body>
  </worldbody>
</mujoco>
"""
"""One body (mass 1) on a slide joint (damping 1): body_mass [2] (the world's, 0, and the point's), dof_damping [1];
its sphere is the one geom a camera draws, seen whole from MuJoCo's free view of [-2, 2]."""


@flax.struct.dataclass
class PointPose:
    """What a camera (`rlfit.envs.camera.render`) reads of MJX's data: the sphere's world position and rotation."""

    geom_xpos: jax.Array
    """[1, 3]: (position, 0, 0)."""
    geom_xmat: jax.Array
    """[1, 9]: the identity."""


def pose(position: jax.Array) -> PointPose:
    return PointPose(jnp.stack([position, 0.0, 0.0])[None], jnp.eye(3).reshape(1, 9))


class WeightedPointReach(PointReach):
    """PointReach with a MuJoCo model, for domain randomization (`env.randomization`) and pixel observations
    (`env.observation=pixels`) at the toy's compile cost: the action is divided by `mass * damping` before PointReach's
    step (which clips it to [-1, 1] and moves by `speed` times it), the point's body mass and its joint's damping read
    from `mjx_model` (1 and 1 on the nominal model: PointReach's moves), so a randomizer that scales them
    (`tests.envs.randomizers`) gives each environment its own dynamics. No physics is simulated: the model's fields
    alone enter the step, and the state's `data` is the sphere's pose (`PointPose`), which the JAX camera draws."""

    def __init__(self, **overrides: Any):
        import mujoco
        from mujoco import mjx

        super().__init__(**overrides)
        self._mj_model = mujoco.MjModel.from_xml_string(WEIGHTED_POINT_XML)
        self._mjx_model = mjx.put_model(self._mj_model)

    @property
    def mj_model(self) -> Any:
        return self._mj_model

    @property
    def mjx_model(self) -> Any:
        return self._mjx_model

    def reset(self, rng: jax.Array) -> ToyState:
        state = super().reset(rng)
        return state.replace(data=pose(state.obs[0]))

    def step(self, state: ToyState, action: jax.Array) -> ToyState:
        slowed = action / (self.mjx_model.body_mass[1] * self.mjx_model.dof_damping[0])
        moved = super().step(state, slowed)
        return moved.replace(data=pose(moved.obs[0]))


def make_weighted(**overrides: Any) -> WeightedPointReach:
    """Factory for `--env tests.toy_env:make_weighted`."""
    return WeightedPointReach(**overrides)
