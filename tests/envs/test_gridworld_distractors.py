"""The gridworld's nuisance channels (distractors) and its shortest-path reference returns."""

from __future__ import annotations

from collections import deque

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlfit.envs.gridworld import GridConfig, GridWorld, load, path_length, reference_returns
from rlfit.errors import UserError

KEYS = jax.random.split(jax.random.PRNGKey(3), 256)


def episodes(env: GridWorld, actions: np.ndarray):
    """Observations [T + 1, N, D], rewards and dones [T, N] of N episodes from KEYS[:N] under fixed actions [T, N]."""
    reset, step = jax.jit(jax.vmap(env.reset)), jax.jit(jax.vmap(env.step))
    state = reset(KEYS[: actions.shape[1]])
    observations, rewards, dones = [state.obs], [], []
    for row in actions:
        state = step(state, jnp.asarray(row))
        observations.append(state.obs)
        rewards.append(state.reward)
        dones.append(state.done)
    return np.stack(observations), np.stack(rewards), np.stack(dones)


def channels(env: GridWorld, obs: np.ndarray) -> np.ndarray:
    """[..., view, view, 3 + distractors] of flat observations [..., D]."""
    view = env.config.view_size
    return obs.reshape(obs.shape[:-1] + (view, view, env.channels))


ACTIONS = np.random.default_rng(0).integers(0, 4, size=(12, 64))


def test_the_observation_gains_one_channel_per_distractor_on_every_cell():
    env = load("Obstacles-8x8", {"distractors": 3, "distractor_density": 0.2})
    assert env.observation_size == 5 * 5 * 6
    state = env.reset(KEYS[0])
    assert state.obs.shape == (150,) and state.info.distractors.shape == (12, 12, 3)
    with_offset = load("Obstacles-8x8", {"distractors": 2, "goal_offset": True})
    assert with_offset.reset(KEYS[0]).obs.shape == (5 * 5 * 5 + 2,) == (with_offset.observation_size,)


def test_changing_the_distractors_changes_nothing_but_the_distractor_channels():
    """The same reset keys and actions: layouts, task channels, rewards and dones are identical with no distractors,
    sparse ones and dense ones, so a suite that shifts their density shifts the nuisance features alone."""
    plain = GridWorld(GridConfig())
    sparse = GridWorld(GridConfig(distractors=3, distractor_density=0.1))
    dense = GridWorld(GridConfig(distractors=3, distractor_density=0.6))
    obs_plain, rewards_plain, dones_plain = episodes(plain, ACTIONS)
    for env in (sparse, dense):
        obs, rewards, dones = episodes(env, ACTIONS)
        np.testing.assert_array_equal(channels(env, obs)[..., :3], channels(plain, obs_plain))
        np.testing.assert_array_equal(rewards, rewards_plain)
        np.testing.assert_array_equal(dones, dones_plain)
    lit = {density: channels(env, episodes(env, ACTIONS[:1])[0])[0, ..., 3:].mean()
           for density, env in ((0.1, sparse), (0.6, dense))}
    for density, mean in lit.items():  # 64 episodes x 75 cells: a binomial's standard error is below 0.01
        assert abs(mean - density) < 0.03, lit


def test_distractors_are_the_same_whatever_the_layout_and_uncorrelated_with_it():
    """Drawn from a key of their own: the same key gives the same tiles on a denser grid or with another goal mode,
    and the tiles are uncorrelated with the obstacles, the goal and the walls."""
    base = GridConfig(distractors=2, distractor_density=0.3)
    reset = jax.jit(jax.vmap(GridWorld(base).reset))
    other = jax.jit(jax.vmap(GridWorld(base._replace(obstacle_density=0.4, goal="far")).reset))
    first, second = reset(KEYS), other(KEYS)
    np.testing.assert_array_equal(first.info.distractors, second.info.distractors)
    assert not np.array_equal(first.info.obstacles, second.info.obstacles)
    env = GridWorld(base)
    window = channels(env, np.asarray(first.obs)).reshape(-1, env.channels)
    correlation = np.corrcoef(window.T)  # [5, 5]: three task channels, two distractors
    assert np.all(np.abs(correlation[:3, 3:]) < 0.05), correlation


def bfs_moves(free: np.ndarray, start: tuple[int, int], goal: tuple[int, int]) -> int:
    """Shortest 4-neighbour path length by a plain breadth-first search (-1 if unreachable)."""
    seen, queue = {start: 0}, deque([start])
    while queue:
        cell = queue.popleft()
        if cell == goal:
            return seen[cell]
        for d_row, d_col in ((-1, 0), (1, 0), (0, -1), (0, 1)):
            row, col = cell[0] + d_row, cell[1] + d_col
            if 0 <= row < free.shape[0] and 0 <= col < free.shape[1] and free[row, col] and (row, col) not in seen:
                seen[(row, col)] = seen[cell] + 1
                queue.append((row, col))
    return -1


def test_path_length_matches_a_breadth_first_search():
    rng = np.random.default_rng(1)
    search = jax.jit(path_length)
    for _ in range(40):
        free = rng.random((7, 7)) > 0.35
        start, goal = rng.choice(49, size=2, replace=False)
        free.flat[start] = free.flat[goal] = True
        expected = bfs_moves(free, divmod(int(start), 7), divmod(int(goal), 7))
        assert int(search(jnp.asarray(free), jnp.int32(start), jnp.int32(goal))) == expected


def test_reference_returns_bound_every_return_and_a_shortest_path_attains_the_optimum():
    """Optimal = goal reward - step cost x shortest path; failing = -step cost x episode length. Walking the
    shortest path (found by breadth-first search here) earns exactly the optimum."""
    config = GridConfig(size=6, obstacle_density=0.2, goal_reward=1.0, step_cost=0.02)
    env = GridWorld(config)
    state = env.reset(jax.random.PRNGKey(7))
    optimal, failing = env.reference_returns(state, 40)
    free = ~np.asarray(state.info.obstacles)[env.pad : env.pad + 6, env.pad : env.pad + 6]
    moves = bfs_moves(free, tuple(int(x) for x in state.info.agent), tuple(int(x) for x in state.info.goal))
    assert float(optimal) == pytest.approx(1.0 - 0.02 * moves) and float(failing) == pytest.approx(-0.02 * 40)
    total = 0.0
    for action in shortest_actions(free, tuple(int(x) for x in state.info.agent), tuple(int(x) for x in state.info.goal)):
        state = env.step(state, jnp.int32(action))
        total += float(state.reward)
    assert bool(state.done) and total == pytest.approx(float(optimal), abs=1e-5)
    np.testing.assert_allclose(reference_returns(config, jnp.array([0, 3]), 10)[0], [1.0, 0.94])


def shortest_actions(free: np.ndarray, start: tuple[int, int], goal: tuple[int, int]) -> list[int]:
    """The gridworld actions (0 up, 1 right, 2 down, 3 left) of one shortest path, by breadth-first search."""
    moves = {0: (-1, 0), 1: (0, 1), 2: (1, 0), 3: (0, -1)}
    parent, queue = {start: None}, deque([start])
    while queue:
        cell = queue.popleft()
        for action, (d_row, d_col) in moves.items():
            nxt = (cell[0] + d_row, cell[1] + d_col)
            if 0 <= nxt[0] < free.shape[0] and 0 <= nxt[1] < free.shape[1] and free[nxt] and nxt not in parent:
                parent[nxt] = (cell, action)
                queue.append(nxt)
    actions, cell = [], goal
    while parent[cell] is not None:
        cell, action = parent[cell]
        actions.append(action)
    return actions[::-1]


@pytest.mark.parametrize("overrides, message", [
    ({"distractors": -1}, "distractors must be an integer >= 0"),
    ({"distractors": 1.5}, "distractors must be an integer >= 0"),
    ({"distractor_density": 1.5}, "distractor_density must be a number in [0, 1]"),
    ({"distractor_density": "dense"}, "distractor_density must be a number in [0, 1]"),
])
def test_bad_distractor_settings_are_one_line_user_errors(overrides, message):
    with pytest.raises(UserError, match=message.replace("[", r"\[").replace("]", r"\]")) as error:
        load("Obstacles-8x8", overrides)
    assert "\n" not in str(error.value)
