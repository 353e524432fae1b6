"""Pixel observations: frames rendered inside the compiled step, once per policy step, stacked as documented."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlfit.config.schema import resolve
from rlfit.envs import load_env
from rlfit.envs.camera import render
from rlfit.envs.pixels import PIXELS_KEY, PixelObservation, frame_stack_keys, wrap_pixels
from rlfit.envs.vec_env import VecEnv
from rlfit.errors import UserError

N, T, SIZE, REPEAT, LENGTH = 3, 3, 16, 2, 4


@pytest.fixture(scope="module")
def pixel_env():
    config = resolve("CartpoleBalance", "smoke", overrides=["env.observation=pixels", f"env.image_size={SIZE}",
                                                            f"env.frames={T}"])
    return load_env(config.env, "cpu")


@pytest.mark.slow
def test_the_stack_holds_the_frames_of_the_last_policy_steps_rendered_after_the_repeats(pixel_env):
    assert isinstance(pixel_env, PixelObservation)
    assert pixel_env.observation_size[PIXELS_KEY] == (T, SIZE, SIZE, 3)
    envs = VecEnv(pixel_env, N, LENGTH, action_repeat=REPEAT)
    state = jax.jit(envs.reset)(jax.random.PRNGKey(0))
    step = jax.jit(envs.step)
    draw = jax.jit(jax.vmap(lambda data: render(pixel_env.camera, pixel_env.mjx_model, data)))
    first = np.asarray(draw(state.inner.inner.data))
    expected = [[first[e]] * T for e in range(N)]  # a reset fills the stack with its first frame
    actions = jax.random.uniform(jax.random.PRNGKey(1), (7, N, pixel_env.action_size), minval=-1, maxval=1)
    for action in actions:
        state, _ = step(state, action)
        frames = np.asarray(draw(state.inner.inner.data))  # the state after all REPEAT physics steps
        for e in range(N):
            restarted = int(state.step_count[e]) == 0
            expected[e] = [frames[e]] * T if restarted else expected[e][1:] + [frames[e]]
        obs = np.asarray(state.inner.obs[PIXELS_KEY])
        assert obs.dtype == np.uint8 and obs.shape == (N, T, SIZE, SIZE, 3)
        for e in range(N):
            np.testing.assert_array_equal(obs[e], np.stack(expected[e]))
    assert np.asarray(state.inner.obs["state"]).shape == (N, 5)  # the state stays beside the frames
    newest = np.asarray(state.inner.obs[PIXELS_KEY][:, -1])
    assert all(len(np.unique(newest[e].reshape(-1, 3), axis=0)) >= 3 for e in range(N))  # cart, pole, sky: a scene


@pytest.mark.slow
def test_one_repeat_renders_the_state_reached(pixel_env):
    reset, step = jax.jit(pixel_env.reset), jax.jit(pixel_env.step)  # compiled: op by op is far slower
    draw = jax.jit(lambda data: render(pixel_env.camera, pixel_env.mjx_model, data))  # the same (5 s -> 0.7 s)
    single = step(reset(jax.random.PRNGKey(0)), jnp.full((pixel_env.action_size,), 0.7))
    np.testing.assert_array_equal(single.obs[PIXELS_KEY][-1], draw(single.data))
    assert frame_stack_keys(jax.tree.map(lambda x: x, single.obs)) == (PIXELS_KEY,)


def test_state_observations_are_left_alone_and_plain_envs_refused_in_one_line():
    from tests.toy_env import make as make_toy

    config = resolve("CartpoleBalance", "smoke").env
    toy = make_toy()
    assert wrap_pixels(toy, config) is toy
    assert frame_stack_keys({"state": np.zeros(3)}) == () and frame_stack_keys(np.zeros((3, 4, 4, 3))) == ()
    pixels = resolve("CartpoleBalance", "smoke", overrides=["env.observation=pixels"]).env
    with pytest.raises(UserError, match="needs an MJX environment with mj_model") as error:
        wrap_pixels(toy, pixels)
    assert "\n" not in str(error.value)
    warp = resolve("CartpoleBalance", "smoke", overrides=["env.observation=pixels", "env.renderer=warp"]).env
    with pytest.raises(UserError, match="env.renderer=jax"):
        wrap_pixels(toy, warp)
