"""GridWorld: solvable layouts (checked by a plain-Python BFS), obstacle density, moves and rewards, the egocentric
observation (checked by hand and against a numpy reference), one compile per function, and the variant loader."""

from __future__ import annotations

from collections import deque

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlfit.envs.gridworld import NAMES, VARIANTS, GridConfig, GridInfo, GridWorld, load
from rlfit.envs.simple_state import SimpleState
from rlfit.envs.vec_env import VecEnv
from rlfit.errors import UserError

UP, RIGHT, DOWN, LEFT = 0, 1, 2, 3


def batch_reset(env: GridWorld, count: int, seed: int = 0):
    return jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.key(seed), count))


def inner_obstacles(env: GridWorld, obstacles) -> np.ndarray:
    """[..., size, size] obstacles of the walkable square (the stored grid is padded)."""
    p, n = env.pad, env.config.size
    return np.asarray(obstacles)[..., p : p + n, p : p + n]


def bfs_reachable(obstacles: np.ndarray, start, goal) -> bool:
    """Plain breadth-first search over free cells, 4-neighbour."""
    n = obstacles.shape[0]
    seen, queue = {tuple(start)}, deque([tuple(start)])
    while queue:
        row, col = queue.popleft()
        if (row, col) == tuple(goal):
            return True
        for d_row, d_col in ((-1, 0), (1, 0), (0, -1), (0, 1)):
            cell = (row + d_row, col + d_col)
            if 0 <= cell[0] < n and 0 <= cell[1] < n and not obstacles[cell] and cell not in seen:
                seen.add(cell)
                queue.append(cell)
    return False


def reference_window(obstacles: np.ndarray, agent, goal, view: int) -> np.ndarray:
    """[view, view, 3] wall/obstacle/goal around `agent`, cell by cell."""
    n, half = obstacles.shape[0], view // 2
    window = np.zeros((view, view, 3), np.float32)
    for i in range(view):
        for j in range(view):
            row, col = agent[0] + i - half, agent[1] + j - half
            if not (0 <= row < n and 0 <= col < n):
                window[i, j, 0] = 1.0
                continue
            window[i, j, 1] = float(obstacles[row, col])
            window[i, j, 2] = float((row, col) == tuple(goal))
    return window


def place(env: GridWorld, agent, goal, obstacle_cells=()) -> SimpleState:
    """A state built by hand: agent, goal and obstacles in walkable-square coordinates."""
    obstacles = np.zeros((env.config.size + 2 * env.pad,) * 2, bool)
    for row, col in obstacle_cells:
        obstacles[row + env.pad, col + env.pad] = True
    side = obstacles.shape[0]
    info = GridInfo(jnp.asarray(obstacles), jnp.array(agent, jnp.int32), jnp.array(goal, jnp.int32), jnp.int32(0),
                    jnp.zeros((side, side, env.config.distractors), bool))
    zero = jnp.float32(0.0)
    return SimpleState(env._observe(info), zero, zero, {"reached_goal": zero}, info)


RESET_CASES = {  # one compile each, shared by the tests below
    "obstacles-8": ("Obstacles-8x8", {}),
    "corner-16": ("Obstacles-16x16", {"goal": "corner"}),
    "far-5": ("Empty-5x5", {"obstacle_density": 0.7, "goal": "far"}),  # mostly unsolvable draws: the fallback clears
}


@pytest.fixture(scope="module")
def resets():
    """name -> (env, 256 states from a batched reset), computed on first use."""
    cache = {}

    def get(name):
        if name not in cache:
            env = load(*RESET_CASES[name])
            cache[name] = env, batch_reset(env, 256)
        return cache[name]

    return get


@pytest.fixture(scope="module")
def small():
    env = load("Empty-5x5", {"obstacle_penalty": -0.1})
    return env, jax.jit(env.step)


@pytest.mark.parametrize("name", list(RESET_CASES))
def test_every_layout_is_solvable_with_distinct_free_start_and_goal(resets, name):
    env, states = resets(name)
    obstacles = inner_obstacles(env, states.info.obstacles)
    agents, goals = np.asarray(states.info.agent), np.asarray(states.info.goal)
    for grid, agent, goal in zip(obstacles, agents, goals):
        assert tuple(agent) != tuple(goal)
        assert not grid[tuple(agent)] and not grid[tuple(goal)]
        assert bfs_reachable(grid, agent, goal)


def test_dense_layouts_are_redrawn_and_after_too_many_tries_cleared(resets):
    env, states = resets("far-5")  # density 0.7: most draws block the far corner
    counts = inner_obstacles(env, states.info.obstacles).reshape(256, -1).sum(axis=1)
    assert np.any(counts == 0) and np.any(counts > 5)


def test_obstacle_fraction_is_close_to_the_density_and_layouts_differ(resets):
    env, states = resets("obstacles-8")
    obstacles = inner_obstacles(env, states.info.obstacles)
    # Start and goal are never obstacles (2 of 64 cells) and redrawing unsolvable layouts lowers the density a little.
    expected = 0.15 * 62 / 64
    assert 0.8 * expected < obstacles.mean() < expected + 0.01
    distinct = {grid.tobytes() for grid in obstacles[:64]}
    assert len(distinct) > 60
    assert len({tuple(a) for a in np.asarray(states.info.agent)[:64]}) > 20


def test_goal_modes_put_the_goal_where_documented(resets):
    def corners(size):
        return {(0, 0), (0, size - 1), (size - 1, 0), (size - 1, size - 1)}

    goals = np.asarray(resets("obstacles-8")[1].info.goal)
    assert len({tuple(g) for g in goals}) > 40  # 'random': anywhere
    goals = np.asarray(resets("corner-16")[1].info.goal)
    assert {tuple(g) for g in goals} == corners(16)  # 'corner': all four corners, nothing else
    agents, goals = np.asarray(resets("far-5")[1].info.agent), np.asarray(resets("far-5")[1].info.goal)
    assert {tuple(g) for g in goals} == corners(5)
    assert np.all(np.abs(goals - agents) >= 2)  # 'far': the opposite quadrant, at least half the grid away per axis


def test_reset_and_step_compile_once_across_layouts():
    env = load("Obstacles-8x8", {})
    traces = {"reset": 0, "step": 0}

    def reset(key):
        traces["reset"] += 1
        return env.reset(key)

    def step(state, action):
        traces["step"] += 1
        return env.step(state, action)

    reset_jit, step_jit = jax.jit(reset), jax.jit(step)
    for seed in range(4):
        state = reset_jit(jax.random.key(seed))
        for action in range(4):
            state = step_jit(state, jnp.int32(action))
    assert traces == {"reset": 1, "step": 1}


def test_reset_and_step_outputs_have_the_same_structure_shapes_and_dtypes(small):
    env, step = small
    reset = batch_reset(env, 1)
    reset = jax.tree.map(lambda x: x[0], reset)
    stepped = step(reset, jnp.int32(RIGHT))
    assert jax.tree.structure(reset) == jax.tree.structure(stepped)
    describe = lambda tree: [(jnp.shape(x), jnp.result_type(x)) for x in jax.tree.leaves(tree)]  # noqa: E731
    assert describe(reset) == describe(stepped)
    assert reset.obs.shape == (env.observation_size,) and reset.obs.dtype == jnp.float32
    assert float(reset.reward) == 0.0 and float(reset.done) == 0.0 and float(reset.metrics["reached_goal"]) == 0.0


def test_walls_and_obstacles_block_and_a_free_move_costs_the_step_cost(small):
    env, step = small
    corner = place(env, agent=(0, 0), goal=(4, 4), obstacle_cells=[(1, 0)])
    for action in (UP, LEFT, DOWN):  # wall, wall, obstacle
        after = step(corner, jnp.int32(action))
        assert np.asarray(after.info.agent).tolist() == [0, 0]
        assert float(after.reward) == pytest.approx(-0.01 - 0.1)
        assert float(after.done) == 0.0
    after = step(corner, jnp.int32(RIGHT))
    assert np.asarray(after.info.agent).tolist() == [0, 1]
    assert float(after.reward) == pytest.approx(-0.01)
    assert float(after.done) == 0.0 and int(after.info.steps) == 1


def test_reaching_the_goal_pays_goal_reward_minus_step_cost_and_ends(small):
    env, step = small
    for action, agent in ((RIGHT, (2, 1)), (DOWN, (1, 2)), (LEFT, (2, 3)), (UP, (3, 2))):
        after = step(place(env, agent=agent, goal=(2, 2)), jnp.int32(action))
        assert np.asarray(after.info.agent).tolist() == [2, 2]
        assert float(after.reward) == pytest.approx(1.0 - 0.01)
        assert float(after.done) == 1.0 and float(after.metrics["reached_goal"]) == 1.0


def test_actions_of_shape_one_or_float_act_like_an_int_scalar(small):
    env, _ = small
    state = place(env, agent=(2, 2), goal=(4, 4))
    for action in (jnp.int32(DOWN), jnp.array([DOWN], jnp.int32), jnp.float32(DOWN), jnp.array([DOWN], jnp.float32)):
        assert np.asarray(env.step(state, action).info.agent).tolist() == [3, 2]


def test_observation_in_the_top_left_corner_by_hand(small):
    env, _ = small
    state = place(env, agent=(0, 0), goal=(1, 2), obstacle_cells=[(2, 0)])
    window = np.asarray(env._observe(state.info)).reshape(5, 5, 3)
    wall = np.array([[1, 1, 1, 1, 1],
                     [1, 1, 1, 1, 1],
                     [1, 1, 0, 0, 0],
                     [1, 1, 0, 0, 0],
                     [1, 1, 0, 0, 0]])
    np.testing.assert_array_equal(window[..., 0], wall)
    obstacle, goal = np.zeros((5, 5)), np.zeros((5, 5))
    obstacle[4, 2] = 1  # cell (2, 0) is two rows below the agent
    goal[3, 4] = 1  # cell (1, 2) is one row below and two columns right
    np.testing.assert_array_equal(window[..., 1], obstacle)
    np.testing.assert_array_equal(window[..., 2], goal)


def test_observations_match_a_cell_by_cell_reference_and_do_not_depend_on_size(resets):
    (env8, states8), (env16, states16) = resets("obstacles-8"), resets("corner-16")
    assert env8.observation_size == env16.observation_size == 5 * 5 * 3
    for env, states in ((env8, states8), (env16, states16)):
        assert states.obs.shape == (256, env.observation_size)
        obstacles, obs = inner_obstacles(env, states.info.obstacles), np.asarray(states.obs)
        agents, goals = np.asarray(states.info.agent).tolist(), np.asarray(states.info.goal).tolist()
        for i in range(32):
            np.testing.assert_array_equal(obs[i], reference_window(obstacles[i], agents[i], goals[i], 5).reshape(-1))


def test_goal_offset_appends_the_scaled_goal_direction():
    env = load("Empty-8x8", {"goal_offset": True, "view_size": 3})
    assert env.observation_size == 3 * 3 * 3 + 2
    state = place(env, agent=(6, 1), goal=(2, 7))
    offset = np.asarray(env._observe(state.info))[-2:]
    np.testing.assert_allclose(offset, [6 / 8, -4 / 8])  # (d_col, d_row) / size


def test_vec_env_auto_resets_gridworlds_with_random_actions():
    env = load("Empty-5x5", {})
    vec = VecEnv(env, num_envs=8, episode_length=10)

    def rollout(key):
        def body(state, step_key):
            action = jax.random.randint(step_key, (8,), 0, env.num_actions)
            state, output = vec.step(state, action)
            return state, output.termination + output.truncation

        state = vec.reset(key)
        return jax.lax.scan(body, state, jax.random.split(key, 40))

    state, finished = jax.jit(rollout)(jax.random.PRNGKey(0))  # VecEnv keeps raw uint32 keys
    assert float(finished.sum()) >= 8 * 4  # every env ends at least once every 10 steps
    assert np.all(np.asarray(state.step_count) < 10)


def test_variants_and_names():
    assert {"Obstacles-8x8", "Obstacles-16x16", "Empty-8x8", "Empty-5x5"} <= set(VARIANTS)
    assert list(NAMES) == sorted(VARIANTS)
    env = load("Obstacles-16x16", {"obstacle_density": 0.3, "goal": "far"})
    assert env.config == GridConfig(size=16, obstacle_density=0.3, goal="far")
    assert env.num_actions == 4 and not hasattr(env, "action_size")


def test_unknown_variant_suggests_the_nearest_name():
    with pytest.raises(UserError, match=r"unknown gridworld 'Obstacle-8x8' \(did you mean Obstacles-8x8\?\)") as error:
        load("Obstacle-8x8", {})
    assert "Empty-5x5" in str(error.value)


def test_unknown_override_names_the_key_and_lists_the_fields():
    with pytest.raises(UserError, match="obstacle_densty") as error:
        load("Empty-8x8", {"obstacle_densty": 0.2})
    assert "did you mean obstacle_density" in str(error.value) and "view_size" in str(error.value)


@pytest.mark.parametrize("field, value", [
    ("size", 1), ("size", 8.0), ("obstacle_density", 1.0), ("obstacle_density", -0.1),
    ("view_size", 4), ("view_size", 1), ("goal", "middle"), ("step_cost", "0.1"), ("goal_offset", 1),
])
def test_bad_values_raise_a_one_line_error_naming_the_field(field, value):
    with pytest.raises(UserError, match=field) as error:
        load("Empty-8x8", {field: value})
    assert "\n" not in str(error.value)
