"""gymnax and XLand-MiniGrid adapters: the same trajectories as the libraries driven directly, stable state types,
no auto-reset, action mapping, observation encoding, and the loader's prefixes and errors."""

from __future__ import annotations

import importlib.util
import sys
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

# The libraries are imported by the tests that drive them (gymnax takes 2 s to import: every pytest-xdist worker
# collects this file, one runs it); without them the module is skipped, as importorskip would.
for _library in ("gymnax", "xminigrid"):
    if importlib.util.find_spec(_library) is None:
        pytest.skip(f"could not import '{_library}'", allow_module_level=True)

from rlfit.config.schema import EnvConfig  # noqa: E402
from rlfit.envs.adapters import load_gymnax, load_xminigrid  # noqa: E402
from rlfit.envs.loading import family_names, load_env  # noqa: E402
from rlfit.envs.vec_env import VecEnv  # noqa: E402
from rlfit.errors import UserError  # noqa: E402

N, T = 16, 25


def keys(n=N, seed=0):
    return jax.random.split(jax.random.PRNGKey(seed), n)


def adapter_rollout(env, reset_keys, actions):
    """actions [T, N] -> (reset states, stacked stepped states [T, N, ...]) under one jit."""

    def run(reset_keys, actions):
        first = jax.vmap(env.reset)(reset_keys)

        def body(state, action):
            state = jax.vmap(env.step)(state, action)
            return state, state

        return first, jax.lax.scan(body, first, actions)[1]

    return jax.jit(run)(reset_keys, actions)


def gymnax_rollout(name, reset_keys, actions):
    """The reference: gymnax's reset_env/step_env driven directly, with the key scheme the adapter documents
    (reset splits its key into (reset key, carried key); each step splits the carried key into (carried, step))."""
    import gymnax

    env, params = gymnax.make(name)

    def one(key, actions):
        reset_key, carried = jax.random.split(key)
        obs, state = env.reset_env(reset_key, params)

        def body(carry, action):
            state, carried = carry
            carried, step_key = jax.random.split(carried)
            obs, state, reward, terminated, _ = env.step_env(step_key, state, action, params)
            return (state, carried), (obs, reward, terminated)

        return obs, jax.lax.scan(body, (state, carried), actions)[1]

    return jax.jit(jax.vmap(one, in_axes=(0, 1), out_axes=(0, 1)))(reset_keys, actions)


def assert_same_types(env):
    first = jax.eval_shape(env.reset, jax.random.PRNGKey(0))
    action = jax.ShapeDtypeStruct((), jnp.int32) if hasattr(env, "num_actions") else \
        jax.ShapeDtypeStruct((env.action_size,), jnp.float32)
    stepped = jax.eval_shape(env.step, first, action)
    assert jax.tree.structure(first) == jax.tree.structure(stepped)
    assert [(x.shape, x.dtype, x.weak_type) for x in jax.tree.leaves(first)] == \
        [(x.shape, x.dtype, x.weak_type) for x in jax.tree.leaves(stepped)]
    assert first.obs.shape == (env.observation_size,) and first.obs.dtype == jnp.float32
    assert first.reward.dtype == first.done.dtype == jnp.float32 and first.done.shape == ()


@pytest.mark.parametrize("name, num_actions, obs_size", [("CartPole-v1", 2, 4), ("FourRooms-misc", 4, 4)])
def test_gymnax_adapter_follows_gymnax_step_for_step(name, num_actions, obs_size):
    env = load_gymnax(name, {})
    assert env.num_actions == num_actions and env.observation_size == obs_size
    assert not hasattr(env, "action_size")
    assert_same_types(env)
    if name == "CartPole-v1":
        actions = jnp.ones((T, N), jnp.int32)  # always push right: the pole falls within T steps
    else:
        actions = jax.random.randint(jax.random.PRNGKey(1), (T, N), 0, num_actions)
    first, steps = adapter_rollout(env, keys(), actions)
    ref_first, (ref_obs, ref_reward, ref_terminated) = gymnax_rollout(name, keys(), actions)
    np.testing.assert_array_equal(first.obs, np.asarray(ref_first, np.float32))
    np.testing.assert_array_equal(steps.obs, np.asarray(ref_obs, np.float32))
    np.testing.assert_array_equal(steps.reward, np.asarray(ref_reward, np.float32))
    np.testing.assert_array_equal(steps.done, np.asarray(ref_terminated, np.float32))
    if name == "CartPole-v1":
        done = np.asarray(steps.done)
        assert done.any(axis=0).all(), "every pole should have fallen"
        t = done.argmax(axis=0)  # first terminal step of each env
        rows = np.arange(N)
        # No auto-reset: the step after the terminal one continues from it (pole angle still out of bounds,
        # gymnax's post-terminal reward 0), it does not start a fresh episode near the upright pose.
        assert (t < T - 1).all()
        after = np.asarray(steps.obs)[t + 1, rows]
        assert (np.abs(after[:, 2]) > 0.2).all()
        assert (np.asarray(steps.done)[t + 1, rows] == 1).all() and (np.asarray(steps.reward)[t + 1, rows] == 0).all()


def test_vec_env_runs_and_resets_a_gymnax_env():
    env = load_env(EnvConfig(name="gymnax:FourRooms-misc"))
    vec = VecEnv(env, num_envs=8, episode_length=20)
    state = jax.jit(vec.reset)(jax.random.PRNGKey(0))
    step = jax.jit(vec.step)
    lengths = []
    for action_key in jax.random.split(jax.random.PRNGKey(1), 50):
        state, out = step(state, jax.random.randint(action_key, (8,), 0, env.num_actions))
        lengths.extend(np.asarray(out.finished_length)[np.asarray(out.finished_length) > 0].tolist())
    assert len(lengths) >= 8 * 2  # every env ends at least twice in 50 steps (the time limit is 20)
    assert max(lengths) <= 20
    assert (np.asarray(state.step_count) < 20).all()


def test_gymnax_box_actions_are_rescaled_from_unit_interval():
    env = load_gymnax("Pendulum-v1", {})
    assert env.action_size == 1 and env.observation_size == 3 and not hasattr(env, "num_actions")
    assert_same_types(env)
    np.testing.assert_allclose(env.gymnax_action(jnp.array([1.0])), [2.0])
    np.testing.assert_allclose(env.gymnax_action(jnp.array([-1.0])), [-2.0])
    np.testing.assert_allclose(env.gymnax_action(jnp.array([0.25])), [0.5])
    # Through a step: action 1.0 acts as gymnax's torque `high` (2.0), recorded by Pendulum as last_u.
    import gymnax

    genv, params = gymnax.make("Pendulum-v1")
    state = env.reset(jax.random.PRNGKey(3))
    stepped = env.step(state, jnp.array([1.0]))
    _, step_key = jax.random.split(state.info.key)
    ref_obs, ref_state, ref_reward, _, _ = genv.step_env(step_key, state.info.env_state, jnp.array([2.0]), params)
    assert float(stepped.info.env_state.last_u) == 2.0 == float(ref_state.last_u)
    np.testing.assert_allclose(stepped.obs, ref_obs, rtol=1e-6)
    np.testing.assert_allclose(stepped.reward, ref_reward, rtol=1e-6)


# Empty-8x8: the agent starts at (1, 1) facing right, the goal is at (6, 6); 0 = forward, 1 = turn clockwise.
PATH_TO_GOAL = [0] * 5 + [1] + [0] * 5
GOAL_STEP = len(PATH_TO_GOAL) - 1


def decode(obs, view_size):
    """Tile and colour ids back from the one-hot observation (the adapter's documented encoding)."""
    from xminigrid.core.constants import NUM_COLORS, NUM_TILES

    cells = np.asarray(obs).reshape(obs.shape[:-1] + (view_size, view_size, NUM_TILES + NUM_COLORS))
    assert (cells[..., :NUM_TILES].sum(-1) == 1).all() and (cells[..., NUM_TILES:].sum(-1) == 1).all()
    return np.stack([cells[..., :NUM_TILES].argmax(-1), cells[..., NUM_TILES:].argmax(-1)], axis=-1)


def test_xminigrid_adapter_follows_xminigrid_and_does_not_auto_reset():
    env = load_xminigrid("MiniGrid-Empty-8x8", {})
    assert env.num_actions == 6 and env.observation_size == 7 * 7 * 25
    assert_same_types(env)
    actions = jnp.broadcast_to(jnp.array(PATH_TO_GOAL + [0, 2, 0], jnp.int32)[:, None], (14, 4))
    first, steps = adapter_rollout(env, keys(4), actions)

    import xminigrid

    genv, params = xminigrid.make("MiniGrid-Empty-8x8")
    timestep = jax.jit(lambda key: genv.reset(params, key))(keys(4)[0])
    np.testing.assert_array_equal(decode(first.obs[0], 7), timestep.observation)
    ref_views, ref_rewards = [], []
    step = jax.jit(lambda t, a: genv.step(params, t, a))
    for action in np.asarray(actions[:, 0]):
        timestep = step(timestep, action)
        ref_views.append(np.asarray(timestep.observation))
        ref_rewards.append(float(timestep.reward))
    np.testing.assert_array_equal(decode(steps.obs[:, 0], 7), np.stack(ref_views))
    np.testing.assert_allclose(steps.reward[:, 0], ref_rewards, rtol=1e-6)

    done = np.asarray(steps.done[:, 0])
    assert done[:GOAL_STEP].sum() == 0 and done[GOAL_STEP] == 1 and steps.reward[GOAL_STEP, 0] > 0.9
    # No auto-reset: after the goal the step count keeps growing and the agent is not back at the start.
    np.testing.assert_array_equal(steps.info.state.step_num[:, 0], np.arange(1, 15))
    assert (np.asarray(steps.info.state.agent.position[GOAL_STEP + 1:, 0]) != [1, 1]).any(axis=-1).all()


def test_xminigrid_truncation_is_not_done_and_view_size_sets_obs_size():
    assert load_xminigrid("MiniGrid-Empty-16x16", {}).observation_size == \
        load_xminigrid("MiniGrid-Empty-8x8", {}).observation_size == 7 * 7 * 25
    small = load_xminigrid("MiniGrid-Empty-8x8", {"view_size": 5, "max_steps": 3})
    assert small.observation_size == 5 * 5 * 25 and small.params.view_size == 5
    state = small.reset(jax.random.PRNGKey(0))
    assert state.obs.shape == (5 * 5 * 25,)
    step = jax.jit(small.step)
    for _ in range(3):
        state = step(state, jnp.int32(1))  # turning in place never reaches the goal
    assert int(state.info.step_type) == 2 and float(state.info.discount) == 1.0  # xminigrid: LAST, truncated
    assert float(state.done) == 0.0
    resized = load_xminigrid("MiniGrid-Empty-8x8", {"height": 10, "width": 10})
    assert resized.max_episode_steps == 4 * 10 * 10


def test_loader_dispatches_prefixes_and_reports_user_errors():
    env = load_env(EnvConfig(name="gymnax:FourRooms-misc"))
    assert env.num_actions == 4
    assert load_env(EnvConfig(name="gymnax:CartPole-v1", overrides={"max_steps_in_episode": 50})).params \
        .max_steps_in_episode == 50
    assert load_env(EnvConfig(name="gymnax:FourRooms-misc", overrides={"use_visual_obs": True})).observation_size \
        == 13 * 13 * 2
    assert load_env(EnvConfig(name="xminigrid:MiniGrid-Empty-8x8")).num_actions == 6
    with pytest.raises(UserError, match="FourRooms-misc"):
        load_env(EnvConfig(name="gymnax:FourRoom-misc"))
    with pytest.raises(UserError, match="MiniGrid-Empty-8x8"):
        load_env(EnvConfig(name="xminigrid:MiniGrid-Empty-8x9"))
    with pytest.raises(UserError, match="'gravityy'.*gravity"):
        load_env(EnvConfig(name="gymnax:CartPole-v1", overrides={"gravityy": 1.0}))
    with pytest.raises(UserError, match="'viewsize'.*view_size"):
        load_env(EnvConfig(name="xminigrid:MiniGrid-Empty-8x8", overrides={"viewsize": 5}))
    with pytest.raises(UserError, match="pixels.*gymnax environment: use env.observation: state"):
        load_env(EnvConfig(name="gymnax:CartPole-v1", observation="pixels"))
    with pytest.raises(UserError, match="XLand-MiniGrid environment"):
        load_env(EnvConfig(name="xminigrid:MiniGrid-Empty-8x8", observation="pixels"))
    assert "gymnax:CartPole-v1" in family_names("gymnax")
    assert "xminigrid:MiniGrid-Empty-8x8" in family_names("xminigrid")
    gridworld = family_names("gridworld")
    assert gridworld and all(name.startswith("gridworld:") for name in gridworld)
    assert hasattr(load_env(EnvConfig(name=gridworld[0])), "num_actions")
    with pytest.raises(UserError, match="gridworld environment"):
        load_env(EnvConfig(name=gridworld[0], observation="pixels"))


def test_missing_package_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "gymnax", None)  # `import gymnax` now raises ImportError
    with pytest.raises(UserError, match=r"pip install 'rlfit\[gridworlds\]'"):
        load_gymnax("CartPole-v1", {})


def test_factory_envs_need_action_size_or_num_actions(monkeypatch):
    class Discrete:
        num_actions = 3
        observation_size = 2
        reset = step = None

    class Neither:
        observation_size = 2
        reset = step = None

    module = types.ModuleType("rlfit_test_factories")
    module.discrete, module.neither = Discrete, Neither
    monkeypatch.setitem(sys.modules, "rlfit_test_factories", module)
    assert load_env(EnvConfig(name="rlfit_test_factories:discrete")).num_actions == 3
    with pytest.raises(UserError, match="action_size"):
        load_env(EnvConfig(name="rlfit_test_factories:neither"))
